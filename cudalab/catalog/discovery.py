"""Families from outside the package: ``--family-path DIR`` / ``CUDALAB_PATH`` folders and the
``cudalab.families`` entry-point group.

A folder on the path holds ``<family>/family.toml`` with its kernels and its Python module
(``<module>.py`` beside family.toml, ``module`` defaulting to the family's name with ``-`` as ``_``);
a folder that is itself a family (holds family.toml) is taken as that one family. An entry point
names a module (``softmax = "mypkg.softmax"``) whose folder holds family.toml and kernels.

``--family-path`` is written into ``CUDALAB_PATH`` (first), so the GPU workers and the children run
under ncu and compute-sanitizer, which inherit the environment, find the same families.

Light on purpose (the catalog imports it): nothing here imports NumPy or a family's module; the
module is imported by :func:`cudalab.catalog.outside.load_outside` when a command needs the family.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
import sys
import zlib
from dataclasses import replace
from pathlib import Path
from typing import Any, Sequence

from cudalab.catalog.folder import load_family
from cudalab.errors import CatalogError

PATH_ENV = "CUDALAB_PATH"
GROUP = "cudalab.families"
#: ``FamilySpec.module`` of an outside family: ``path:<module file>`` or ``entry:<dotted module>``.
PATH_PREFIX, ENTRY_PREFIX = "path:", "entry:"
#: cudalab's own commands (tests/test_hostile.py checks this against the click group): a family of one of
#: these names would be listed but could never run (``cudalab list`` is the command, not the family).
COMMANDS = frozenset({"calibrate", "compare", "compile", "info", "judge", "list", "ncu", "report", "roofline", "sanitize", "sass", "truth", "tune",
                      "watch"})
#: A family's name is a command word: letters, digits, '.', '-' and '_', not starting with '-' (an option).
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot be an outside family's (None when it can): one of cudalab's commands, an
    option (``-h``), or characters a command line or a terminal would take as something else."""
    if name in COMMANDS:
        return f"the name {name!r} is cudalab's own command ('cudalab {name}' could never run the family)"
    if name.startswith("-"):
        return f"the name {name!r} reads as an option ('cudalab {name}' could never run the family)"
    if not _NAME.fullmatch(name):
        return f"the name {name!r} must be letters, digits, '.', '-' and '_' (it names a command)"
    return None


def path_folders() -> list[Path]:
    """The folders of ``CUDALAB_PATH``, in order (empty entries skipped)."""
    raw = os.environ.get(PATH_ENV, "")
    return [Path(os.path.abspath(os.path.expanduser(p))) for p in raw.split(os.pathsep) if p.strip()]


def add_paths(folders: Sequence[str]) -> None:
    """Put ``--family-path`` folders first on ``CUDALAB_PATH`` (absolute, each once), for this
    process and every child it starts."""
    have = [str(p) for p in path_folders()]
    new = [os.path.abspath(os.path.expanduser(f)) for f in folders]
    merged = list(dict.fromkeys(new + have))
    os.environ[PATH_ENV] = os.pathsep.join(merged)


def split_global(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """``--family-path`` values given before the command, and the command line without them."""
    args, paths, rest, i = list(argv), [], [], 0
    while i < len(args):
        a = args[i]
        if a == "--family-path" and i + 1 < len(args):
            paths.append(args[i + 1])
            i += 2
            continue
        if a.startswith("--family-path="):
            paths.append(a.split("=", 1)[1])
            i += 1
            continue
        if not a.startswith("-"):  # the command: what follows is its own
            rest.extend(args[i:])
            break
        rest.append(a)
        i += 1
    return paths, rest


def _module_file(folder: Path, module: str) -> Path | None:
    for candidate in (folder / f"{module}.py", folder / module / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def check_kernels(spec: Any) -> None:
    """Refuse a variant whose kernel symbol its ``.cu`` does not define (read as text, no nvcc).

    Raises:
        CatalogError: naming family.toml, the variant, the kernel and the source.
    """
    texts: dict[str, str] = {}
    for v in spec.variants:
        if v.kind != "kernel":
            continue
        if v.source not in texts:
            try:
                texts[v.source] = (spec.directory / v.source).read_text(encoding="utf-8", errors="replace")
            except OSError as exc:
                raise CatalogError(f"{spec.directory / v.source}: {exc.strerror or exc}") from None
        if not re.search(rf"\b{re.escape(v.kernel)}\s*\(", texts[v.source]):
            raise CatalogError(f"{spec.directory / 'family.toml'}: variant {v.name!r}: kernel {v.kernel!r} is not "
                               f"defined in {v.source}")


def _one(folder: Path, origin: str) -> Any:
    """The spec of one outside family folder (its module given as ``path:FILE``)."""
    spec = load_family(folder)
    mod = _module_file(folder, spec.module)
    if mod is None:
        raise CatalogError(f"{folder / 'family.toml'}: no module {spec.module}.py beside it (the family's Python: "
                           "a PROBLEM or a FAMILY; 'module' in [family] names another file)")
    check_kernels(spec)
    return replace(spec, module=PATH_PREFIX + str(mod.resolve()))


def outside(taken: set[str]) -> tuple[list[tuple[Any, str]], list[tuple[Path, str]]]:
    """Every outside family: ``([(spec, origin)], [(folder, reason)])``.

    Args:
        taken: names already used (the built-ins): an outside family of one of them is refused.
    """
    good: list[tuple[Any, str]] = []
    broken: list[tuple[Path, str]] = []
    seen: dict[str, str] = {}

    def take(folder: Path, origin: str) -> None:
        name = folder.name
        problem = name_problem(name)
        if problem:
            broken.append((folder, f"{folder}: {problem}; rename the folder and its [family] name"))
            return
        if name in taken:
            broken.append((folder, f"{folder / 'family.toml'}: the name {name!r} is a built-in family's; "
                                   "rename the folder and its [family] name"))
            return
        if name in seen:
            broken.append((folder, f"{folder / 'family.toml'}: {name!r} is already defined by {seen[name]}"))
            return
        try:
            good.append((_one(folder, origin), origin))
            seen[name] = origin
        except CatalogError as exc:
            broken.append((folder, str(exc)))

    missing: list[Path] = []
    for root in path_folders():
        if not root.is_dir():
            if root.exists():
                broken.append((root, f"{PATH_ENV} folder {root} is a file, not a folder of families"))
            else:
                missing.append(root)
            continue
        # lexists, not is_file: a family.toml that is a FIFO or a link to /dev/zero is a broken family, said so
        # (load_family reads it bounded), never one dropped in silence
        if os.path.lexists(root / "family.toml"):
            take(root, str(root))
            continue
        try:
            subs = sorted(d for d in root.iterdir() if os.path.lexists(d / "family.toml"))
        except OSError as exc:
            broken.append((root, f"{PATH_ENV} folder {root}: {exc.strerror or exc}"))
            continue
        for d in subs:
            take(d, str(root))
    if missing:  # one line for them all: 199 folders not found are one mistake (a glob, a variable), not 199
        more = f" and {len(missing) - 3:,} more" if len(missing) > 3 else ""
        broken.append((missing[0], f"{PATH_ENV} folder{'s' if len(missing) > 1 else ''} not found: "
                                   f"{', '.join(str(m) for m in missing[:3])}{more}"))
    for name, folder, module, problem in _entry_points():
        problem = problem or (f"entry point {name} = {module}: {name_problem(name)}" if name_problem(name) else "")
        if problem:
            broken.append((Path(name), problem))
            continue
        try:
            spec = _one(folder, f"entry point {module}")
        except CatalogError as exc:
            broken.append((Path(name), str(exc)))
            continue
        if spec.name != name:
            broken.append((Path(name), f"entry point {name} = {module}: its family.toml names {spec.name!r}"))
        elif name in taken or name in seen:
            broken.append((Path(name), f"entry point {name} = {module}: the name is taken by "
                                       f"{'a built-in family' if name in taken else seen[name]}"))
        else:
            good.append((replace(spec, module=ENTRY_PREFIX + module), f"entry point {module}"))
            seen[name] = module
    return good, broken


def _may_declare(group: str) -> bool:
    """False only when no installed distribution can declare ``group``: every ``entry_points.txt`` that
    :mod:`importlib.metadata` would read (the ``*.dist-info`` and ``*.egg-info`` folders of each folder on
    ``sys.path``, an egg's ``EGG-INFO``) was read and none names the group. True (ask importlib.metadata)
    when in doubt: a zip on the path, a finder of distributions other than the path's, a file unreadable."""
    import importlib.machinery  # noqa: PLC0415

    if any(hasattr(f, "find_distributions") and f is not importlib.machinery.PathFinder for f in sys.meta_path):
        return True
    for entry in sys.path:
        folder = entry or "."
        try:
            children = os.listdir(folder)
        except NotADirectoryError:
            return True  # a zip (or an egg file): its metadata is read another way
        except OSError:
            continue  # no such folder: importlib.metadata finds nothing there either
        egg = os.path.basename(folder).lower().endswith(".egg")
        for child in children:
            low = child.lower()
            if not (low.endswith((".dist-info", ".egg-info")) or (egg and low == "egg-info")):
                continue
            try:
                with open(os.path.join(folder, child, "entry_points.txt"), encoding="utf-8") as f:
                    if group in f.read():
                        return True
            except FileNotFoundError:
                continue
            except (OSError, UnicodeDecodeError):
                return True
    return False


@functools.lru_cache(maxsize=1)
def entry_point_values() -> tuple[tuple[str, str], ...]:
    """``(name, value)`` of each ``cudalab.families`` entry point, read once a process. Where no installed
    package declares the group (:func:`_may_declare`, ~2 ms), importlib.metadata is not imported at all:
    it costs ~20-40 ms a command (its import and a pass over every distribution)."""
    if not _may_declare(GROUP):
        return ()
    from importlib.metadata import entry_points  # noqa: PLC0415

    return tuple((ep.name, ep.value) for ep in entry_points(group=GROUP))


def _entry_points() -> list[tuple[str, Path, str, str]]:
    """``(name, folder, module, problem)`` of each ``cudalab.families`` entry point (problem '' when found)."""
    out = []
    for name, value in entry_point_values():
        module = value.split(":", 1)[0].strip()
        try:
            found = importlib.util.find_spec(module)
        except (ImportError, ValueError) as exc:
            out.append((name, Path(), module, f"entry point {name} = {value}: {exc}"))
            continue
        if found is None or not found.origin:
            out.append((name, Path(), module, f"entry point {name} = {value}: no such module"))
            continue
        out.append((name, Path(found.origin).parent, module, ""))
    return out
