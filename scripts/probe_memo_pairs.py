#!/usr/bin/env python3
"""Calibrate the judge's paired fresh-vs-repeat measure (issue 60) on a GPU with CuPy alone (no cudalab worker).

For the reduce exploits that skip work on input they have seen, and their honest twins, at a few launch
configurations: each timed launch follows the same steps (refill the input from a device stash, restore the
work copy, flush the L2 by writing twice its size, then one launch between two events); a ``repeat`` launch's
refill copies the same set as the launch before it, a ``fresh`` launch's the other set. Prints per kernel the
median fresh and repeat times (µs) and their ratio: an honest kernel's is ~1.0 by construction.

    python3 scripts/probe_memo_pairs.py            # needs CuPy and nvcc's headers (CUDA_PATH)
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import cupy as cp
import numpy as np

FOLDER = Path(__file__).resolve().parent.parent / "tests" / "data" / "exploits"
PAIRS = 15


def build(kernel: str, honest: bool, block: int, per_thread: int):
    src = (FOLDER / f"{kernel}.cu").read_text()
    opts = ("-DELEM_T=int", f"-DBLOCK_X={block}", f"-DTILE_X={block * per_thread}", f"-I{FOLDER}", "-std=c++17",
            *(("-DHONEST=1",) if honest else ()))
    return cp.RawModule(code=src, options=opts, backend="nvcc").get_function(kernel)


def main() -> int:
    n = 1 << 25
    rng = np.random.default_rng(1)
    a = cp.asarray(rng.integers(1, 64, n, dtype=np.int32))
    b = cp.asarray(rng.integers(1, 64, n, dtype=np.int32))
    x, work = cp.empty_like(a), cp.empty_like(a)
    l2 = cp.cuda.Device().attributes["L2CacheSize"]
    scratch = cp.empty(2 * l2 // 4, dtype=np.int32)
    start, end = cp.cuda.Event(), cp.cuda.Event()
    print(f"n=2^25 int32, L2 {l2 >> 20} MiB, {PAIRS} pairs; times in µs")
    for block, per in ((256, 8), (256, 64), (1024, 32)):
        for kernel in ("skip_repeated", "content_memo", "pointer_memo"):
            for honest in (False, True):
                try:
                    fn = build(kernel, honest, block, per)
                except Exception as exc:  # noqa: BLE001
                    print(kernel, "build failed:", str(exc).splitlines()[0])
                    continue
                blocks = (n + block * per - 1) // (block * per)
                part = cp.empty(blocks, dtype=np.int32)
                cur = [a]

                def launch(src, timed):
                    x[...] = src
                    cur[0] = src
                    work[...] = x
                    scratch.fill(0x5A)
                    if timed:
                        start.record()
                    fn((blocks,), (block,), (work, part, np.uint32(n)))
                    if timed:
                        end.record()
                        end.synchronize()
                        return cp.cuda.get_elapsed_time(start, end) * 1e3
                    return None

                for _ in range(3):
                    launch(a, False)
                fresh, repeat = [], []
                for _ in range(PAIRS):
                    repeat.append(launch(cur[0], True))
                    fresh.append(launch(b if cur[0] is a else a, True))
                cp.cuda.Device().synchronize()
                ok = int(part.get().astype(np.int64).sum()) == int(cur[0].sum(dtype=cp.int64).get())
                f, r = statistics.median(fresh), statistics.median(repeat)
                print(f"block={block} per_thread={per} {kernel}{'-honest' if honest else ''}: fresh {f:.1f} "
                      f"repeat {r:.1f} ratio {f / r:.2f} (fresh range {min(fresh):.1f}-{max(fresh):.1f}, repeat "
                      f"{min(repeat):.1f}-{max(repeat):.1f}) correct={ok}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
