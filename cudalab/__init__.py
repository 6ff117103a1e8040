"""cudalab: a command-line lab for CUDA kernel variants."""

__version__ = "0.1.0"


def __getattr__(name: str):
    """``cudalab.run`` (:func:`cudalab.api.run`), imported on first use so ``import cudalab`` stays light."""
    if name == "run":
        from cudalab.api import run

        return run
    raise AttributeError(f"module 'cudalab' has no attribute {name!r}")
