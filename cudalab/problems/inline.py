"""A problem defined inline (a notebook cell: no files but the CUDA text) made into a family folder, so
the GPU workers, which are other processes, find it as they find any outside family.

The folder holds a family.toml written from ``Problem.kernels`` and ``Problem.libraries``, each
kernel's source, and a module that unpickles the problem. Functions defined in a notebook pickle by
value with ``cloudpickle`` (used when installed); without it they must live in an importable module.
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import re
import tempfile
from pathlib import Path
from typing import Any, Iterator

from cudalab.errors import UsageError
from cudalab.problems.contract import Problem

_NAME = re.compile(r"^[a-z][a-z0-9_-]*$")
_MODULE = '''"""Written by cudalab.run for an inline problem."""
import pickle
from pathlib import Path

PROBLEM = pickle.loads(Path(__file__).with_name("problem.pkl").read_bytes())
'''


def _toml(value: Any) -> str:
    """A TOML value (strings, numbers, booleans, lists and inline tables)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(str(k))} = {_toml(v)}" for k, v in value.items()) + " }"
    raise UsageError(f"inline problem: {value!r} cannot be written to family.toml")


def _dumps(problem: Problem) -> bytes:
    try:
        import cloudpickle  # noqa: PLC0415

        return cloudpickle.dumps(problem)
    except ImportError:
        pass
    try:
        return pickle.dumps(problem)
    except (pickle.PicklingError, AttributeError, TypeError) as exc:
        raise UsageError(f"inline problem {problem.name!r}: its functions cannot be sent to the GPU worker ({exc}); "
                         "pip install cloudpickle, or define them in a module") from None


def write_folder(problem: Problem, root: Path) -> Path:
    """Write ``root/<name>/`` (family.toml, sources, module, pickle) and return the family folder.

    Raises:
        UsageError: no name, no kernels, or a kernel source that is neither a file nor CUDA text.
    """
    name = problem.name
    if not name or not _NAME.match(name):
        raise UsageError(f"an inline problem needs name= (lower-case letters, digits, '-', '_'), got {name!r}")
    if not problem.kernels:
        raise UsageError(f"inline problem {name!r} has no kernels: give kernels=(Kernel(...), ...)")
    folder = root / name
    folder.mkdir(parents=True)
    lines = ["[family]", f"name = {_toml(name)}", f"description = {_toml(problem.description or name)}",
             f"metric = {_toml(problem.metric)}", f"dtypes = {_toml(list(problem.dtypes))}",
             f"module = {_toml(name.replace('-', '_'))}", ""]
    sources: dict[str, str] = {}
    for k in problem.kernels:
        text = k.source
        if "\n" not in text and "__global__" not in text:
            path = Path(text).expanduser()
            if not path.is_file():
                raise UsageError(f"inline problem {name!r}: kernel {k.name!r}: source {text!r} is no file and "
                                 "no CUDA text")
            text = path.read_text(encoding="utf-8")
        file = sources.setdefault(text, f"kernels{len(sources)}.cu")
        table = {"name": k.name, "source": file, "kernel": k.kernel, "block": k.block, "per_thread": k.per_thread,
                 "grid": k.grid, "shared": k.shared, "description": k.description}
        lines.append("[[variant]]")
        lines += [f"{key} = {_toml(v)}" for key, v in table.items()]
        for key, v in (("require", list(k.require)), ("defines", dict(k.defines)), ("params", dict(k.params)),
                       ("tile", [str(t) for t in k.tile])):
            if v:
                lines.append(f"{key} = {_toml(v)}")
        lines.append("")
    for lib in problem.libraries:
        lines += ["[[variant]]", f"name = {_toml(lib.name)}", 'kind = "library"',
                  f"description = {_toml(lib.description or 'reference: ' + lib.name)}", ""]
    (folder / "family.toml").write_text("\n".join(lines), encoding="utf-8")
    for text, file in sources.items():
        (folder / file).write_text(text, encoding="utf-8")
    (folder / f"{name.replace('-', '_')}.py").write_text(_MODULE, encoding="utf-8")
    (folder / "problem.pkl").write_bytes(_dumps(problem))
    return folder


@contextlib.contextmanager
def materialized(problem: Problem) -> Iterator[str]:
    """While open: the problem is a family on ``CUDALAB_PATH`` (this process and the workers it
    starts); yields its name.

    Raises:
        UsageError: see :func:`write_folder`; or the name is a built-in family's.
    """
    from cudalab import catalog  # noqa: PLC0415
    from cudalab.catalog import discovery  # noqa: PLC0415

    with tempfile.TemporaryDirectory(prefix="cudalab-inline-") as tmp:
        root = Path(tmp)
        write_folder(problem, root)
        before = os.environ.get(discovery.PATH_ENV)
        discovery.add_paths([str(root)])
        try:
            cat = catalog.load_catalog()
            reason = cat.broken_reason(problem.name)
            if reason is not None:
                raise UsageError(f"inline problem {problem.name!r}: {reason}")
            yield problem.name
        finally:
            if before is None:
                os.environ.pop(discovery.PATH_ENV, None)
            else:
                os.environ[discovery.PATH_ENV] = before
