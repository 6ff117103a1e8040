#!/usr/bin/env python3
"""Execute a notebook headless (nbclient, the ``python3`` kernel of this Python) and write it with its outputs.

    python scripts/run_notebook.py docs/notebook/cudalab-magic.ipynb OUT.ipynb [--timeout 600]

The kernel is this interpreter's (ipykernel's own ``python3`` spec: no ``jupyter kernelspec install``
needed, and the kernel inherits this environment, ``PYTHONPATH`` included). It runs in the notebook's
folder unless ``--cwd`` says otherwise. ``--fake`` first runs a hidden cell that puts cudalab on the
tests' fake GPU (tests/fake_watch.py), for the CPU test of the notebook; that cell is not kept. Exits 1
when a cell raised (the error is in the written notebook and printed here).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("notebook", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--timeout", type=int, default=600, help="seconds one cell may take")
    ap.add_argument("--cwd", type=Path, default=None, help="the kernel's working folder (default: the notebook's)")
    ap.add_argument("--fake", action="store_true", help="run on the tests' fake GPU (no GPU needed)")
    args = ap.parse_args()

    import nbformat  # noqa: PLC0415
    from nbclient import NotebookClient  # noqa: PLC0415
    from nbclient.exceptions import CellExecutionError  # noqa: PLC0415

    nb = nbformat.read(args.notebook, as_version=4)
    if args.fake:
        setup = (f"import sys; sys.path[:0] = [{str(ROOT / 'tests')!r}, {str(ROOT)!r}]\n"
                 "import fake_watch; fake_watch.install()")
        nb.cells.insert(0, nbformat.v4.new_code_cell(setup, metadata={"fake": True}))
    cwd = args.cwd or args.notebook.resolve().parent
    client = NotebookClient(nb, timeout=args.timeout, kernel_name="python3", allow_errors=False,
                            resources={"metadata": {"path": str(cwd)}})
    code = 0
    try:
        client.execute()
    except CellExecutionError as exc:
        print(f"run_notebook: a cell raised:\n{exc}", file=sys.stderr)
        code = 1
    if args.fake:
        nb.cells = [c for c in nb.cells if not c.metadata.get("fake")]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, args.out)
    print(f"run_notebook: wrote {args.out} ({sum(1 for c in nb.cells if c.cell_type == 'code')} code cells)")
    return code


if __name__ == "__main__":
    sys.exit(main())
