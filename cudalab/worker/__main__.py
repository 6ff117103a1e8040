"""``python -m cudalab.worker``: see :mod:`cudalab.worker.serve`."""

import sys

from cudalab.worker import warm


def _baseline():
    from cudalab.instruments.gpu_pids import compute_pids  # noqa: PLC0415  (in the start thread, after the driver)
    from cudalab.instruments.telemetry import import_nvml  # noqa: PLC0415  (likewise)

    return compute_pids(import_nvml()[0])


# The GPU starts in a thread while the rest of the worker imports (cudalab.worker.warm); the argument parser
# checks the line properly in main(), this only reads the device early.
_argv = sys.argv[1:]
_dev = _argv[_argv.index("--device") + 1] if "--device" in _argv[:-1] else "0"
if _dev.isascii() and _dev.isdigit():  # not '²' (isdigit, but int() refuses it)
    warm.start(int(_dev), before_context=_baseline)

from cudalab.worker.serve import main  # noqa: E402  (after the GPU's start: this import takes a while)

sys.exit(main())
