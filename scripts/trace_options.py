"""Follow one family run's options from the command: which functions receive them, and how often they climb
back up the package's layers (issue 42's measure of the code's shape).

    python scripts/trace_options.py [FAMILY ARGS...]      # default: transpose --n 64 --variant naive,block

The command runs in this process with fake GPU workers (tests/fake_worker_main.py: no GPU needed). A profile
hook records every call that is handed the options: click's keyword dict of the family command, or the typed
:class:`cudalab.session.options.RunOptions` made from it, as an argument (by identity). A module's floor is its
height in cudalab's own import graph (grimp: 1 + the highest floor it imports; imports only a type checker
reads left out); a call that hands the options to a function on a higher floor than its caller's climbs back up.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import grimp  # noqa: E402

from cudalab.execute.local import process as W  # noqa: E402
from cudalab.session.options import RunOptions  # noqa: E402


def floors() -> dict[str, int]:
    """Each cudalab module's floor: 1 for a module importing none of cudalab's, else 1 + the highest it imports."""
    g = grimp.build_graph("cudalab", exclude_type_checking_imports=True, cache_dir=None)
    out: dict[str, int] = {}

    def floor(m: str) -> int:
        if m not in out:
            out[m] = 0  # no circles (tests/test_architecture.py): this never reads a half-made floor
            below = [floor(x) for x in g.find_modules_directly_imported_by(m) if x.startswith("cudalab")]
            out[m] = 1 + max(below, default=0)
        return out[m]

    for m in g.modules:
        if m.startswith("cudalab"):
            floor(m)
    return out


def main(argv: list[str]) -> int:
    args = argv or ["transpose", "--n", "64", "--variant", "naive,block"]
    fake = str(ROOT / "tests" / "fake_worker_main.py")
    os.environ.setdefault("FAKE_WORKER", "{}")
    W.worker_argv = lambda device, fd, energy=False: [sys.executable, fake, "--fd", str(fd), "--device", str(device)]
    height = floors()
    carried: set[int] = set()  # ids of the options objects seen so far
    calls: list[tuple[str, str, str]] = []  # (caller module, callee module, callee function)

    def is_options(value: object) -> bool:
        if isinstance(value, RunOptions):
            return True
        return isinstance(value, dict) and "variants" in value and "budget" in value  # click's keyword dict

    def hook(frame, event, arg):  # noqa: ANN001
        if event != "call":
            return
        code = frame.f_code
        module = frame.f_globals.get("__name__", "")
        if not module.startswith("cudalab"):
            return
        names = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
        values = [frame.f_locals.get(n) for n in names]
        if code.co_flags & 0x08:  # **kwargs: click's callback gets the options as keyword arguments
            values.append(frame.f_locals.get(code.co_varnames[code.co_argcount + code.co_kwonlyargcount
                                                              + bool(code.co_flags & 0x04)]))
        if not any(is_options(v) for v in values):
            return
        carried.update(id(v) for v in values if is_options(v))
        back = frame.f_back
        caller = back.f_globals.get("__name__", "") if back is not None else ""
        name = code.co_qualname if "__create_fn__" not in code.co_qualname else f"{type(values[0]).__name__}.__init__"
        calls.append((caller, module, name))

    from cudalab.cli import cli  # noqa: PLC0415  (after the fake workers are in place)

    sys.setprofile(hook)
    try:
        cli.main(args=args, prog_name="cudalab", standalone_mode=False)
    finally:
        sys.setprofile(None)
    functions = list(dict.fromkeys(f"{m}.{f}" for _, m, f in calls))
    modules = list(dict.fromkeys(m for _, m, _ in calls))
    climbs = [(c, m, f) for c, m, f in calls
              if c.startswith("cudalab") and height.get(m, 0) > height.get(c, 0)]
    print(f"cudalab {' '.join(args)}: the options pass {len(functions)} functions in {len(modules)} modules, "
          f"climbing back up {len(climbs)} times")
    for name in functions:
        module = name.rsplit(".", 1)[0]
        while module not in height and "." in module:
            module = module.rsplit(".", 1)[0]
        print(f"  floor {height.get(module, 0):2d}  {name}")
    for c, m, f in climbs:
        print(f"  climb: {c} (floor {height.get(c, 0)}) -> {m}.{f} (floor {height.get(m, 0)})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
