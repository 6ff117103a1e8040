"""One run: family + variants + sizes + launch options → compile, verify, time → Result rows.

Every variant ends as one :class:`Result` whatever happens to it: passed, incorrect, failed (an
error while compiling or running, with the reason) or skipped (a rule it cannot meet). One
failing variant never stops the others.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, fields, replace
from typing import Any, Callable

import numpy as np

from cudalab import catalog
from cudalab import launch as L
from cudalab.bench import Protocol, Stats, measure
from cudalab.catalog import FamilySpec, VariantSpec
from cudalab.errors import (
    CudalabError,
    LaunchConfigError,
    OutOfMemoryError,
    SizeError,
    UsageError,
)
from cudalab.expr import evaluate
from cudalab.families import Case, Family, Launch, Problem, load
from cudalab.results import FAILED, INCORRECT, PASSED, SKIPPED, Result, Roofline

__all__ = ["Context", "FamilyRun", "RunRequest", "make_problem", "measure_roofline", "plan_launch", "precheck",
           "PASSED", "INCORRECT", "FAILED", "SKIPPED", "Result", "Roofline"]


@dataclass(frozen=True)
class RunRequest:
    """Everything a user chose for one family run; JSON round-trips it for child runs (:mod:`cudalab.child`).

    ``profile``: under a tool (ncu, compute-sanitizer) each variant runs one warm-up and one verified
    launch, nothing is timed and no roofline is measured.
    """

    family: str
    variants: str | None = None
    n: str | None = None
    shape: str | None = None
    dtype: str | None = None
    block: str | None = None
    grid: str | None = None
    options: tuple[tuple[str, Any], ...] = ()
    protocol: Protocol = Protocol()
    seed: int | None = None
    roofline: bool = True
    device: int = 0
    profile: bool = False
    keep_outputs: bool = False
    defines: tuple[tuple[str, str], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """Plain dict for JSON (tuples become lists)."""
        d = asdict(self)
        d["options"] = [list(o) for o in self.options]
        d["defines"] = [list(x) for x in self.defines]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "RunRequest":
        """Read :meth:`to_dict`'s output.

        Raises:
            UsageError: a key this RunRequest does not have.
        """
        known = {f.name for f in fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise UsageError(f"run request has unknown keys {sorted(unknown)}")
        d = dict(d)
        d["options"] = tuple((str(k), v) for k, v in d.get("options", ()))
        d["defines"] = tuple((str(k), str(v)) for k, v in d.get("defines", ()))
        d["protocol"] = Protocol(**d.get("protocol", {}))
        return cls(**d)


class Context:
    """What a family's ``setup`` gets: the device, the random generator and a per-run cache."""

    def __init__(self, device: Any, rng: np.random.Generator):
        self.device = device
        self.rng = rng
        self._shared: dict[str, Any] = {}

    def shared(self, key: str, make: Callable[[], Any]) -> Any:
        """Return the object stored under ``key``, making it once (e.g. uploaded inputs)."""
        if key not in self._shared:
            self._shared[key] = make()
        return self._shared[key]

    def release(self) -> None:
        """Free everything made through :meth:`shared`."""
        for obj in self._shared.values():
            free = getattr(obj, "free", None)
            if callable(free):
                free()
        self._shared.clear()


# --- planning (pure: runs without a GPU) --------------------------------------------------------

def make_problem(spec: FamilySpec, fam: Family, req: RunRequest) -> Problem:
    """Parse the request's sizes, dtype and options into the family's Problem.

    Raises:
        UsageError: a bad size, dtype or option.
    """
    dtype = req.dtype or spec.default_dtype
    if dtype not in spec.dtypes:
        raise UsageError(f"{spec.name} has no dtype {dtype!r}; valid: {', '.join(spec.dtypes)}")
    return fam.problem(req.n, req.shape, dtype, dict(req.options))


def names_for(problem: Problem, block: L.Dim3, tile: L.Dim3) -> dict[str, int]:
    """Names usable in family.toml expressions for one launch."""
    names = {
        "block_x": block[0], "block_y": block[1], "block_z": block[2], "threads": L.threads(block),
        "tile_x": tile[0], "tile_y": tile[1], "tile_z": tile[2], "itemsize": problem.np_dtype.itemsize,
        "warps": max(1, L.threads(block) // 32),
    }
    names.update({k: v for k, v in problem.options if isinstance(v, int) and not isinstance(v, bool)})
    return names


def plan_launch(
    variant: VariantSpec, fam: Family, problem: Problem, block: str | None = None, grid: str | None = None,
    limits: L.DeviceLimits = L.DeviceLimits(), overrides: tuple[tuple[str, str], ...] = (),
) -> Launch:
    """Resolve block, tile, grid, shared memory and defines for one variant, checking every rule.

    Raises:
        LaunchConfigError: a device limit or the coverage rule is broken.
        SizeError: the size breaks the variant's divisibility rule.
        UsageError: the block breaks the variant's own rule (power of two, fixed block).
    """
    default = fam.default_block(variant, problem)
    b = L.parse_dims(block) if block else default
    if variant.fixed_block and b != default:
        raise UsageError(f"{variant.name} is compiled for block {L.fmt_dims(default)} only (got {L.fmt_dims(b)})")
    if variant.block_pow2 and L.threads(b) & (L.threads(b) - 1):
        raise UsageError(f"{variant.name} needs a power-of-two block size (got {L.threads(b)} threads)")
    tile = L.tile_of(b, variant.per_thread)
    names = names_for(problem, b, tile)
    if variant.tile:
        t = [evaluate(e, names) for e in variant.tile] + [1, 1]
        tile = (t[0], t[1], t[2])
        names = names_for(problem, b, tile)
    for rule in variant.require:
        if not evaluate(rule, names):
            raise UsageError(f"{variant.name} needs {rule} (block {L.fmt_dims(b)})")
    extent = fam.extent(problem, variant)
    if variant.divisible:
        for axis in range(3):
            if extent[axis] % tile[axis]:
                raise SizeError(
                    f"{variant.name} handles only sizes that are multiples of its tile "
                    f"{L.fmt_dims(tile)} (block {L.fmt_dims(b)} × {L.fmt_dims(variant.per_thread)} per thread); "
                    f"{'xyz'[axis]} extent is {extent[axis]}"
                )
    if grid:
        g = L.parse_dims(grid, "grid")
        L.check_covers(g, tile, extent, variant.grid_stride)
    elif variant.grid == "tiles":
        g = L.grid_for_tiles(extent, tile)
    elif variant.grid.startswith("sm:"):
        per_sm = int(variant.grid.split(":")[1])
        needed = L.grid_for_tiles(extent, tile)[0]
        g = (max(1, min(limits.sm_count * per_sm, needed)), 1, 1)
    else:
        g = L.parse_dims(variant.grid, "grid")
    shared = evaluate(variant.shared, names)
    defines = tuple((k, _define_value(v, names)) for k, v in variant.defines)
    defines += tuple(fam.defines(problem, variant).items())  # e.g. the element type for the problem's dtype
    if overrides:  # --define NAME=VALUE: the user's word wins over the family's
        merged = dict(defines)
        merged.update({k: _define_value(v, names) for k, v in overrides})
        defines = tuple(merged.items())
    L.check_launch(b, g, shared, limits)
    return Launch(block=b, grid=g, tile=tile, shared=shared, defines=defines)


def _define_value(value: str, names: dict[str, int]) -> str:
    """Evaluate a define as an expression over the launch names; keep it verbatim if it is not one
    (a type name such as ``float``)."""
    try:
        return str(evaluate(value, names))
    except CudalabError:
        return value


def precheck(req: RunRequest) -> tuple[FamilySpec, Family, Problem, list[VariantSpec]]:
    """Everything that can be refused without a GPU: names, sizes, dtype, block and grid rules.

    Raises:
        UsageError: when every selected variant breaks a rule (the first reason is the message).
    """
    spec = catalog.family(req.family)
    fam = load(spec.module)
    problem = make_problem(spec, fam, req)
    variants = spec.select(req.variants)
    if req.profile:  # under ncu only cudalab's own kernels are of interest
        variants = [v for v in variants if v.kind == "kernel"]
    if req.block:
        L.parse_dims(req.block)
    if req.grid:
        L.parse_dims(req.grid, "grid")
    kernels = [v for v in variants if v.kind == "kernel"]
    reasons = []
    for v in kernels:  # with the default device limits; the real ones are checked again per launch
        try:
            plan_launch(v, fam, problem, req.block, req.grid, L.DeviceLimits(), req.defines)
        except (UsageError, LaunchConfigError) as exc:
            reasons.append(exc)
    if kernels and len(reasons) == len(kernels):  # no kernel can run: refuse before opening a GPU
        raise reasons[0]
    return spec, fam, problem, variants


# --- running --------------------------------------------------------------------------------------

class FamilyRun:
    """Runs the selected variants of one family on one device and collects the rows."""

    def __init__(self, req: RunRequest, device: Any, on_result: Callable[[Result], None] | None = None):
        self.req = req
        self.device = device
        self.spec, self.family, self.problem, self.variants = precheck(req)
        self.rng = np.random.default_rng(req.seed)
        self.on_result = on_result or (lambda r: None)
        self.results: list[Result] = []
        self.roofline: Roofline | None = None
        self.outputs: dict[str, np.ndarray] = {}
        self.inputs: dict[str, np.ndarray] = {}

    def run(self) -> list[Result]:
        """Run every selected variant; rows arrive through ``on_result`` as they finish."""
        need = self.family.device_bytes(self.problem)
        free, _ = self.device.mem_info()
        if need > free:
            raise OutOfMemoryError(need, free, f"{self.spec.name} {self.problem.label} {self.problem.dtype}")
        inputs = self.inputs = self.family.make_inputs(self.problem, self.rng)
        ref = self.family.reference(self.problem, inputs)
        ctx = Context(self.device, self.rng)
        try:
            for v in self.variants:
                row = self.run_variant(ctx, v, inputs, ref)
                self.results.append(row)
                self.on_result(row)
        finally:
            ctx.release()
        work = self.family.work(self.problem)
        if self.req.roofline and not self.req.profile and self.spec.metric == "bandwidth" and work.bytes:
            nbytes = self.family.roofline_bytes(self.problem)
            self.roofline = measure_roofline(self.device, nbytes, self.req.protocol)
            self.results = [self._with_roofline(r) for r in self.results]
        return self.results

    def _with_roofline(self, r: Result) -> Result:
        if r.gbs is None or self.roofline is None:
            return r
        return replace(r, pct_roofline=100.0 * r.gbs / self.roofline.gbs)

    def run_variant(self, ctx: Context, v: VariantSpec, inputs: dict, ref: np.ndarray) -> Result:
        """Plan, compile, set up, verify and time one variant; every failure becomes its row."""
        base = Result(variant=v.name, kind=v.kind, status=FAILED, legacy=v.legacy)
        if v.dtypes and self.problem.dtype not in v.dtypes:
            return replace(base, status=SKIPPED, reason=f"supports dtype {'|'.join(v.dtypes)} only")
        case: Case | None = None
        try:
            if v.kind == "kernel":
                lau = plan_launch(v, self.family, self.problem, self.req.block, self.req.grid,
                                  self.device.limits, self.req.defines)
                base = replace(base, block=L.fmt_dims(lau.block), grid=L.fmt_dims(lau.grid), shared=lau.shared)
                defines = dict(lau.defines)
                source = self.spec.directory / v.source

                def kernels(name: str, _src=source, _def=defines):
                    return self.device.compile(_src, _def, [name])[name]
            else:
                lau = Launch(block=(1, 1, 1), grid=(1, 1, 1), tile=(1, 1, 1))

                def kernels(name: str):
                    raise CudalabError(f"{v.name} is a {v.kind} row and has no kernels")
            case = self.family.setup(ctx, v, lau, self.problem, inputs, kernels)
            return self._drive(base, v, case, ref)
        except (UsageError, LaunchConfigError) as exc:
            return replace(base, status=SKIPPED, reason=str(exc))
        except KeyboardInterrupt:
            raise
        except CudalabError as exc:
            return replace(base, status=FAILED, reason=str(exc).splitlines()[0], extra={"log": str(exc)})
        except Exception as exc:  # a family bug must not take the other variants down
            return replace(base, status=FAILED, reason=f"{type(exc).__name__}: {exc}")
        finally:
            if case is not None:
                try:
                    case.close()
                except Exception:
                    pass

    def _drive(self, base: Result, v: VariantSpec, case: Case, ref: np.ndarray) -> Result:
        dev = self.device
        host = case.timer == "host"
        proto = self.req.protocol

        def launch_once():
            case.reset()
            case.run()
            if not host:
                dev.synchronize()

        if not self.req.profile:  # under a tool the verified launch is the only one it sees
            launch_once()  # first launch: module load and first-launch costs (also a crash check)
        log = dev.launch_log
        mark = len(log) if log is not None else 0
        case.reset()
        case.poison()
        case.run()
        if not host:
            dev.synchronize()
        out = case.result()
        chk = self.family.check(self.problem, out, ref)
        if self.req.keep_outputs:
            self.outputs[v.name] = out
        status = PASSED if chk.ok else INCORRECT
        reason = "" if chk.ok else f"max error {chk.max_error:.3g} > {chk.tolerance:.3g}{chk.detail}"
        if self.req.profile:  # the kernels this launch ran, in order: how a tool's launches are matched
            launches = [list(x) for x in log[mark:]] if log is not None else []
            return replace(base, status=status, reason=reason, max_error=chk.max_error,
                           tolerance=chk.tolerance, extra=dict(case.notes, launches=launches))

        def sample() -> float:
            case.reset()
            if proto.flush_l2 and not host:
                dev.flush_l2()
            if host:
                t0 = time.perf_counter()
                case.run()
                return (time.perf_counter() - t0) * 1e3
            return dev.time_ms(case.run)

        host_proto = replace(proto, min_samples=min(proto.min_samples, 3), warmup=0) if host else proto
        stats = measure(sample, host_proto)
        extra = dict(case.notes)
        if case.to_result is not None:
            def total() -> float:
                case.reset()
                dev.synchronize()
                t0 = time.perf_counter()
                extra["value"] = case.to_result()
                return (time.perf_counter() - t0) * 1e3
            tstats = measure(total, replace(proto, warmup=1, min_samples=min(proto.min_samples, 5), budget_s=proto.budget_s / 2))
            extra["to_result_ms"] = tstats.median
        work = self.family.work(self.problem)
        sec = stats.median / 1e3
        gbs = work.bytes / sec / 1e9 if work.bytes and sec > 0 else None
        gflops = work.flops / sec / 1e9 if work.flops and sec > 0 else None
        if case.items and sec > 0:
            extra["rate"] = case.items / sec / 1e9
        return replace(
            base, status=status, reason=reason, stats=stats, gbs=gbs, gflops=gflops, max_error=chk.max_error, tolerance=chk.tolerance, extra=extra,
        )


def measure_roofline(device: Any, nbytes: int, protocol: Protocol) -> Roofline:
    """Measure the copy roofline for a buffer of ``nbytes``: the driver copy and the copy family's
    best kernel (``params.roofline = true``) on the same bytes; the faster is the roofline."""
    best = load("copy").roofline_variant()
    elems = max(1, nbytes // 4)
    cols = min(elems, 4096)
    rows = max(1, elems // cols)
    req = RunRequest(family="copy", variants=f"memcpy_dtod,{best.name}", shape=f"{rows}x{cols}",
                     roofline=False, protocol=protocol)
    rows_ = {r.variant: r for r in FamilyRun(req, device).run()}
    dtod = rows_["memcpy_dtod"]
    kern = rows_[best.name]
    if dtod.status != PASSED or not dtod.gbs:
        raise CudalabError(f"the roofline copy failed: {dtod.reason}")
    kgbs = kern.gbs if kern.status == PASSED else None
    if kgbs and kgbs > dtod.gbs:
        return Roofline(gbs=kgbs, source=f"copy {best.name}", dtod_gbs=dtod.gbs, kernel_gbs=kgbs)
    return Roofline(gbs=dtod.gbs, source="memcpy_dtod", dtod_gbs=dtod.gbs, kernel_gbs=kgbs)
