"""``python -m cudalab.catalog.probe KEY``: import one outside family's module as a command would, in a
child with a time limit (:func:`cudalab.catalog.userimport.check` starts it), and say ok or the error line.

A module that calls ``os._exit`` or never finishes at import ends or hangs this child, not the command.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Sequence

from cudalab.catalog.userimport import _ERROR, _OK, CHILD_ENV, import_error
from cudalab.errors import CatalogError
from cudalab.catalog.outside import load_outside


def main(argv: Sequence[str]) -> None:
    """The probe: import one outside family's module as a command would; say ok or the error line."""
    try:
        sys.path[:] = [str(p) for p in json.loads(os.environ[CHILD_ENV])]
    except (KeyError, ValueError, TypeError):
        pass
    try:
        load_outside(argv[0])
    except CatalogError as exc:
        msg = " ".join(str(exc).split())
        sys.stdout.write(f"{_ERROR}{msg}\n")
    except BaseException as exc:  # noqa: BLE001  (a bug of cudalab's, met with this module: still one line)
        sys.stdout.write(f"{_ERROR}{' '.join(import_error(exc, argv[0]).split())}\n")
    else:
        sys.stdout.write(f"{_OK}\n")
    sys.stdout.flush()
    os._exit(0)  # the module's atexit handlers and threads are not the probe's business


if __name__ == "__main__":
    main(sys.argv[1:])
