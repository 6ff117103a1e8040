"""Defines that restate a source's own defaults: dropped before the build, so they share its cubin.

A family's launch often passes the values its source would pick anyway: transpose's variants pass
``TILE=32``, ``ROWS=8`` or ``PAD=0``, which transpose.cu gives itself with ``#ifndef TILE`` /
``#define TILE 32`` / ``#endif``. Each such define set used to be another cache key and another nvcc run
(0.5-5 s) for the same cubin. :func:`drop_restated` removes a define when the source provably ends up
with the same tokens without it, so ``cudalab compile transpose`` or ``--all`` on a cold cache builds
each device code once.

"Provably" is kept narrow, because serving the wrong cubin is far worse than one more build. A
define ``NAME=VALUE`` is dropped only when, reading the source with its local ``#include "..."`` files
spliced in where they are first included (what nvcc sees, less the toolkit's headers):

* the first mention of ``NAME`` outside comments is a block of exactly ``#ifndef NAME``,
  ``#define NAME V`` and ``#endif``, with ``V`` the same text as ``VALUE`` (spaces aside);
* that block is inside no conditional but include guards (``#ifndef G`` / ``#define G`` with no value);
* no toolkit or unresolved ``#include`` comes before it (a toolkit header could test ``NAME``: the
  prelude defines it before everything, the default only from its block on).

Before the block nothing names ``NAME``; from the block on it is defined to the same tokens either way.
So the preprocessed device code, and with the ``#line`` after the prelude the line info too, is the
same: the cubin is the same.

A define the source never names is dropped too, when the source includes no toolkit header at all:
``--add`` gives every kernel of yours ``BLOCK_X`` ... ``TILE_Z``, and a kernel that reads none of them
builds once for every block shape. Token pasting (``##``) could form a name that is never written out,
so a source that pastes keeps every define.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Mapping

# Comments out, string and character literals kept whole (a "//" inside a string is not a comment).
_LEXEME = re.compile(r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|//[^\n]*|/\*.*?\*/', re.S)
_DIRECTIVE = re.compile(r"^[ \t]*#[ \t]*(\w+)(.*)$")
_INCLUDE_LOCAL = re.compile(r'^\s*"([^"]+)"')
_DEFINE = re.compile(r"^\s*([A-Za-z_]\w*)(\s.*)?$")  # an object-like macro: no "(" right after the name
_WORD = re.compile(r"[A-Za-z_]\w*")


def _strip_comments(text: str) -> str:
    def keep(m: re.Match) -> str:
        s = m.group(0)
        if s.startswith(("//", "/*")):
            return "\n" * s.count("\n") if s.startswith("/*") else ""  # line numbers unchanged
        return s

    return _LEXEME.sub(keep, text)


def find_local(name: str, including: Path, place: Path) -> Path | None:
    """Where nvcc finds ``#include "name"``: beside the including file, then in ``place`` (the source's
    folder, the build's ``-I``); None when neither has it (a toolkit header, or missing)."""
    for folder in (including.parent, place):
        found = (folder / name).resolve()
        if found.is_file():
            return found
    return None


def _lines(source: Path, place: Path, seen: set[Path]) -> list[str] | None:
    """The comment-free lines of ``source`` with its local includes spliced in at their first
    inclusion; a toolkit or unresolved include becomes a ``#include <>`` marker line. None when a file
    cannot be read (no dropping then)."""
    try:
        text = source.read_text(errors="replace")
    except OSError:
        return None
    out: list[str] = []
    for line in _strip_comments(text).replace("\\\n", " ").splitlines():
        d = _DIRECTIVE.match(line)
        if d and d.group(1) == "include":
            m = _INCLUDE_LOCAL.match(d.group(2))
            found = find_local(m.group(1), source, place) if m else None
            if found is None:
                out.append("#include <>")
            elif found not in seen:
                seen.add(found)
                inner = _lines(found, place, seen)
                if inner is None:
                    return None
                out.extend(inner)
            continue
        out.append(line)
    return out


def source_defaults(source: Path) -> dict[str, str]:
    """``NAME -> VALUE`` for each default of ``source`` that a restating define may be dropped for
    (the rules in the module's docstring)."""
    return _analyse(source)[0]


def _analyse(source: Path) -> tuple[dict[str, str], set[str] | None]:
    """The droppable defaults, and every name the source writes (None: it pastes tokens or includes a
    toolkit header, so an unnamed define may still matter)."""
    source = Path(source)
    lines = _lines(source, source.resolve().parent, {source.resolve()})
    if lines is None or any("##" in ln for ln in lines):
        return {}, None
    directives = [_DIRECTIVE.match(ln) for ln in lines]
    stack: list[bool] = []  # one entry per open conditional: True for an include guard
    mentioned: set[str] = set()
    toolkit = False
    out: dict[str, str] = {}
    i = 0
    while i < len(lines):
        d = directives[i]
        word = d.group(1) if d else ""
        if word == "ifndef":
            name = d.group(2).strip()
            nxt = [j for j in range(i + 1, min(i + 4, len(lines))) if lines[j].strip()]
            define = _DIRECTIVE.match(lines[nxt[0]]) if nxt else None
            body = _DEFINE.match(define.group(2)) if define and define.group(1) == "define" else None
            if body and body.group(1) == name:
                value = (body.group(2) or "").strip()
                end = _DIRECTIVE.match(lines[nxt[1]]) if len(nxt) > 1 else None
                if not value:  # an include guard: transparent
                    stack.append(True)
                    mentioned.add(name)
                    i = nxt[0] + 1
                    continue
                if end and end.group(1) == "endif" and not end.group(2).strip():
                    if name not in mentioned and all(stack) and not toolkit:
                        out[name] = value
                    mentioned.add(name)
                    mentioned.update(_WORD.findall(value))
                    i = nxt[1] + 1
                    continue
        if word in ("if", "ifdef", "ifndef"):
            stack.append(False)
        elif word == "endif" and stack:
            stack.pop()
        elif word == "include":
            toolkit = True
        mentioned.update(_WORD.findall(lines[i]))
        i += 1
    names = None if any(ln.startswith("#include <>") for ln in lines) else set(_WORD.findall("\n".join(lines)))
    return out, names


def drop_restated(source: Path, defines: Mapping[str, str]) -> dict[str, str]:
    """``defines`` without those that restate ``source``'s own defaults (same text, spaces aside) and,
    where that is safe, those it never names."""
    if not defines:
        return {}
    defaults, names = _analyse(source)
    return {k: v for k, v in defines.items()
            if " ".join(str(v).split()) != " ".join(defaults.get(k, "\0").split()) and (names is None or k in names)}
