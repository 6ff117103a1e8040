"""The notebook magics: ``%load_ext cudalab``, then

    %%cudalab transpose --n 4096 --variant bankopt @block=32x8,tile=32x32 -o rec
    extern "C" __global__ void my_transpose(float *out, const float *in, int rows, int cols,
                                            int pitch_in, int pitch_out) { ... }

runs the family with every ``extern "C" __global__`` kernel of the cell as an ``--add`` row (named
after the kernel; the ``@KEY=VALUE,...`` word of the magic line is each kernel's ``--add`` options,
``@KERNEL:KEY=VALUE,...`` one kernel's), shows the table and leaves the
:class:`~cudalab.records.results.RunRecord` in ``rec`` (``-o NAME``). ``%cudalab ARGS`` runs any command as the
terminal would (a family command shows its table and takes ``-o`` too). The ``notebook`` extra
brings IPython.

The command line itself runs, in this process: what a cell accepts, refuses and prints is what
``cudalab`` does (a bad option is one line, a kernel that does not compile is a row with nvcc's log,
one that crashes or hangs is a row: the GPU work happens in worker processes, never in the kernel of
the notebook).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import re
import shlex
import sys
import tempfile
from pathlib import Path
from typing import Any, Sequence

from cudalab.errors import UsageError
from cudalab.report import notebook  # noqa: F401  (a record bound by a cell shows as its tables: registers them)

__all__ = ["load_ipython_extension", "cell_kernels", "parse_line", "add_texts", "run_command", "CudalabMagics"]

#: ``extern "C"`` kernels of a cell, with ``__global__`` and ``__launch_bounds__`` in any order.
_KERNEL = re.compile(r'extern\s+"C"\s+((?:(?:__global__|__launch_bounds__\s*\([^)]*\)|static|inline)\s+)*)'
                     r'void\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?([A-Za-z_]\w*)\s*\(')
_KERNEL_OPTS = re.compile(r"([A-Za-z_]\w*):(.+)")


def cell_kernels(source: str) -> list[str]:
    """The names of the ``extern "C" __global__`` kernels a cell defines, in order (comments ignored)."""
    text = re.sub(r"//[^\n]*|/\*.*?\*/", " ", source, flags=re.S)
    names = [m.group(2) for m in _KERNEL.finditer(text) if "__global__" in m.group(1)]
    return list(dict.fromkeys(names))


def parse_line(line: str) -> tuple[list[str], str | None, list[str]]:
    """The magic line as (the command's arguments, ``-o`` NAME, the ``@...`` words).

    Raises:
        UsageError: ``-o`` without a name; unbalanced quotes. A ``-o``/``--out`` whose value is no Python
            identifier is the command's own (``roofline -o chart.svg``): passed on.
    """
    try:
        words = shlex.split(line)
    except ValueError as exc:
        raise UsageError(f"%cudalab: {exc}") from None
    args, out, opts = [], None, []
    i = 0
    while i < len(words):
        w = words[i]
        if w in ("-o", "--out"):
            if i + 1 >= len(words):
                raise UsageError(f"%cudalab: {w} needs a variable name (-o rec)")
            if words[i + 1].isidentifier():
                out = words[i + 1]
            else:  # a file name (roofline -o chart.svg): the command's own option, passed on
                args += [w, words[i + 1]]
            i += 2
            continue
        if w.startswith("-o") and w[2:].isidentifier():
            out = w[2:]
        elif w.startswith("@"):
            opts.append(w[1:])
        else:
            args.append(w)
        i += 1
    return args, out, opts


def add_texts(path: Path, kernels: Sequence[str], opts: Sequence[str]) -> list[str]:
    """One ``--add`` text per kernel: ``FILE:KERNEL@OPTS`` (options for all, then the kernel's own).

    Raises:
        UsageError: an ``@KERNEL:...`` word that names no kernel of the cell.
    """
    common, own = [], {}
    for o in opts:
        m = _KERNEL_OPTS.fullmatch(o)
        if m and m.group(1) in kernels:
            own.setdefault(m.group(1), []).append(m.group(2))
        elif m and "=" not in m.group(1):
            raise UsageError(f"%%cudalab: @{o} names {m.group(1)!r}, which is not a kernel of the cell "
                             f"({', '.join(kernels)})")
        else:
            common.append(o)
    out = []
    for k in kernels:
        keys = ",".join(x for x in common + own.get(k, []) if x)
        out.append(f"{path}:{k}" + (f"@{keys}" if keys else ""))
    return out


def cell_file(source: str) -> Path:
    """The cell's source as a ``.cu`` file (named by its hash, in a private temporary folder), for nvcc."""
    from cudalab import private  # noqa: PLC0415

    folder = private.private_folder("cudalab-cells")  # refused if another user made it first
    names = cell_kernels(source)
    return private.write_private(folder, f"{names[0] if names else 'cell'}-{hashlib.sha256(source.encode()).hexdigest()[:10]}.cu",
                               source)


@contextlib.contextmanager
def plain_text() -> Any:
    """The command's rich consoles write text to stdout, as in a terminal's pipe, rather than each print
    becoming a notebook display of its own (rich's Jupyter mode): the output reads as the command's."""
    import rich.console  # noqa: PLC0415

    probe = getattr(rich.console, "_is_jupyter", None)
    if probe is None:
        yield
        return
    rich.console._is_jupyter = lambda: False
    try:
        yield
    finally:
        rich.console._is_jupyter = probe


def run_command(args: Sequence[str], capture: bool = False) -> tuple[int, str]:
    """Run ``cudalab ARGS`` in this process, as the terminal would; (exit code, what it printed on stdout
    when ``capture``). Errors print as the command prints them: one line on stderr."""
    from cudalab.cli import cli  # noqa: PLC0415

    argv = sys.argv
    sys.argv = ["cudalab", *args]  # a saved record's command is what was typed
    out = io.StringIO()
    code: Any = 0
    try:
        with contextlib.redirect_stdout(out) if capture else contextlib.nullcontext(), plain_text():
            cli.main(args=list(args), prog_name="cudalab", standalone_mode=True)
    except SystemExit as exc:
        code = exc.code
    finally:
        sys.argv = argv
    code = code if isinstance(code, int) else (0 if code is None else 1)
    return code, out.getvalue()


def is_family(name: str) -> bool:
    """Whether ``name`` is a family's command (a broken family's too: its command says why)."""
    from cudalab.cli.app import family_names  # noqa: PLC0415

    return name in family_names()


def run_family(args: list[str], cell: str | None = None, opts: Sequence[str] = ()) -> tuple[int, Any, str]:
    """A family command with the cell's kernels as ``--add`` rows; (exit code, the RunRecord or None,
    what it printed)."""
    from cudalab.records.results import load_record  # noqa: PLC0415

    args = list(args)
    if cell is not None:
        kernels = cell_kernels(cell)
        if not kernels:
            raise UsageError('%%cudalab: the cell defines no extern "C" __global__ kernel (its body is CUDA source; '
                             "each such kernel becomes a row)")
        for text in add_texts(cell_file(cell), kernels, opts):
            args += ["--add", text]
    elif opts:
        raise UsageError("%cudalab: @KEY=VALUE options are for a cell's kernels (%%cudalab)")
    if args and args[-1] == "--json":  # else the magic's own --json became its value: its temporary path shown
        raise UsageError("%cudalab: --json needs a file name (--json run.json)")
    given = next((args[i + 1] for i, a in enumerate(args[:-1]) if a == "--json"), None)
    given = given or next((a.split("=", 1)[1] for a in args if a.startswith("--json=")), None)
    with tempfile.TemporaryDirectory(prefix="cudalab-magic-") as tmp:
        path = given or os.path.join(tmp, "run.json")
        if not given:
            args += ["--json", path]
        before = _stamp(path)
        code, text = run_command(args, capture=True)
        # Only a file this run wrote is its record: a --json file from an earlier run, left as it was by a
        # run that failed (no GPU, bad input), is never shown or bound as if it were the new result.
        after = _stamp(path)
        record = load_record(path) if after is not None and after != before and os.path.getsize(path) else None
    return code, record, text


def _stamp(path: str) -> tuple[int, ...] | None:
    """What changes when a file is written (every save replaces it: a new inode), or None if absent."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def _display(obj: Any) -> None:
    try:
        from IPython.display import display  # noqa: PLC0415
    except ImportError:  # used outside IPython (tests): print the text
        print(obj)
        return
    display(obj)


def magic(line: str, cell: str | None = None, user_ns: dict[str, Any] | None = None) -> Any:
    """``%cudalab`` / ``%%cudalab``: run, show, and store ``-o``'s record; returns nothing (the table is shown).

    Raises:
        UsageError: a bad magic line (shown by IPython as an error).
    """
    try:
        args, out, opts = parse_line(line)
        if not args:
            raise UsageError("%cudalab needs a command: %cudalab list, %cudalab transpose --n 4096, or a cell "
                             "%%cudalab FAMILY [OPTIONS] whose body holds your kernels")
        if args[0] == "watch":
            raise UsageError("%cudalab watch runs until Ctrl-C: run it in a terminal (in a notebook, run the cell "
                             "again after each edit)")
        family = is_family(args[0])
        if cell is not None and not family:
            raise UsageError(f"%%cudalab: {args[0]!r} is no family; a cell's first word names the family its "
                             "kernels join (cudalab list)")
        if family and not any(a in ("-h", "--help") for a in args):
            code, record, text = run_family(args, cell, opts)
            if record is not None:
                if out:
                    (user_ns if user_ns is not None else {})[out] = record
                _display(record)
            elif text:
                print(text, end="")
            return None
        if out:
            raise UsageError(f"%cudalab: -o keeps a family run's record; {args[0]!r} makes none")
        run_command(args)
    except UsageError as exc:  # one line, as the command line says it
        print(f"cudalab: {exc}", file=sys.stderr)
    return None


try:  # IPython is the 'notebook' extra: without it the functions above still work
    from IPython.core.magic import Magics, line_cell_magic, magics_class
except ImportError:  # pragma: no cover - exercised only without IPython
    CudalabMagics = None  # type: ignore[assignment,misc]
else:
    @magics_class
    class CudalabMagics(Magics):
        """``%cudalab`` (any command) and ``%%cudalab`` (a family with the cell's kernels as rows)."""

        @line_cell_magic
        def cudalab(self, line: str, cell: str | None = None) -> None:
            """%cudalab ARGS: run a cudalab command. %%cudalab FAMILY [OPTIONS] [@KEY=VALUE,...] [-o NAME]: the
            cell's extern "C" __global__ kernels as --add rows of FAMILY; -o NAME keeps the RunRecord."""
            return magic(line, cell, self.shell.user_ns)


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext cudalab``: register the magics.

    Raises:
        ImportError: IPython is missing (pip install 'cudalab[notebook]').
    """
    if CudalabMagics is None:
        raise ImportError("the cudalab magics need IPython: pip install 'cudalab[notebook]'")
    ipython.register_magics(CudalabMagics)
