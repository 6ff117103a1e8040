"""``cudalab calibrate``: A/A pairs of fresh processes on this GPU, a kernel slowed on purpose, the noise floor kept.

Each run is one fresh worker process timing the same rows: the copy family's ``vec4`` and cudalab's own
calibration kernel (:data:`CALIB_SRC`, added as ``--add``) twice, plain (``calib``) and slowed by a delay loop
through ``-D CALIB_DELAY`` (``calib_slow``). The delay is sized from a first run so it adds about
:data:`cudalab.records.noise.TARGET_SLOWDOWN` to ``calib``, then checked by up to :data:`CHECKS` runs (scaled
towards the target after each that planted less, or much more); the slowdown actually planted is measured (the
median over the runs of slowed / plain) and reported. ``pairs`` A/A pairs take ``pairs + 1`` runs after those (run
i against run i + 1): the plain rows of the two are judged against each other (nothing changed), and ``calib`` of run i
against ``calib_slow`` of run i + 1 (the planted change).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from cudalab.errors import CudalabError, UsageError
from cudalab.records import noise
from cudalab.records.results import PASSED, Result

#: A grid-stride copy (the copy family's signature). With CALIB_DELAY, every block first waits that many SM
#: cycles (its first thread spins, the others wait at the barrier) and then copies: the grid is one wave
#: (grid=sm:2), so the kernel lasts the delay longer. Waiting after the copy instead planted about 1.4% for a
#: 2% delay on an H200 (the blocks end at different times, and a late block's wait hid an early one's).
CALIB_SRC = r"""// cudalab calibrate: a copy slowed on purpose by -D CALIB_DELAY=<SM cycles>
#ifndef CALIB_DELAY
#define CALIB_DELAY 0
#endif
extern "C" __global__ void calib_copy(float *out, const float *in, int rows, int cols, int pitch)
{
#if CALIB_DELAY > 0
    if (threadIdx.x == 0) {
        long long t0 = clock64();
        while (clock64() - t0 < (long long)CALIB_DELAY) { }
    }
    __syncthreads();
#endif
    long long n = (long long)rows * cols;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        long long r = i / cols, c = i % cols;
        out[r * pitch + c] = in[r * pitch + c];
    }
}
"""
PLAIN, SLOW = "calib", "calib_slow"
#: Runs that check what the delay planted, at most.
CHECKS = 3
#: A check that planted the target up to this factor over it keeps the delay...
TOLERANCE = 1.15
#: ...else the delay is scaled to plant this much over the target (a run's median is not exact)...
OVERSHOOT = 1.05
#: ...by at most this factor either way (a noisy check must not plant a change several times the target).
MAX_SCALE = 3.0
#: The built-in row judged beside the calibration kernel.
BUILTIN = "vec4"
#: Each run also times its rows on a copy this small (a few µs: under :data:`cudalab.records.noise.SHORT_MS`),
#: named with SHORT after them: the short rows' own floor (such kernels move more between processes).
SHORT_N, SHORT = "64", "@short"


def kernel_file() -> Path:
    """The calibration kernel's source, written beside the build cache (rewritten only when it differs)."""
    from cudalab.build import cache_dir, cachefiles  # noqa: PLC0415

    p = cache_dir().parent / "calibrate" / "calib_copy.cu"
    # a link planted there (or a FIFO) is neither read nor written through: replaced by the kernel's own file
    if p.is_symlink() or p.parent.is_symlink() or not p.is_file() or p.stat().st_size != len(CALIB_SRC.encode()) \
            or p.read_text() != CALIB_SRC:
        cachefiles.write(p, CALIB_SRC)
    return p


def adds(path: Path, delay_cycles: int) -> tuple[str, ...]:
    """The ``--add`` texts of one run: the plain calibration kernel, and the slowed one when ``delay_cycles``."""
    base = f"{path}:calib_copy@block=256,grid=sm:2"
    out = (f"{base},name={PLAIN}",)
    return out + ((f"{base},name={SLOW},-DCALIB_DELAY={int(delay_cycles)}",) if delay_cycles > 0 else ())


def delay_for(plain_ms: float, sm_mhz: float, fraction: float = noise.TARGET_SLOWDOWN) -> int:
    """SM cycles of delay that add ``fraction`` to a kernel of ``plain_ms`` at ``sm_mhz``."""
    return max(1, int(math.ceil(fraction * plain_ms * 1e-3 * sm_mhz * 1e6)))


@dataclass(frozen=True)
class Run:
    """One fresh process's rows (variant -> Result) and the GPU it ran on."""

    rows: dict[str, Result]
    gpu: str
    sm_mhz: float


@dataclass(frozen=True)
class Calibration:
    """What :func:`calibrate` found: the floor and the runs it came from."""

    floor: noise.NoiseFloor
    runs: tuple[Run, ...]
    delay_cycles: int
    sizing: tuple[tuple[int, float | None], ...] = ()  # each check: (its delay in cycles, the slowdown it planted)


def _samples(run: Run, name: str) -> tuple[float, ...] | None:
    r = run.rows.get(name)
    return r.stats.samples if r is not None and r.status == PASSED and r.stats is not None else None


def _planted(run: Run) -> float | None:
    """The slowdown the delay planted in one run: its slowed row's median over its plain row's, less 1."""
    sa, sb = _samples(run, PLAIN), _samples(run, SLOW)
    return float(np.median(sb)) / float(np.median(sa)) - 1.0 if sa and sb else None


def calibrate(pairs: int, run_once: Callable[[int], Run], on_run: Callable[[int, int], None] = lambda i, n: None,
              rows: Sequence[str] = (BUILTIN, PLAIN),
              short_rows: Sequence[str] = (BUILTIN + SHORT, PLAIN + SHORT)) -> Calibration:
    """Run ``pairs`` A/A pairs (``pairs + 1`` fresh runs after the probe and the checks) and make the GPU's floor.

    Args:
        pairs: A/A pairs wanted (at least 1).
        run_once: runs the rows in a fresh process with the slowed kernel delayed by that many cycles (0: none).
        on_run: progress (runs done, runs in all).
        rows: the rows judged A/A.
        short_rows: the rows judged A/A for the short rows' floor (those a run has).

    Raises:
        UsageError: ``pairs`` under 1.
        CudalabError: the calibration kernel did not pass, or the runs were on different GPUs.
    """
    if pairs < 1:
        raise UsageError(f"--pairs must be at least 1 (got {pairs})")
    probe = run_once(0)
    plain = probe.rows.get(PLAIN)
    if plain is None or plain.status != PASSED or plain.stats is None:
        raise CudalabError(f"the calibration kernel did not pass: {plain.reason if plain else 'no row'}")
    delay = delay_for(plain.stats.median, probe.sm_mhz)
    total = pairs + 2 + CHECKS  # at most: the checks stop once one planted the target
    on_run(1, total)
    # What a delay adds is measured, not assumed (on an H200 a delay sized for 2% planted 1.8%, and one scaled
    # from a single check 2.5%): up to CHECKS runs with it, each scaling it towards the target until one planted
    # between the target and TOLERANCE over it.
    done, sizing = 1, []
    for _ in range(CHECKS):
        got = _planted(run_once(delay))
        sizing.append((delay, got))
        done += 1
        on_run(done, total)
        if got is None or noise.TARGET_SLOWDOWN <= got <= noise.TARGET_SLOWDOWN * TOLERANCE:
            break
        scale = OVERSHOOT * noise.TARGET_SLOWDOWN / got if got > 0 else MAX_SCALE
        delay = max(1, int(math.ceil(delay * min(MAX_SCALE, max(1 / MAX_SCALE, scale)))))
    runs = []
    for i in range(pairs + 1):
        runs.append(run_once(delay))
        on_run(done + i + 1, done + pairs + 1)
    gpus = {r.gpu for r in runs} | {probe.gpu}
    if len(gpus) > 1:
        raise CudalabError(f"the calibration ran on more than one GPU ({', '.join(sorted(gpus))}): use --device")
    aa, planted, short_aa = [], [], []
    for a, b in zip(runs, runs[1:]):
        for names, into in ((rows, aa), (short_rows, short_aa)):
            for name in names:
                sa, sb = _samples(a, name), _samples(b, name)
                if sa and sb:
                    into.append((sa, sb))
        sa, sb = _samples(a, PLAIN), _samples(b, SLOW)
        if sa and sb:
            planted.append((sa, sb))
    ratios = [x for x in map(_planted, runs) if x is not None]
    if not aa:
        raise CudalabError("no A/A pair had two passed rows to judge")
    frac = float(np.median(ratios)) if ratios else 0.0
    return Calibration(noise.floor_of(probe.gpu, aa, planted, frac, pairs, short_aa=short_aa), tuple(runs), delay,
                       tuple(sizing))


def gpu_run(spec: Any, fam: Any, opts: Any) -> Callable[[int], Run]:
    """``run_once`` for :func:`calibrate` on the GPU: each call one :func:`cudalab.session.run.run_points`
    (its own worker process) of ``opts`` with the calibration kernels added, at ``opts.n`` and at
    :data:`SHORT_N` (those rows named with :data:`SHORT`)."""
    from cudalab.catalog.user import parse_adds  # noqa: PLC0415
    from cudalab.session.run import on_its_device, run_points  # noqa: PLC0415

    path = kernel_file()

    def once(delay: int) -> Run:
        ran = run_points(spec, fam, replace(opts, n=f"{opts.n},{SHORT_N}", add=parse_adds(adds(path, delay))),
                         on_its_device(opts))
        ex = ran.executed
        refused = ex.refusal()
        if refused is not None:
            raise refused
        # an --add row is named '+NAME' in a run (its table marks the user's kernels): judged here by NAME
        rows = {r.variant.removeprefix("+") + ("" if i == 0 else SHORT): r
                for i, p in enumerate(ex.runs) for r in p.results}
        info = ex.info or {}
        tele = info.get("telemetry") or {}
        return Run(rows, str(info.get("name") or "GPU"), float(tele.get("sm_mhz") or info.get("sm_clock_mhz") or 1500))

    return once
