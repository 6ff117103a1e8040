"""One run: family + variants + sizes + launch options → compile, verify, time → Result rows.

Every variant ends as one :class:`Result` whatever happens to it: passed, incorrect, failed (an
error while compiling or running, with the reason) or skipped (a rule it cannot meet). One
failing variant never stops the others.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any, Callable

import numpy as np

from cudalab import heartbeat, memplan, roofline, user
from cudalab import launch as L
from cudalab.bench import measure, summarize
from cudalab.catalog import VariantSpec
from cudalab.errors import CudalabError, LaunchConfigError, SkipRow
from cudalab.families import Case, Launch
from cudalab.families.model import Check, SetupContext
from cudalab.plan import RunRequest, make_problem, plan_launch, precheck  # noqa: F401  (re-exported)
from cudalab.plan import variant_arch as plan_arch
from cudalab.results import FAILED, INCORRECT, PASSED, SKIPPED, Result, Roofline
from cudalab.sampling import Timing, sustained_energy, time_case
from cudalab.verify import verified_launches

__all__ = ["Context", "FamilyRun", "RunRequest", "make_problem", "plan_launch", "precheck",
           "PASSED", "INCORRECT", "FAILED", "SKIPPED", "Result", "Roofline"]


#: Host rows whose estimated sample takes longer are skipped unless named in ``--variant``.
HOST_SKIP_S = 2.0
#: A host sample longer than this is taken once (the verified run's own time): NumPy's rows are a
#: baseline, and a quarter second each for several samples was most of a small table's wait.
HOST_ONE_SAMPLE_S = 0.25


class Context:
    """A run's shared state: the device, the random generator and a per-run cache (a family's
    ``setup`` reaches it through its :class:`~cudalab.families.model.SetupContext`)."""

    def __init__(self, device: Any, rng: np.random.Generator):
        self.device = device
        self.rng = rng
        self._shared: dict[Any, Any] = {}
        self._keep: list[np.ndarray] = []

    def upload(self, host: np.ndarray, pitched: bool = False) -> Any:
        """The device copy of a host array, uploaded once per run (keyed by the array itself, so
        every variant, and the roofline copy of the same input, share it)."""
        key = ("upload", id(host), pitched)
        if key not in self._shared:
            self._keep.append(host)  # keeps id(host) unique for the life of this context
            self._shared[key] = self.device.to_device(host, pitched=pitched)
        return self._shared[key]

    def shared(self, key: str, make: Callable[[], Any]) -> Any:
        """Return the object stored under ``key``, making it once (e.g. uploaded inputs)."""
        if key not in self._shared:
            self._shared[key] = make()
        return self._shared[key]

    def release(self, keep: np.ndarray | None = None) -> None:
        """Free everything made through :meth:`shared` and :meth:`upload`, except the upload of ``keep``
        (the roofline's source: the run's peak stays that of one variant)."""
        kept = {k: v for k, v in self._shared.items() if keep is not None and k[:2] == ("upload", id(keep))}
        for key, obj in self._shared.items():
            free = getattr(obj, "free", None)
            if key not in kept and callable(free):
                free()
        self._shared = kept
        self._keep = [keep] if kept else []


# --- running --------------------------------------------------------------------------------------

class FamilyRun:
    """Runs the selected variants of one family on one device and collects the rows."""

    def __init__(self, req: RunRequest, device: Any, on_result: Callable[[Result], None] | None = None,
                 inputs: dict[str, np.ndarray] | None = None, strict: bool = True,
                 on_stage: Callable[[str, str], None] | None = None, telemetry: Any | None = None):
        """Plan the run (all CPU-side refusals happen here).

        Args:
            req: what to run.
            device: the GPU (or a fake with the same methods).
            on_result: called with each row as it finishes.
            inputs: inputs to use instead of drawing fresh ones (the roofline copies the run's own).
            strict: refuse when no kernel can run (a sweep's points pass False, see :func:`precheck`).
            on_stage: called with (variant, "compiling" | "running") for progress.
            telemetry: a :class:`cudalab.telemetry.Telemetry` (None: no NVML, no telemetry columns).
        """
        self.req = req
        self.device = device
        self.telemetry = telemetry
        self.spec, self.family, self.problem, self.variants = precheck(req, strict)
        self.on_stage = on_stage or (lambda variant, stage: None)  # (variant, "compiling" | "running"): progress
        self.rng = np.random.default_rng(req.seed)
        self.on_result = on_result or (lambda r: None)
        self.results: list[Result] = []
        self.roofline: Roofline | None = None
        self.outputs: dict[str, np.ndarray] = {}
        self.inputs: dict[str, np.ndarray] = inputs or {}
        self.reference: np.ndarray | None = None
        self.roofline_note = ""  # why no roofline was measured, when one was wanted
        self.gpu: int | None = None  # the GPU index that ran this point (set by the session)
        self.refused: tuple[str, int] | None = None  # (why, exit code): the point could not run at all

    def run(self, ctx: Context | None = None) -> list[Result]:
        """Run every selected variant, then the roofline; rows arrive through ``on_result`` as they finish.

        A roofline that cannot be measured (memory, a fault) leaves the rows as they are and says why in
        :attr:`roofline_note`.
        """
        own = ctx is None
        ctx = ctx or Context(self.device, self.rng)
        try:
            self.run_variants(ctx)
            if self.wants_roofline():
                self.roofline, self.roofline_note = self.measure_roofline(ctx)
            elif self.req.roofline:
                self.roofline = self.own_roofline()
            if self.roofline is not None:
                self.results = [with_roofline(r, self.roofline) for r in self.results]
        finally:
            if own:
                ctx.release()
        return self.results

    def check_memory(self) -> None:
        """Refuse a point whose memory plan does not fit the device's free memory now.

        Raises:
            OutOfMemoryError: the plan does not fit (the line names the largest ``--n`` that does).
        """
        free, _ = self.device.mem_info()
        p = memplan.plan(self.family, self.problem, free, memplan.host_available())
        if not (p.device_fits and p.host_fits):
            opts = dict(self.problem.options)
            memplan.check(p, memplan.largest_n(self.family, self.problem.dtype, opts, free, p.host_free),
                          self.req.force)

    def prepare(self) -> None:
        """Draw the inputs (unless given) and compute the reference, once per point."""
        with heartbeat.host_work():  # seconds of NumPy at the largest sizes: no kernel to hang here
            if not self.inputs:
                self.inputs = self.family.make_inputs(self.problem, self.rng)
            if self.reference is None:
                self.reference = self.family.reference(self.problem, self.inputs)

    def run_variants(self, ctx: Context) -> list[Result]:
        """Run every selected variant (no roofline); each row goes to ``on_result`` as it finishes."""
        if not self.variants:
            return self.results
        self.check_memory()
        self.on_stage("inputs", "preparing")
        self.prepare()
        for v in self.variants:
            row = self.run_variant(ctx, v, self.inputs, self.reference)
            self.results.append(row)
            self.on_result(row)
        return self.results

    def plain(self) -> bool:
        """Whether the variants run as the family defines them (no --block, --grid or -D)."""
        return not (self.req.block or self.req.grid or self.req.defines)

    def own_roofline(self, results: list[Result] | None = None) -> Roofline | None:
        """The roofline this point's own rows measured (the copy family's), or None."""
        if not (self.req.roofline and self.plain()):
            return None
        return self.family.own_roofline(self.problem, self.results if results is None else results)

    def wants_roofline(self, results: list[Result] | None = None) -> bool:
        """Whether this point needs a copy roofline measured (bandwidth families, unless its own rows are one)."""
        if not self.req.roofline or self.req.profile or self.spec.metric != "bandwidth":
            return False
        return bool(self.family.work(self.problem).bytes) and self.own_roofline(results) is None

    def measure_roofline(self, ctx: Context) -> tuple[Roofline | None, str]:
        """The copy roofline on this point's bytes, or (None, why not): it never costs a row."""
        self.on_stage("roofline", "running")
        try:
            if not self.inputs:  # a fresh worker continuing the point: the same seed draws the same inputs
                with heartbeat.host_work():
                    self.inputs = self.family.make_inputs(self.problem, self.rng)
            # the same run's bytes: the copy reads the family's own first input (no new random
            # data; a matrix input of copy's shape is even the same device buffer)
            source = next(iter(self.inputs.values()), None)
            nbytes = self.family.roofline_bytes(self.problem)
            copied = roofline.source_matrix(nbytes, source, self.rng)
            ctx.release(keep=copied)  # the variants' buffers go first: the peak stays one variant's
            return roofline.measure(self.device, nbytes, self.req.protocol, copied, ctx), ""
        except KeyboardInterrupt:
            raise
        except Exception as exc:  # memory, a fault, a missing copy kernel: the rows stand without it
            return None, str(exc).splitlines()[0] if str(exc) else type(exc).__name__

    def _named(self, name: str) -> bool:
        """Whether ``--variant`` names this variant (not merely 'all')."""
        wanted = self.req.variants or ""
        return name in [w.strip() for w in wanted.split(",")]

    def run_variant(self, ctx: Context, v: VariantSpec, inputs: dict, ref: np.ndarray) -> Result:
        """Plan, compile, set up, verify and time one variant; every failure becomes its row."""
        base = Result(variant=v.name, kind=v.kind, status=FAILED, legacy=v.legacy)
        if v.dtypes and self.problem.dtype not in v.dtypes:
            return replace(base, status=SKIPPED, reason=f"supports dtype {'|'.join(v.dtypes)} only")
        if v.kind == "host" and not self._named(v.name):
            est = self.family.host_seconds(self.problem)
            if est > HOST_SKIP_S:
                return replace(base, status=SKIPPED, reason=f"NumPy would take ~{est:.0f} s a sample at this size "
                                                            f"(--variant {v.name} runs it)")
        case: Case | None = None
        compiled: list[Any] = []  # the kernels the family asked for: the row's occupancy is its kernel's
        try:
            if v.kind == "kernel":
                lau = plan_launch(v, self.family, self.problem, self.req.block, self.req.grid,
                                  self.device.limits, self.req.defines)
                base = replace(base, block=L.fmt_dims(lau.block), grid=L.fmt_dims(lau.grid), shared=lau.shared)
                defines = dict(lau.defines)
                self.on_stage(v.name, "compiling")
                if user.is_user(v):  # compiled from the user's own path, after its signature is checked
                    user.check_signature(v, self.spec.name, self.family.SIGNATURE, defines,
                                         self.problem.np_dtype.itemsize, _arch(self.device))
                    source = user.compile_source(v)
                else:
                    source = self.spec.directory / v.source

                arch = plan_arch(v, _arch(self.device))
                extra = {"arch": arch} if arch != _arch(self.device) else {}  # fakes take the plain form

                def kernels(name: str, _src=source, _def=defines, _kw=extra):
                    k = self.device.compile(_src, _def, [name], **_kw)[name]
                    compiled.append(k)
                    return k
            else:
                lau = Launch(block=(1, 1, 1), grid=(1, 1, 1), tile=(1, 1, 1))
                kernels = None  # a host, driver or library row has none
            case = self.family.setup(SetupContext(v, lau, self.problem, inputs, ctx, kernels))
            self.on_stage(v.name, "running")
            return with_occupancy(self._drive(base, v, case, ref), compiled, v.kernel, _arch(self.device))
        except user.SignatureError as exc:  # the user's kernel does not fit: an error, not a rule to skip
            return replace(base, status=FAILED, reason=str(exc))
        except (SkipRow, LaunchConfigError) as exc:
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
        """Warm up, verify (two poisons, padding, extra checks), then time inside a telemetry window."""
        dev = self.device
        host = case.timer == "host"
        proto = self.req.protocol

        def launch_once():
            case.run()
            if not host:
                dev.synchronize()

        if not self.req.profile and not host:  # under a tool the verified launch is the only one it sees
            case.reset()
            launch_once()  # first launch: module load and first-launch costs (also a crash check)
        log = dev.launch_log
        mark = len(log) if log is not None else 0
        took: list[float] = []

        def verified_launch() -> None:
            t0 = time.perf_counter()
            launch_once()
            took.append((time.perf_counter() - t0) * 1e3)

        # Two poisons catch unwritten elements; only where the poison reaches the output (kernels,
        # the driver copy) and not under a tool, where every launch is one more profile.
        twice = v.kind in ("kernel", "driver") and not self.req.profile and not case.one_poison
        def check(out: Any) -> Check:
            # host work like the reference's: a 46340-cubed matmul's sketch check took longer than the
            # watchdog's 10 s (the kernel had finished; the row read "timeout")
            with heartbeat.host_work():
                return self.family.check(self.problem, out, ref)

        verdict = verified_launches(case, verified_launch, check, twice, extra=not self.req.profile)
        chk = verdict.check
        if self.req.keep_outputs:
            self.outputs[v.name] = verdict.output
        status = PASSED if verdict.ok else INCORRECT
        reason = verdict.reason
        if self.req.profile:  # the kernels this launch ran, in order: how a tool's launches are matched
            launches = [list(x) for x in log[mark:]] if log is not None else []
            return replace(base, status=status, reason=reason, max_error=chk.max_error,
                           tolerance=chk.tolerance, extra=dict(case.notes, launches=launches))

        work = self.family.work(self.problem)
        reading = None
        if host and took and took[0] > HOST_ONE_SAMPLE_S * 1e3:  # over a second: the verified run is the sample
            timing = Timing(summarize(took[:1]), f"one host sample over {HOST_ONE_SAMPLE_S:g} s", launches=len(took))
        else:
            window = self.telemetry.window().start() if self.telemetry is not None and not host else None
            try:
                timing = time_case(dev, case, proto)
            finally:
                reading = window.stop() if window is not None else None
        stats = timing.stats
        extra = dict(case.notes, **timing.extra())
        if verdict.unwritten:
            extra["unwritten"] = verdict.unwritten
        if reading is not None:
            extra.update(reading.extra())
        if proto.energy_s > 0 and self.telemetry is not None and not host:
            extra.update(sustained_energy(dev, case, stats.median, self.telemetry, proto.energy_s,
                                          work.bytes if self.spec.metric == "bandwidth" else 0,
                                          work.flops if self.spec.metric == "flops" else 0))
        if case.to_result is not None and host:  # a host row's result is on the host when it ends: one run says it
            case.reset()
            t0 = time.perf_counter()
            extra["value"] = case.to_result()
            extra["to_result_ms"] = (time.perf_counter() - t0) * 1e3
        elif case.to_result is not None:
            def total() -> float:
                case.reset()
                dev.synchronize()
                t0 = time.perf_counter()
                extra["value"] = case.to_result()
                return (time.perf_counter() - t0) * 1e3
            # a secondary figure (host work included, so never as steady as events): five samples
            tstats = measure(total, replace(proto, warmup=1, min_samples=min(proto.min_samples, 5), max_samples=5,
                                            budget_s=proto.budget_s / 4))
            extra["to_result_ms"] = tstats.median
        sec = stats.median / 1e3
        gbs = work.bytes / sec / 1e9 if work.bytes and sec > 0 else None
        gflops = work.flops / sec / 1e9 if work.flops and sec > 0 else None
        if case.items and sec > 0:
            extra["rate"] = case.items / sec / 1e9
        return replace(
            base, status=status, reason=reason, stats=stats, gbs=gbs, gflops=gflops, max_error=chk.max_error, tolerance=chk.tolerance, extra=extra,
        )


def with_roofline(r: Result, roofline: Roofline | None) -> Result:
    """The row with its rate as % of ``roofline`` (unchanged without a rate or a roofline)."""
    if r.gbs is None or roofline is None:
        return r
    return replace(r, pct_roofline=100.0 * r.gbs / roofline.gbs)


def with_occupancy(row: Result, kernels: list[Any], name: str, arch: str) -> Result:
    """``row`` with the theoretical occupancy of its kernel's last launch in ``extra`` (``occupancy`` in %,
    ``occupancy_limiter``, ``occupancy_blocks``): the variant's own kernel (``name``) where the family
    compiled it, else the first it compiled; the row unchanged where none was launched."""
    from cudalab.inspect.occupancy import occupancy  # noqa: PLC0415

    k = next((k for k in kernels if getattr(k, "name", "") == name), kernels[0] if kernels else None)
    launched = getattr(k, "last_launch", None)
    if launched is None:
        return row
    block, shared = launched
    try:
        occ = occupancy(arch, L.threads(block), int(k.num_regs), int(k.static_shared) + int(shared))
    except (CudalabError, TypeError, ValueError):
        return row
    if occ is None:
        return row
    extra = {"occupancy": round(occ.pct, 2), "occupancy_limiter": occ.limiter, "occupancy_blocks": occ.blocks}
    if k.name != name:
        extra["occupancy_kernel"] = k.name
    return replace(row, extra={**row.extra, **extra})


def _arch(device: Any) -> str:
    """The device's nvcc architecture (``sm_90``); sm_90 where a fake device has none."""
    return str(getattr(getattr(device, "info", None), "arch", "") or "sm_90")
