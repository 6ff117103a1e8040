"""Planning a run (pure: runs without a GPU): the request, the problem, each variant's launch, and
everything that can be refused before a GPU is opened.

A point is planned once, in the parent (:func:`precheck`), and travels to the GPU worker as data
(:meth:`Plan.to_dict`): the worker reads the plan back (:meth:`Plan.from_dict`: the catalog entry, the
family module, the problem and the variants by name) and plans nothing again.
"""

from __future__ import annotations

import secrets
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from cudalab import catalog, memplan
from cudalab.catalog import user, userchecks
from cudalab import launch as L
from cudalab.bench import Protocol
from cudalab.catalog import FamilySpec, VariantSpec
from cudalab.build.defines import check_launch_defines
from cudalab.errors import CatalogError, CudalabError, LaunchConfigError, SizeError, SkipRow, UsageError
from cudalab.catalog.expr import evaluate
from cudalab.catalog.family_toml import check_per_sm
from cudalab.families import Family, Launch, Size, load


@dataclass(frozen=True)
class RunRequest:
    """Everything a user chose for one family run; JSON round-trips it inside a :class:`Plan`.

    ``profile``: under a tool (ncu, compute-sanitizer) each variant runs one warm-up and one verified
    launch, nothing is timed and no roofline is measured; ``profile_launches`` (``cudalab truth``) more than 1:
    after the verified launch, that many launches in all (the input reset before each), so a tool sees several.
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
    profile_launches: int = 1
    keep_outputs: bool = False
    defines: tuple[tuple[str, str], ...] = ()
    force: bool = False
    add: tuple[user.UserKernel, ...] = ()  # --add kernels: rows after the selected variants
    exclusive: bool = False
    lock_clocks: int | None = None
    done: tuple[str, ...] = ()  # variants an earlier worker finished (a point resumed after a fault)
    judge: bool = False  # cudalab judge: passed kernel rows get a second input set in place (worker.judgeprobe)

    def to_dict(self) -> dict[str, Any]:
        """Plain dict for JSON (tuples become lists)."""
        d = asdict(self)
        d["options"] = [list(o) for o in self.options]
        d["defines"] = [list(x) for x in self.defines]
        d["add"] = [k.to_dict() for k in self.add]
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
        d["add"] = tuple(user.UserKernel.from_dict(k) for k in d.get("add", ()))
        d["done"] = tuple(str(x) for x in d.get("done", ()))
        return cls(**d)


def make_problem(spec: FamilySpec, fam: Family, req: RunRequest) -> Size:
    """Parse the request's sizes, dtype and options into the family's Size.

    Raises:
        UsageError: a bad size, dtype or option.
    """
    dtype = req.dtype or spec.default_dtype
    if dtype not in spec.dtypes:
        raise UsageError(f"{spec.name} has no dtype {dtype!r}; valid: {', '.join(spec.dtypes)}")
    return fam.problem(req.n, req.shape, dtype, dict(req.options))


def names_for(problem: Size, block: L.Dim3, tile: L.Dim3) -> dict[str, int]:
    """Names usable in family.toml expressions for one launch."""
    names = {
        "block_x": block[0], "block_y": block[1], "block_z": block[2], "threads": L.threads(block),
        "tile_x": tile[0], "tile_y": tile[1], "tile_z": tile[2], "itemsize": problem.np_dtype.itemsize,
        "warps": max(1, L.threads(block) // 32),
    }
    names.update({k: v for k, v in problem.options if isinstance(v, int) and not isinstance(v, bool)})
    return names


def plan_launch(
    variant: VariantSpec, fam: Family, problem: Size, block: str | None = None, grid: str | None = None,
    limits: L.DeviceLimits = L.DeviceLimits(), overrides: tuple[tuple[str, str], ...] = (),
) -> Launch:
    """Resolve block, tile, grid, shared memory and defines for one variant, checking every rule.

    The ``tile``, ``require``, ``sm:EXPR`` grid and ``shared`` expressions name the launch's names
    (:func:`names_for`) and the integer defines in effect: the variant's, the family's and ``overrides``
    (``-D``), so a tuned ``WT_BM`` x ``WT_BN`` gets its own tile and grid.

    Raises:
        LaunchConfigError: a device limit or the coverage rule is broken.
        SizeError: the size breaks the variant's divisibility rule.
        SkipRow: the block breaks the variant's own rule (power of two, fixed block).
    """
    default = fam.default_block(variant, problem)
    b = L.parse_dims(block) if block else default
    if variant.fixed_block and b != default:
        raise SkipRow(f"{variant.name} is compiled for block {L.fmt_dims(default)} only (got {L.fmt_dims(b)})")
    if variant.block_pow2 and L.threads(b) & (L.threads(b) - 1):
        raise SkipRow(f"{variant.name} needs a power-of-two block size (got {L.threads(b)} threads)")
    tile = L.tile_of(b, variant.per_thread)
    names = names_for(problem, b, tile)
    if variant.tile:
        # The tile may name the integer defines in effect (a tuned WT_BM x WT_BN has its own tile); a
        # define that names the tile itself (an --add kernel's TILE_X) is not one of them yet.
        early = {k: v for k, v in names.items() if not k.startswith("tile_")}
        consts = _int_defines(_defines_in_effect(variant, fam, problem, early, overrides))
        t = [evaluate(e, {**consts, **names}) for e in variant.tile] + [1, 1]
        tile = (t[0], t[1], t[2])
        if min(tile) < 1:  # block_x*TX/64 at a small block: a point of the space no launch can cover
            raise LaunchConfigError(f"{variant.name}: tile {' x '.join(variant.tile)} is {L.fmt_dims(tile)} here "
                                    f"(block {L.fmt_dims(b)}): every dim must be at least 1", "tile")
        names = names_for(problem, b, tile)
    defines = _defines_in_effect(variant, fam, problem, names, overrides)
    # require, grid and shared memory may name the compiled macros too (IPAD, WT_STAGES): sized from
    # what is compiled, so -D IPAD=2 gets the bytes the kernel indexes, not the family's default padding.
    # The launch's own names win over a define of the same name.
    known = {**_int_defines(defines), **names}
    for rule in variant.require:
        if not evaluate(rule, known):
            raise SkipRow(f"{variant.name} needs {rule} (block {L.fmt_dims(b)})")
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
        # sm:K, or sm:EXPR over the names: at least 1 (the catalog's rule, with the names now known)
        try:
            per_sm = check_per_sm(variant.grid.split(":", 1)[1], f"{variant.name}: grid {variant.grid!r}", known) or 1
        except CatalogError as exc:
            raise LaunchConfigError(str(exc), "sm:K") from None
        t = L.grid_for_tiles(extent, tile)
        needed = t[0] * t[1] * t[2]  # a persistent grid walks every tile, on any axis
        g = (max(1, min(limits.sm_count * per_sm, needed)), 1, 1)
    else:
        g = _fixed_grid(variant, known, extent)
        if variant.tile and user.is_user(variant):  # a grid the user sized against the tile they named: it
            L.check_covers(g, tile, extent, False)  # must cover the problem (a campaign refuses one that does not)
    if overrides:  # ROWS=0: a loop that never ends
        check_launch_defines(variant, {k: dict(defines)[k] for k, _ in overrides})
    shared = evaluate(variant.shared, known)
    L.check_launch(b, g, shared, limits)
    return Launch(block=b, grid=g, tile=tile, shared=shared, defines=defines)


def _fixed_grid(variant: VariantSpec, known: dict[str, int], extent: L.Dim3) -> L.Dim3:
    """A variant's fixed grid: dims (``64x64``) or expressions over the launch's names, the integer defines
    and ``extent_x``/``extent_y``/``extent_z`` (an ``--add`` kernel's ``grid=extent_x/(block_x*VW)``).

    Raises:
        LaunchConfigError: a dim below 1.
    """
    if all(p.isdigit() for p in variant.grid.split("x")):
        return L.parse_dims(variant.grid, "grid")
    names = {**known, "extent_x": extent[0], "extent_y": extent[1], "extent_z": extent[2]}
    dims = [evaluate(e, names) for e in user.split_dims(variant.grid)] + [1, 1]
    g = (dims[0], dims[1], dims[2])
    if min(g) < 1:
        raise LaunchConfigError(f"{variant.name}: grid {variant.grid} is {L.fmt_dims(g)} here: every dim must be "
                                "at least 1", "grid")
    return g


def variant_arch(variant: VariantSpec, device_arch: str) -> str:
    """The architecture a variant is built for on a GPU of ``device_arch``: its own ``params.arch``
    where it has one (``sm_90a``: wgmma and setmaxnreg exist only in the arch-specific target), else
    the GPU's. The build ``cudalab compile`` shows is the build a run loads.

    Raises:
        SkipRow: the variant's arch is for another GPU generation (the row is skipped, saying so).
    """
    wanted = str(variant.param("arch") or "")
    if not wanted or wanted == device_arch:
        return device_arch
    if wanted.rstrip("af") != device_arch:  # sm_90a runs on sm_90 only
        raise SkipRow(f"{variant.name} is {wanted} code: it runs on {wanted.rstrip('af')} GPUs only, "
                      f"not {device_arch}")
    return wanted


def _defines_in_effect(variant: VariantSpec, fam: Family, problem: Problem, names: dict[str, int],
                       overrides: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    """The macros a launch compiles with: the launch's own (``BLOCK_X`` ... ``TILE_Z``, for every kernel: a
    kernel written for ``--add`` compiles as a family's variant too), the variant's (expressions over
    ``names``), the family's for the problem (the element type), then the ``-D`` overrides (the user's word
    wins over the family's)."""
    own = {k for k, _ in variant.defines}
    launch = tuple((k, v) for k, v in user.LAUNCH_DEFINES if k not in own) if variant.kind == "kernel" else ()
    defines = tuple((k, _define_value(v, names)) for k, v in launch + tuple(variant.defines))
    defines += tuple(fam.defines(problem, variant).items())
    if overrides:
        merged = dict(defines)
        merged.update({k: _define_value(v, names) for k, v in overrides})
        defines = tuple(merged.items())
    return defines


def _int_defines(defines: tuple[tuple[str, str], ...]) -> dict[str, int]:
    """The defines whose values are integers, as expression names."""
    out = {}
    for k, v in defines:
        try:
            out[k] = int(str(v), 0)
        except ValueError:
            continue
    return out


def _define_value(value: str, names: dict[str, int]) -> str:
    """Evaluate a define as an expression over the launch names; keep it verbatim if it is not one
    (a type name such as ``float``)."""
    try:
        return str(evaluate(value, names))
    except CudalabError:
        return value


@dataclass(frozen=True)
class Plan:
    """One point, planned: what a GPU worker runs, as data it can read back without planning again.

    Attributes:
        request: what the user chose, its seed fixed (a fresh worker continuing the point draws the same
            inputs).
        spec, family: the family's catalog entry and module.
        problem: the sizes, dtype and options, parsed by the family.
        variants: the rows to run, in order (built-ins, then ``--add`` kernels).
        blocked: the first rule every kernel breaks (None: some kernel can run); kept for the caller to
            decide whether a point where nothing fits is refused (a lone point) or shown (a sweep's).
    """

    request: RunRequest
    spec: FamilySpec
    family: Family
    problem: Size
    variants: tuple[VariantSpec, ...]
    blocked: CudalabError | None = field(default=None, compare=False)

    @property
    def label(self) -> str:
        """The point in a progress line: sizes, dtype, block and defines."""
        req = self.request
        text = f"{self.problem.label} {self.problem.dtype}" + (f" block={req.block}" if req.block else "")
        return text + "".join(f" {k}={v}" for k, v in req.defines)

    def plain(self) -> bool:
        """Whether the variants run as the family defines them (no --block, --grid or -D)."""
        req = self.request
        return not (req.block or req.grid or req.defines)

    def own_roofline(self, results: Any) -> Any:
        """The roofline this point's own rows measured (the copy family's), or None."""
        if not (self.request.roofline and self.plain()):
            return None
        return self.family.own_roofline(self.problem, list(results))

    def wants_roofline(self, results: Any) -> bool:
        """Whether this point needs a copy roofline measured (bandwidth families, unless its own rows are one)."""
        req = self.request
        if not req.roofline or req.profile or self.spec.metric != "bandwidth":
            return False
        return bool(self.family.work(self.problem).bytes) and self.own_roofline(results) is None

    def roofline_bytes(self) -> int:
        """The bytes a roofline copy of this point moves (points of equal bytes share one roofline)."""
        return int(self.family.roofline_bytes(self.problem))

    def with_request(self, **changes: Any) -> "Plan":
        """The same plan with request fields changed (the GPU that runs it, the rows already done)."""
        return replace(self, request=replace(self.request, **changes))

    def to_dict(self) -> dict[str, Any]:
        """The plan as JSON data: the request, the problem and the variants' names."""
        return {"request": self.request.to_dict(), "problem": dict(self.problem.to_dict(), names=list(self.problem.names)),
                "variants": [v.name for v in self.variants]}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Plan":
        """Read :meth:`to_dict`'s output: the catalog entry and the family module by name, nothing planned.

        Raises:
            UsageError: a family or variant the catalog does not have (a plan from another cudalab).
        """
        req = RunRequest.from_dict(d["request"])
        spec = catalog.family(req.family)
        by_name = {v.name: v for v in spec.variants}
        by_name.update({v.name: v for v in user.variants(req.add, spec)})
        missing = [n for n in d["variants"] if n not in by_name]
        if missing:
            raise UsageError(f"{spec.name} has no variant {missing[0]!r}")
        # a point resumed by a fresh worker after a fault: the rows an earlier worker finished stay done
        fam = load(spec.module)
        return cls(request=req, spec=spec, family=fam, problem=fam.SIZE_TYPE.from_dict(d["problem"]),
                   variants=tuple(by_name[n] for n in d["variants"] if n not in req.done))


def precheck(req: RunRequest, strict: bool = True, check_signatures: bool = True) -> Plan:
    """Plan one point: everything that can be refused without a GPU (names, sizes, dtype, block and grid
    rules, the signatures of ``--add`` kernels: nvcc, no GPU), the problem, the rows, a fixed seed.

    Args:
        req: the run.
        strict: refuse when no kernel can run; a sweep passes False for its points once one point can
            run, so a point where nothing fits still shows its skipped rows (:attr:`Plan.blocked`).
        check_signatures: compile each ``--add`` kernel (nvcc, PTX) to check its parameters now; a tuning
            campaign's trials pass False (the GPU worker checks each before its launch, and a build per
            trial in the parent would wait on nvcc while the GPU idles).

    Raises:
        UsageError: when ``strict`` and every selected variant breaks a rule (the first reason is the message).
    """
    spec = catalog.family(req.family)
    fam = load(spec.module)
    problem = make_problem(spec, fam, req)
    # --variant none: only the --add kernels
    variants = [] if req.add and (req.variants or "").strip() == "none" else spec.select(req.variants)
    variants += user.variants(req.add, spec)
    variants = [v for v in variants if v.name not in req.done]
    if req.profile:  # under ncu only cudalab's own kernels are of interest
        variants = [v for v in variants if v.kind == "kernel"]
    if req.block:
        L.parse_dims(req.block)
    if req.grid:
        L.parse_dims(req.grid, "grid")
    kernels = [v for v in variants if v.kind == "kernel"]
    own = [v for v in kernels if user.is_user(v)]
    if own:  # --add kernels only: a family's own variants were checked when its catalog was read
        defined = ({k for k, _ in req.defines} | set(fam.defines(problem, own[0]))
                   | {k for k, v in problem.options if isinstance(v, int) and not isinstance(v, bool)})
        for k in req.add:  # a kernel its file never names: one line, before the signature's build
            if any(v.name == k.name for v in own):
                userchecks.check_named(k)
        for v in own:  # its tile/grid/shared expressions name only what exists: one line now
            userchecks.check_names(v, defined | {k for k, _ in v.defines})
    reasons = []
    for v in kernels:  # with the default device limits; the real ones are checked again per launch
        try:
            lau = plan_launch(v, fam, problem, req.block, req.grid, L.DeviceLimits(), req.defines)
            if user.is_user(v) and check_signatures:
                user.precheck_signature(v, spec.name, fam.SIGNATURE, dict(lau.defines), problem.np_dtype.itemsize)
        except (UsageError, LaunchConfigError) as exc:
            reasons.append(exc)
    blocked = reasons[0] if kernels and len(reasons) == len(kernels) else None
    if strict and blocked is not None:  # no kernel can run: refuse before opening a GPU
        raise blocked
    host = memplan.host_available()
    p = memplan.plan(fam, problem, None, host)
    if not p.host_fits:  # the host side is known before any GPU is opened
        memplan.check(p, memplan.largest_n(fam, problem.dtype, dict(problem.options), None, host))
    if req.seed is None:  # fixed now: every worker that runs or continues this point draws the same inputs
        req = replace(req, seed=secrets.randbelow(2**31 - 1))
    return Plan(req, spec, fam, problem, tuple(variants), blocked)
