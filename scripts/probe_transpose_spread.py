"""Where does the best transpose lose its last points to the copy roofline? Three probes, 16384² float32.

    python3 scripts/probe_transpose_spread.py procs 8     # 8 fresh processes, one run each
    python3 scripts/probe_transpose_spread.py realloc 8   # one process, 8 runs, a filler allocation
                                                          # held before each so its buffers move
    python3 scripts/probe_transpose_spread.py pattern 3   # 3 rounds of the traffic-only kernels
    python3 scripts/probe_transpose_spread.py launch 1    # each of them launched once, for ncu

``procs`` and ``realloc`` run ``cudalab transpose --n 16384 --variant VARIANTS`` (each run with its own
memcpy_dtod roofline) in fresh processes, or in one process with the buffers moved by a growing filler
allocation: is the spread between processes (the H200 record read vec4-band at 96.4%, 96.9% and 97.1%
in three) a matter of where the buffers land?

``pattern`` times kernels that move a transpose's bytes without transposing, beside vec4-band (with its
warps of 16 vectors x 2 rows, and of 8 x 4, ``-D TV_WX=8``) and memcpy_dtod. ``pat_WxH`` reads each tile
of W input columns x H rows row by row and writes the W x H region the transpose writes it to, with the
values it loaded (no shared memory), tiles taken column by column as vec4-band takes them, 512 threads
in warps of whole tile rows: ``pat_64x64`` is vec4-band's traffic. ``pat_64x64_w8`` is the same with
8 x 4 warps; ``pat_copy`` writes each 64x64 tile where it was read (a tiled copy in that tile order).

On an H200 (2026-11-23): processes 96.4-96.8%, re-allocations 96.3-96.9% (so placement moves it little);
pat_64x64_w8 96.2%, pat_64x64 97.0%, vec4-band (then 8 x 4) 96.6%: the shared step costs nothing, the
warp shape of the DRAM traffic did, and vec4-band now moves whole tile rows. Wider or taller tiles
(128x32 94.7%, 32x128 92.7%, 256x16 93.2%) and the column order for a copy (pat_copy 91.0%) lose.
On an H100 (2026-11-23, ``pattern 2``): vec4-band 97.0%, pat_64x64 96.9%, and every other shape below it
(128x64 96.6, 64x128 96.5, 64x32 96.1, 128x128 96.1, 64x256 96.0, 128x32 95.6%): of the arrangements
tried, vec4-band's is the fastest, and vec4-band runs at its speed. The benchmark runs ``pattern 1``,
and ``launch 1`` under ncu, when the transpose misses its target (scripts/bench_ceiling.py).

One JSON line per run, then the spread (min, median, max) of each column. Needs a GPU (and CuPy for
``realloc``'s filler allocations).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

VARIANTS = "vec4-band,band-64x8,vec4-64"
N = 16384
# Tile shapes (input columns x rows) of the pattern kernels: 16 KiB tiles, wider or taller, and two of 32 KiB.
SHAPES = ((64, 64), (128, 32), (256, 16), (512, 8), (32, 128), (16, 256), (128, 64), (256, 32),
          (64, 128), (64, 256), (128, 128), (64, 32))
# Filler sizes (MiB) held, cumulatively, before each run of ``realloc``: odd sizes so the next
# buffers start at differing offsets, not only at whole multiples of the previous layout.
FILLERS = (0, 2, 66, 130, 258, 514, 1026, 2050, 4098, 8194, 16386, 32770)


def row(record: dict, label: str) -> dict:
    """One run's figures: the roofline and each variant's GB/s and % of it."""
    point = record["points"][0]
    out = {"run": label, "dtod_gbs": round(point["roofline"]["dtod_gbs"], 1)}
    for r in point["results"]:
        if r.get("pct_roofline") is not None and r["kind"] == "kernel":
            out[r["variant"]] = round(r["pct_roofline"], 2)
    return out


def procs(count: int) -> list[dict]:
    """``count`` fresh processes of the command line, each saving its run with --json."""
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(count):
            path = Path(tmp) / f"run{i}.json"
            subprocess.run([sys.executable, "-m", "cudalab", "transpose", "--n", str(N), "--variant", VARIANTS,
                            "--json", str(path)], check=True, stdout=subprocess.DEVNULL)
            rows.append(row(json.loads(path.read_text()), f"process {i}"))
            print(json.dumps(rows[-1]), flush=True)
    return rows


def realloc(count: int) -> list[dict]:
    """``count`` runs in this process, a larger filler held before each so the buffers move."""
    import cupy

    import cudalab

    held, rows = [], []
    for i in range(count):
        mib = FILLERS[i % len(FILLERS)]
        if mib:
            held.append(cupy.empty(mib << 20, dtype=cupy.uint8))
        record = cudalab.run("transpose", VARIANTS, n=N)
        rows.append(row(record.to_dict(), f"filler {sum(a.nbytes for a in held) >> 20} MiB"))
        print(json.dumps(rows[-1]), flush=True)
    return rows


PATTERN_SRC = r"""
// vec4-band's tile order (band_tile in cuda_src/transpose/transpose.cu with bands of one tile column)
__device__ __forceinline__ void column_tile(int &bx, int &by)
{
    const int id = blockIdx.y * gridDim.x + blockIdx.x;
    bx = id / gridDim.y;
    by = id % gridDim.y;
}

// Rows ty and ty + 32 (vector tx) of the 64x64 tile at (row0, col0) of in, all loaded first, then
// stored at the same places of the tile at (orow0, ocol0) of out.
__device__ __forceinline__ void move_rows(float *out, const float *in, int n, int row0, int col0, int orow0,
                                          int ocol0, int tx, int ty)
{
    float4 v[2];
    for (int j = 0; j < 2; ++j)
        v[j] = __ldg(reinterpret_cast<const float4 *>(in + (size_t)(row0 + ty + 32 * j) * n + col0 + 4 * tx));
    for (int j = 0; j < 2; ++j)
        *reinterpret_cast<float4 *>(out + (size_t)(orow0 + ty + 32 * j) * n + ocol0 + 4 * tx) = v[j];
}

// 64x64 tiles, 16x32 threads, 2 vectors a thread, warps of 8 vectors x 4 rows (vec4-band -D TV_WX=8).
extern "C" __global__ void pat_64x64_w8(float *out, const float *in, int n)
{
    const int t = threadIdx.y * 16 + threadIdx.x, lane = t & 31, warp = t >> 5;
    int bx, by;
    column_tile(bx, by);
    move_rows(out, in, n, by * 64, bx * 64, bx * 64, by * 64, (warp % 2) * 8 + (lane & 7), (warp / 2) * 4 + (lane >> 3));
}

// A tiled copy in that order: each 64x64 tile written where it was read (16 vectors x 2 rows a warp).
extern "C" __global__ void pat_copy(float *out, const float *in, int n)
{
    const int t = threadIdx.y * 16 + threadIdx.x;
    int bx, by;
    column_tile(bx, by);
    move_rows(out, in, n, by * 64, bx * 64, by * 64, bx * 64, t % 16, t / 16);
}

// The same traffic for a TW x TH tile (TW input columns, TH input rows; 512 threads, vec4): each tile
// read row by row, then the TW x TH region vec4-band-style code would write (output rows bx*TW..,
// columns by*TH..) written row by row with the loaded values; tiles taken column by column.
#define PAT_SHAPE(TW, TH)                                                                           \
extern "C" __global__ void pat_##TW##x##TH(float *out, const float *in, int n)                     \
{                                                                                                   \
    constexpr int PER = TW * TH / 4 / 512;                                                          \
    const int id = blockIdx.y * gridDim.x + blockIdx.x, bx = id / gridDim.y, by = id % gridDim.y; \
    const int t = threadIdx.y * blockDim.x + threadIdx.x;                                           \
    float4 v[PER];                                                                                  \
    for (int j = 0; j < PER; ++j) {                                                                 \
        const int i = t + 512 * j, r = i / (TW / 4), c = i % (TW / 4);                              \
        v[j] = __ldg(reinterpret_cast<const float4 *>(in + (size_t)(by * TH + r) * n + bx * TW + 4 * c)); \
    }                                                                                               \
    for (int j = 0; j < PER; ++j) {                                                                 \
        const int i = t + 512 * j, r = i / (TH / 4), c = i % (TH / 4);                              \
        *reinterpret_cast<float4 *>(out + (size_t)(bx * TW + r) * n + by * TH + 4 * c) = v[j];     \
    }                                                                                               \
}
PAT_SHAPE(64, 64)
PAT_SHAPE(128, 32)
PAT_SHAPE(256, 16)
PAT_SHAPE(512, 8)
PAT_SHAPE(32, 128)
PAT_SHAPE(16, 256)
PAT_SHAPE(128, 64)
PAT_SHAPE(256, 32)
PAT_SHAPE(64, 128)
PAT_SHAPE(64, 256)
PAT_SHAPE(128, 128)
PAT_SHAPE(64, 32)

"""


class _Case:
    """What :func:`cudalab.worker.sampling.time_case` samples: one launch, nothing to reset."""

    timer, can_repeat = "events", True

    def __init__(self, fn):
        self.run = fn

    def reset(self) -> None:
        pass


def _pattern_cases():
    """The device, the kernels of ``pattern`` as launch closures (memcpy_dtod first), and the input."""
    import numpy as np

    from cudalab.worker import gpu

    dev = gpu.Device(0)
    src = Path(tempfile.mkdtemp()) / "pattern.cu"
    src.write_text(PATTERN_SRC)
    shapes = {f"pat_{w}x{h}": (w, h) for w, h in SHAPES}
    kernels = dev.compile(src, {}, ["pat_64x64_w8", "pat_copy", *shapes])
    transpose = Path(__file__).resolve().parents[1] / "cuda_src/transpose/transpose.cu"
    a = dev.to_device(np.random.default_rng(0).random((N, N), dtype=np.float32))
    b = dev.empty((N, N), np.float32)
    nn, tiles, block = np.int32(N), (N // 64, N // 64, 1), (16, 32, 1)
    cases = {"memcpy_dtod": lambda: dev.memcpy_dtod(b, a, a.nbytes)}
    for wx in (16, 8):  # vec4-band as the family builds it at 16x32, and with the former 8 x 4 warps
        k = dev.compile(transpose, {"TV_TILE": "64", "TV_ROWS": "32", "TV_BAND": "1", "TV_WX": str(wx)},
                        ["transpose_vec4_cf"])["transpose_vec4_cf"]
        cases[f"vec4-band_w{wx}"] = lambda k=k: k.launch(tiles, block, [b, a, nn, nn, nn, nn])
    for name, k in kernels.items():
        w, h = shapes.get(name, (64, 64))
        grid, threads = ((N // w, N // h, 1), (512, 1, 1)) if name in shapes else (tiles, block)
        cases[name] = lambda k=k, g=grid, t=threads: k.launch(g, t, [b, a, nn])
    return dev, cases, a


def pattern(rounds: int) -> list[dict]:
    """Time the traffic-only kernels beside vec4-band and memcpy_dtod, ``rounds`` times over."""
    from cudalab.bench import Protocol
    from cudalab.worker.sampling import time_case

    dev, cases, a = _pattern_cases()
    rows = []
    for i in range(rounds):
        ms = {name: time_case(dev, _Case(fn), Protocol()).stats.median for name, fn in cases.items()}
        gbs = {name: 2 * a.nbytes / m / 1e6 for name, m in ms.items()}
        out = {"run": f"round {i}", "dtod_gbs": round(gbs["memcpy_dtod"], 1)}
        out.update({name: round(100 * g / gbs["memcpy_dtod"], 2) for name, g in gbs.items() if name != "memcpy_dtod"})
        rows.append(out)
        print(json.dumps(out), flush=True)
    dev.synchronize()
    return rows


def launch(count: int) -> list[dict]:
    """Each kernel of ``pattern`` (not memcpy_dtod) launched ``count`` times in turn, nothing timed: for
    ncu to profile (``--kernel-name regex:^(pat_|transpose_vec4_cf$)``). Prints the order launched."""
    dev, cases, _ = _pattern_cases()
    names = [name for name in cases if name != "memcpy_dtod"]
    for name in names:
        for _ in range(count):
            cases[name]()
    dev.synchronize()
    print(json.dumps({"launched": names, "each": count}), flush=True)
    return []


def main() -> None:
    mode, count = sys.argv[1], int(sys.argv[2])
    rows = {"procs": procs, "realloc": realloc, "pattern": pattern, "launch": launch}[mode](count)
    keys = dict.fromkeys(k for r in rows for k in r if k != "run")
    for key in keys:
        xs = [r[key] for r in rows if key in r]
        if xs:
            print(f"{mode} {key:12s} min {min(xs):8.2f} median {statistics.median(xs):8.2f} max {max(xs):8.2f}")


if __name__ == "__main__":
    main()
