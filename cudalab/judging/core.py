"""``cudalab judge`` and ``cudalab.judge(...)``: one candidate kernel judged beside its family's reference and
best variant, as one JSON-able dict.

A :class:`Judge` keeps its GPU worker between calls (a loop of a code-writing program calls it hundreds of
times: the GPU, the build cache and the drawn inputs stay warm); :func:`judge` uses one kept per process.
The candidate's point runs with ``RunRequest.judge`` set: the worker gives its passed kernel rows a second
look (:mod:`cudalab.worker.judgeprobe`); the code is scanned here (:mod:`cudalab.judging.scan`); the
object is assembled from the rows (:mod:`cudalab.judging.verdict`).
"""

from __future__ import annotations

import atexit
import hashlib
import json
import math
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from cudalab import __version__, catalog, private
from cudalab.catalog import FamilySpec, user
from cudalab.errors import UsageError
from cudalab.judging import kept as K
from cudalab.judging import scan as S
from cudalab.judging import verdict as V
from cudalab.records.results import PASSED

__all__ = ["Judge", "judge", "pick_reference", "pick_best", "DEFAULT_SEED", "DEFAULT_BUDGET"]

#: The inputs' seed when none is given: a fixed one, so a loop's calls share the worker's drawn inputs.
DEFAULT_SEED = 1
#: Seconds of samples per row (the stopping rule usually ends sooner: IQR or the median's interval).
DEFAULT_BUDGET = 0.1
#: A judge re-measures its reference and best rows and the roofline when those it has are older than this
#: (seconds); younger ones are reused for the next candidate of the same point on the same GPU, moments apart, kept
#: in memory and on disk (:mod:`cudalab.judging.kept`): a loop's call then times one row, not three and a copy,
#: whether it calls ``cudalab.judge`` or the command. ``reuse_s=0`` measures them every call.
REUSE_S = K.KEEP_S


def pick_reference(spec: FamilySpec) -> str | None:
    """The family's reference row: its library row (cuBLAS, CUB...), else its driver row (memcpy), else None."""
    for kind in ("library", "driver"):
        for v in spec.variants:
            if v.kind == kind:
                return v.name
    return None


def pick_best(spec: FamilySpec) -> str | None:
    """The family's best variant: the kernel marked ``best`` in its family.toml, else its last kernel that is
    neither a faithful legacy one nor a wrong twin kept to be caught (ladders run from the textbook's first
    kernel to the best)."""
    kernels = [v for v in spec.variants if v.kind == "kernel" and not v.name.startswith("wrong")
               and "must be ✗" not in v.description]
    marked = [v for v in kernels if v.param("best")]
    if marked:
        return marked[0].name
    modern = [v for v in kernels if not v.legacy]
    return (modern or kernels)[-1].name if kernels else None


class Judge:
    """Judges candidates on one GPU, its worker kept warm between calls.

    Args:
        device: the GPU index.
        timeout: seconds a kernel may run before its worker is killed (None: cudalab's rule).
        progress: progress on stderr.
    """

    def __init__(self, device: int = 0, timeout: float | None = None, progress: bool = False, reuse_s: float = REUSE_S):
        """Check the arguments; the worker starts with the first call.

        Raises:
            UsageError: a negative device, or a timeout that is not a positive, finite number of seconds.
        """
        if int(device) < 0:
            raise UsageError(f"--device must be a GPU index (0 or more), not {device}")
        if timeout is not None and not 0 < timeout < float("inf"):
            raise UsageError(f"--timeout must be a positive number of seconds (got {timeout})")
        self.device, self.timeout, self.progress, self.reuse_s = int(device), timeout, progress, reuse_s
        self._kept: dict[str, K.Kept] = {}  # a point's reference and best rows and roofline, when measured
        self._session: Any = None
        self._scans: dict[str, dict[str, Any]] = {}
        self._gpu: dict[str, Any] | None = None  # the GPU's facts, as its worker gave them when it opened
        #: Where the last call's time went (seconds): planning, waiting for the GPU to open, the rows (and roofline)
        #: on the GPU, the verdict; how many rows ran, whether a roofline was measured, the kept rivals' age.
        self.phases: dict[str, Any] = {}

    def __enter__(self) -> "Judge":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """End the worker."""
        if self._session is not None:
            self._session.close()
            self._session = None

    def _ensure(self) -> Any:
        from cudalab.report import progress as P  # noqa: PLC0415
        from cudalab.execute.local.drive import Session  # noqa: PLC0415

        if self._session is None:
            self._session = Session([self.device], observer=P.for_stderr(quiet=not self.progress),
                                    timeout=self.timeout, keep_workers=True).start()
        return self._session

    def _facts(self, session: Any) -> dict[str, Any]:
        """The GPU's facts (its worker asked once, when ready: it opens the GPU while the parent plans)."""
        if self._gpu is None:
            self._gpu = dict(session.ask(self.device, op="info", bandwidth=False).get("device") or {})
        return self._gpu

    def _rivals(self, spec: FamilySpec, fam: Any, req: Any, rows: list[str], session: Any) -> tuple[str, K.Kept | None]:
        """The key of this point's rivals and roofline on this GPU, and what was kept under it (None: measure)."""
        module = sys.modules.get(type(fam).__module__)  # the family's Python code: its class's module
        code = K.code_digest(getattr(spec, "directory", None), getattr(module, "__file__", None))
        k = K.key(self._facts(session), replace(req, add=(), variants=None), tuple(rows), code)
        have = self._kept.get(k)
        if have is None or have.age_s >= self.reuse_s:
            have = K.load(k, self.reuse_s)
        return k, have

    def judge(self, family: str, add: str, *, n: Any = None, shape: Any = None, dtype: str | None = None,
              seed: int | None = None, budget: float = DEFAULT_BUDGET, min_samples: int = 10,
              against: str | None = None, reference: str | None = None, hot: bool = False,
              launch: str = "auto", **options: Any) -> dict[str, Any]:
        """Judge one ``--add`` kernel; returns the object ``cudalab judge`` prints (docs/judge-schema.json).

        Args:
            family: the family's name.
            add: the ``--add`` text (``"mine.cu:my_kernel@block=256"``).
            n, shape, dtype: one problem (no sweeps).
            seed: the inputs' seed (default :data:`DEFAULT_SEED`).
            budget, min_samples, hot, launch: the timing protocol, as on the family commands.
            against: the variant to beat (default :func:`pick_best`); ``none``: no best row.
            reference: the reference row (default :func:`pick_reference`); ``none``: no reference row.
            **options: the family's own options.

        Raises:
            UsageError, LaunchConfigError: refused input (before any GPU work).
            WorkerError: the GPU could not be opened.
        """
        from cudalab.api import run_options  # noqa: PLC0415
        from cudalab.families import load  # noqa: PLC0415
        from cudalab.session import sweep  # noqa: PLC0415
        from cudalab.session.run import requests_from  # noqa: PLC0415

        if not isinstance(add, str):
            raise UsageError("judge takes one --add: the candidate kernel")
        t0 = time.perf_counter()
        with catalog.held():
            spec = catalog.family(family)
            fam = load(spec.module)
            names = {v.name for v in spec.variants}
            ref = _chosen(reference, pick_reference(spec), names, "--reference", spec.name)
            best = _chosen(against, pick_best(spec), names, "--against", spec.name)
            rows = [x for x in dict.fromkeys((ref, best)) if x]
            opts = run_options(fam, ",".join(rows) if rows else "none", n=n, shape=shape, dtype=dtype, add=(add,),
                               seed=DEFAULT_SEED if seed is None else seed, budget=budget, min_samples=min_samples,
                               hot=hot, roofline=spec.metric == "bandwidth", device=self.device,
                               launch=launch, **options)
            reqs = [replace(r, judge=True) for r in requests_from(spec, fam, opts)]
            if len(reqs) != 1:
                raise UsageError(f"judge runs one point; these options make {len(reqs)} (give one value each)")
            t_plan = time.perf_counter()
            session = self._ensure()
            wants_roof = reqs[0].roofline
            key, kept = self._rivals(spec, fam, reqs[0], rows, session)
            if kept is not None:  # the candidate alone: its rivals' rows (and the roofline, if any) are recent
                reqs = [replace(reqs[0], variants="none", roofline=wants_roof and kept.roofline is None)]
            (plan,) = sweep.plan_points(reqs)
            (uk,) = plan.request.add
            t_open = time.perf_counter()
            points, _ = session.run([plan], len(plan.variants))
            t_rows = time.perf_counter()
            self.phases = {"plan_s": t_plan - t0, "gpu_open_s": t_open - t_plan, "rows_s": t_rows - t_open,
                           "rows": len(plan.variants), "roofline": bool(plan.request.roofline),
                           "kept_s": kept.age_s if kept is not None else None}
        if session.stopping.is_set():  # Ctrl-C: the session killed its worker; the next call starts a fresh one
            from cudalab.errors import CudalabError  # noqa: PLC0415

            session.stopping.clear()
            err = CudalabError("interrupted: the candidate was not judged")
            err.exit_code = 130
            raise err
        point = points[0]
        if point.refused is not None:
            from cudalab.errors import CudalabError  # noqa: PLC0415

            err = CudalabError(point.refused[0])
            err.exit_code = point.refused[1]
            raise err
        rp = sweep.point_of(point, spec)
        by = {r.variant: r for r in rp.results}
        roof, roof_note = rp.roofline, rp.roofline_note
        if kept is not None:
            by.update(kept.rows)
            if roof is None and kept.roofline is not None:
                roof, roof_note = kept.roofline, f"measured {kept.age_s:.0f} s before this candidate, on this GPU"
        elif all(by.get(x) is not None and by[x].status == PASSED for x in rows) and (roof or not wants_roof):
            self._kept[key] = K.Kept({x: by[x] for x in rows}, roof, roof_note, time.time())
            K.save(key, self._kept[key])
        age = kept.age_s if kept is not None else 0.0
        cand = by.get(uk.name)
        if cand is None:  # the worker died before the candidate's row: a failed row says so
            from cudalab.records.results import FAILED, Result  # noqa: PLC0415

            cand = Result(variant=uk.name, kind="kernel", status=FAILED, reason="no row came back from the GPU worker")
        info = session.info()
        code = self._code(plan, fam, uk, cand, info)
        floor, ceiling = _floor_and_ceiling(info, cand)
        judged = V.verdict(cand, by.get(ref) if ref else None, by.get(best) if best else None, metric=spec.metric,
                           roofline=roof, ceiling=ceiling, floor=floor, scan=code.pop("scan"))
        for side in ("reference", "best"):
            if judged[side] is not None:
                judged[side]["age_s"] = age  # how long before the candidate its row was measured
        self.phases["verdict_s"] = time.perf_counter() - t_rows
        return _plain({"schema_version": V.SCHEMA_VERSION, "cudalab": __version__, "family": spec.name,
                       "candidate": uk.name, **judged, "problem": rp.problem, "seed": plan.request.seed,
                       "roofline": roof.to_dict() if roof is not None else None, "roofline_note": roof_note,
                       "protocol": rp.protocol, "gpu": _gpu(info), "code": code})

    def _code(self, plan: Any, fam: Any, uk: user.UserKernel, cand: Any, info: dict[str, Any]) -> dict[str, Any]:
        """What ran: the file, its hash, the macros, the launch, and the scan of its code."""
        from cudalab import launch as L  # noqa: PLC0415
        from cudalab.plan import plan_launch  # noqa: PLC0415

        v = next(x for x in plan.variants if x.name == uk.name)
        try:
            lau = plan_launch(v, fam, plan.problem, plan.request.block, plan.request.grid, L.DeviceLimits(),
                              plan.request.defines)
            defines = {str(k): str(val) for k, val in dict(lau.defines).items()}
        except Exception:  # a launch the rules refuse: the row says so; the scan goes on without macros
            defines = {k: val for k, val in uk.defines}
        path = Path(uk.path)
        try:
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError:
            digest = ""
        arch = "sm_" + str(info.get("compute_capability", "9.0")).replace(".", "")
        return {"path": str(path), "kernel": uk.kernel, "sha256": digest, "add": uk.text, "defines": defines,
                "block": cand.block, "grid": cand.grid, "shared": cand.shared, "arch": arch,
                "scan": self._scan(path, digest, defines, arch)}

    def _scan(self, path: Path, digest: str, defines: dict[str, str], arch: str) -> dict[str, Any]:
        """:func:`cudalab.judging.scan.scan`, cached by the file's hash, the macros and the arch (here and on disk)."""
        key = hashlib.sha256(json.dumps([str(path), digest, sorted(defines.items()), arch]).encode()).hexdigest()[:32]
        if key in self._scans:
            return self._scans[key]
        folder = private.private_folder("cudalab-judge")
        cached = folder / f"scan-{key}.json"
        try:
            found = json.loads(cached.read_text()) if digest else None
        except (OSError, ValueError):
            found = None
        if not isinstance(found, dict):
            s = S.scan(path, defines, arch)
            found = {"child_grids": list(s.child_grids), "side_streams": list(s.side_streams), "ptx": s.ptx,
                     "note": s.note}
            if digest and s.ptx:  # only a complete scan is kept
                private.write_private(folder, cached.name, json.dumps(found))
        self._scans[key] = found
        return found


def _chosen(given: str | None, default: str | None, names: set[str], option: str, family: str) -> str | None:
    """A reference or best variant: the one given (``none``: no row), else the family's default.

    Raises:
        UsageError: a name the family does not have.
    """
    if given is None:
        return default
    if given == "none":
        return None
    if given not in names:
        raise UsageError(f"{option} {given!r}: {family} has no such variant (cudalab list {family})")
    return given


def _floor_and_ceiling(info: dict[str, Any], cand: Any) -> tuple[float, float | None]:
    """The noise floor for the candidate's row on this GPU, and its measured compute peak (GFLOP/s), if cached."""
    from cudalab.inspect import ceilings  # noqa: PLC0415
    from cudalab.records import noise  # noqa: PLC0415

    name = str(info.get("name", ""))
    effect, floor = noise.effect_for(name or None)
    if floor is not None and cand.stats is not None:
        effect = floor.effect(cand.stats.median) or effect
    c = ceilings.cached(name, int(info.get("sm_clock_mhz") or 0)) if name else None
    peaks = [p for p in ((c.fma_gflops, c.tensor_gflops) if c is not None else ()) if p]
    return float(effect), (max(peaks) if peaks else None)


def _plain(value: Any) -> Any:
    """``value`` as strict JSON holds it: tuples as lists, NumPy scalars as Python numbers, and a number that is
    not finite (a nan max error) as None, so the object always serialises (``json.dumps(allow_nan=False)``)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, (int, float)) or hasattr(value, "item"):
        try:
            x = value.item() if hasattr(value, "item") else value
        except (ValueError, TypeError):
            return str(value)
        if isinstance(x, float) and not math.isfinite(x):
            return None
        return x
    return str(value)


def _gpu(info: dict[str, Any]) -> dict[str, Any]:
    """The GPU's facts (a run record's ``device``), without the telemetry summary."""
    return {k: v for k, v in info.items() if k != "telemetry"}


_kept: Judge | None = None


def judge(family: str, add: str, *, device: int = 0, timeout: float | None = None, **kw: Any) -> dict[str, Any]:
    """:meth:`Judge.judge` on a judge kept for the process (its worker stays warm between calls; it ends
    with the process). A different ``device`` or ``timeout`` starts a fresh one."""
    global _kept
    if _kept is None or (_kept.device, _kept.timeout) != (device, timeout):
        if _kept is not None:
            _kept.close()
        else:
            atexit.register(lambda: _kept.close() if _kept is not None else None)
        _kept = Judge(device, timeout)
    return _kept.judge(family, add, **kw)
