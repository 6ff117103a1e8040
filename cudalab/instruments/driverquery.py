"""What the driver says of this machine's GPUs without a CUDA context: NVML (the telemetry extra), else
nvidia-smi. For the parent's process, which never opens a context (only the GPU worker does): a record's GPU name, and
the architecture a campaign builds its first trials for while its GPU worker opens."""

from __future__ import annotations

import subprocess

__all__ = ["arch_here", "gpu_name"]


def gpu_name(device: int) -> str | None:
    """The name of this machine's GPU ``device``, asked without a CUDA context: NVML (the telemetry extra), else
    nvidia-smi; None where neither answers (no driver, no such GPU)."""
    try:
        import pynvml  # noqa: PLC0415  (the telemetry extra)

        pynvml.nvmlInit()
        try:
            name = pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(device))
        finally:
            pynvml.nvmlShutdown()
        return name.decode() if isinstance(name, bytes) else str(name)
    except ImportError:   # no telemetry extra: the driver's own tool says the same
        pass
    except Exception:  # no driver, no such GPU
        return None
    try:
        proc = subprocess.run(["nvidia-smi", "-i", str(device), "--query-gpu=name", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=20, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout.strip() or None if proc.returncode == 0 else None


def arch_here() -> str | None:
    """``sm_XY`` of this machine's GPUs, asked without a CUDA context (NVML, else nvidia-smi), when they all share
    one; None where neither answers or they differ (which GPU a worker opens then decides: no guess)."""
    try:
        import pynvml  # noqa: PLC0415  (the telemetry extra)

        pynvml.nvmlInit()
        try:
            caps = {tuple(pynvml.nvmlDeviceGetCudaComputeCapability(pynvml.nvmlDeviceGetHandleByIndex(i)))
                    for i in range(pynvml.nvmlDeviceGetCount())}
        finally:
            pynvml.nvmlShutdown()
    except ImportError:  # no telemetry extra: the driver's own tool says the same
        try:
            proc = subprocess.run(["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"],
                                  capture_output=True, text=True, timeout=20, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired):
            return None
        lines = proc.stdout.split() if proc.returncode == 0 else []
        caps = {tuple(int(x) for x in line.split(".")) for line in lines if line.replace(".", "").isdigit()}
    except Exception:  # noqa: BLE001  (no driver, an NVML too old to say)
        return None
    if len(caps) != 1:
        return None
    (cc,) = caps
    return f"sm_{cc[0]}{cc[-1]}"
