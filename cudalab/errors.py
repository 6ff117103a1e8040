"""Typed errors that carry their context; only ``cli`` turns them into messages."""

from __future__ import annotations


def size(nbytes: int) -> str:
    """``9.0 MiB``, ``39.06 GiB``: bytes as people read them in messages."""
    return f"{nbytes / 2**30:,.2f} GiB" if nbytes >= 2**30 else f"{nbytes / 2**20:,.1f} MiB"


class CudalabError(Exception):
    """Base of every error cudalab reports as one line (exit code ``exit_code``)."""

    exit_code = 2


class UsageError(CudalabError):
    """Something the user typed breaks a rule (size, block, name, option)."""


class CatalogError(CudalabError):
    """A family.toml entry is malformed or inconsistent."""


class LaunchConfigError(CudalabError):
    """A launch configuration breaks a device or variant limit.

    Attributes:
        limit: name of the limit that is broken, e.g. ``maxThreadsPerBlock``.
    """

    def __init__(self, message: str, limit: str = ""):
        super().__init__(message)
        self.limit = limit


class SkipRow(UsageError):
    """One row cannot run here: a rule of its variant (a block, a tile, a grid it does not take), a
    library that is not installed, a host row too slow at this size. A family's ``setup`` or
    ``extent`` raises it; the runner shows the row as skipped with this message and runs the others.
    Outside a run (``cudalab compile`` planning a launch) it is a usage error like any other."""


class SizeError(SkipRow):
    """A problem size a variant cannot take (not a multiple of its tile, too large...)."""


class GpuUnavailableError(CudalabError):
    """pycuda, the driver or a GPU is missing."""


class ClusterError(CudalabError):
    """A ``--cluster`` that cannot be used: no answer, no GPU worker, workers of another cudalab or CUDA."""


class ClusterLost(ClusterError):
    """The Dask scheduler went away mid-run: what finished is kept; the same command continues (exit 75,
    EX_TEMPFAIL: try again)."""

    exit_code = 75


class OutOfMemoryError(CudalabError):
    """The problem needs more memory (GPU or host) than is free.

    Attributes:
        needed: bytes the run needs at its peak.
        free: bytes available.
    """

    def __init__(self, needed: int, free: int, what: str = "", hint: str = "", where: str = "GPU memory free"):
        super().__init__(f"{what + ': ' if what else ''}needs {size(needed)}, {size(free)} of {where}{hint}")
        self.needed = needed
        self.free = free


class CompileError(CudalabError):
    """nvcc rejected a source file (or the driver its cubin).

    Attributes:
        log: the compiler's output, which names the original file and line (never the temporary copy).
    """

    def __init__(self, message: str, log: str = ""):
        super().__init__(message + ("\n" + log.strip() if log.strip() else ""))
        self.log = log
        self.message = message

    def first_error(self) -> str:
        """The compiler's first error line (``file.cu(12): error: ...``), '' when its log has none."""
        for line in self.log.splitlines():
            if "error" in line.lower() and line.strip():
                return line.strip()
        return ""

    def summary(self) -> str:
        """One line: the message and the compiler's first error (what a row or a trial's reason shows)."""
        first = self.first_error()
        return f"{self.message}: {first}" if first and first not in self.message else self.message


class VerificationError(CudalabError):
    """A result differs from the reference by more than the tolerance."""

    exit_code = 1

    def __init__(self, max_error: float, tolerance: float, detail: str = ""):
        super().__init__(f"max error {max_error:.3g} > tolerance {tolerance:.3g}{detail}")
        self.max_error = max_error
        self.tolerance = tolerance


class ToolMissingError(CudalabError):
    """An external tool (nvcc, ncu, compute-sanitizer) is not installed."""


class ToolFailedError(CudalabError):
    """An external tool ran and failed; ``tail`` is the end of its stderr."""

    def __init__(self, message: str, tail: str = ""):
        super().__init__(message + ("\n" + tail.strip() if tail.strip() else ""))
        self.tail = tail


class GpuError(CudalabError):
    """The driver reported an error while running (launch failure, illegal address...)."""


class CounterPermissionError(ToolFailedError):
    """The driver refused Nsight Compute access to the GPU performance counters (``ERR_NVGPUCTRPERM``)."""

    def __init__(self, tail: str = ""):
        super().__init__(
            "Nsight Compute may not read the GPU performance counters here (ERR_NVGPUCTRPERM): by default "
            "the NVIDIA driver lets only administrators profile. Any one of these fixes it: run cudalab as "
            "root (sudo env PATH=\"$PATH\" cudalab ncu ...); or give the process the CAP_PERFMON capability "
            "(CAP_SYS_ADMIN on older kernels; in a container: --cap-add PERFMON or SYS_ADMIN); or let every "
            "user profile by loading the driver with NVreg_RestrictProfilingToAdminUsers=0 (a line "
            "'options nvidia NVreg_RestrictProfilingToAdminUsers=0' in /etc/modprobe.d/, then reload the "
            "driver or reboot). See https://developer.nvidia.com/ERR_NVGPUCTRPERM",
            tail,
        )


class KernelNotProfiledError(ToolFailedError):
    """ncu ran but saw no launch of the selected kernels (or a file holds none of the family's kernels)."""


class NcuParseError(CudalabError):
    """A file or output holds no ncu CSV that cudalab can read."""


class ForeignProfileError(UsageError):
    """An imported ncu file belongs to another family, or its launch shapes contradict this family's."""
