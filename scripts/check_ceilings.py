"""Hold the cached tensor ceiling (``cudalab roofline --measure``) against cuBLAS's best fp16 GEMM on the same GPU.

Run on the GPU machine after ``cudalab roofline --measure``; needs torch or CuPy (whichever imports). It reads the
newest ceilings file of the cache, times fp16 GEMMs (fp32 accumulation where the library allows it) at 4096³,
8192³ and 16384³ with CUDA events (best median of 20 launches after a warm-up) and prints one line each, then

    tensor ceiling 7xx TFLOP/s (hgemm cublas 8192³ fp16) vs the library's best 7xx TFLOP/s (8192³): ratio 1.0x  OK

OK when the ceiling is within 5% of the library's best (and not under it by more: a ceiling under what a GEMM
reaches is no ceiling). Exit 1 otherwise, 2 without a cache file or a library.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

from cudalab import build

SIZES = (4096, 8192, 16384)
LAUNCHES = 20


def newest_ceilings() -> dict:
    files = sorted((build.cache_dir().parent / "ceilings").glob("*.json"), key=lambda p: p.stat().st_mtime)
    if not files:
        print("no cached ceilings: run `cudalab roofline --measure` first")
        sys.exit(2)
    print(f"ceilings file: {files[-1]}")
    return json.loads(Path(files[-1]).read_text())


def torch_best(n: int) -> float:
    import torch  # noqa: PLC0415

    a = torch.randn(n, n, device="cuda", dtype=torch.float16)
    b = torch.randn(n, n, device="cuda", dtype=torch.float16)
    torch.matmul(a, b)
    torch.cuda.synchronize()
    times = []
    for _ in range(LAUNCHES):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        torch.matmul(a, b)
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    return 2 * n**3 / (statistics.median(times) * 1e-3) / 1e9


def cupy_best(n: int) -> float:
    import cupy  # noqa: PLC0415

    a = cupy.random.standard_normal((n, n), dtype=cupy.float32).astype(cupy.float16)
    b = cupy.random.standard_normal((n, n), dtype=cupy.float32).astype(cupy.float16)
    cupy.matmul(a, b)
    cupy.cuda.Device().synchronize()
    times = []
    for _ in range(LAUNCHES):
        s, e = cupy.cuda.Event(), cupy.cuda.Event()
        s.record()
        cupy.matmul(a, b)
        e.record()
        e.synchronize()
        times.append(cupy.cuda.get_elapsed_time(s, e))
    return 2 * n**3 / (statistics.median(times) * 1e-3) / 1e9


def main() -> int:
    c = newest_ceilings()
    tensor = c.get("tensor_gflops")
    print(f"{c['gpu']} at {c['sm_clock_mhz']} MHz: FFMA probe {c.get('fma_gflops', 0) / 1e3:.1f} TFLOP/s; tensor "
          f"{(tensor or 0) / 1e3:.0f} TFLOP/s ({c.get('tensor_source')}); mma.sync probe "
          f"{(c.get('mma_gflops') or 0) / 1e3:.0f}; copy {c.get('copy_gbs')}, read {c.get('read_gbs')}, "
          f"write {c.get('write_gbs')} GB/s")
    for name, fn in (("torch", torch_best), ("cupy", cupy_best)):
        try:
            rates = {n: fn(n) for n in SIZES}
            break
        except ImportError:
            continue
    else:
        print("neither torch nor cupy imports: nothing to compare with")
        return 2
    for n, r in rates.items():
        print(f"{name} fp16 GEMM {n}³: {r / 1e3:.0f} TFLOP/s")
    n, best = max(rates.items(), key=lambda kv: kv[1])
    ratio = (tensor or 0) / best
    ok = 0.95 <= ratio <= 1.05
    print(f"tensor ceiling {(tensor or 0) / 1e3:.0f} TFLOP/s ({c.get('tensor_source')}) vs the library's best "
          f"{best / 1e3:.0f} TFLOP/s ({n}³): ratio {ratio:.3f}  {'OK' if ok else 'NOT within 5%'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
