"""``cudalab list``, ``info`` and ``compile``: the catalog, the GPUs, and nvcc's report."""

from __future__ import annotations

import sys

import click

from cudalab import catalog
from cudalab.catalog import user
from cudalab.cli.app import cli
from cudalab.cli.options import DEVICE_INDEX, parse_defines, wide_option
from cudalab.errors import CudalabError
from cudalab.launch import fmt_dims
from cudalab.textcells import clean


#: ``cudalab list``'s table: its columns, title and the columns that wrap on a narrow terminal.
LIST_COLUMNS = ("family", "variants", "description", "from")
LIST_TITLE = "cudalab families (cudalab list FAMILY for details)"
LIST_WRAP = ("variants", "description")


def list_rows(cat: catalog.Catalog) -> tuple[list[tuple[str, ...]], list[tuple[str, str]]]:
    """``cudalab list``'s rows (from the family.toml files alone) and the broken families with why.

    An outside family's module is imported here (one that fails is broken too); the built-in families'
    modules are not (their command imports them when it runs).
    """
    broken = [(b.name, b.reason) for b in cat.broken]
    if cat.origins:
        from cudalab.catalog import userimport  # noqa: PLC0415
        from cudalab.families import load  # noqa: PLC0415

        userimport.check([cat[name].module for name in cat.origins])  # the modules' probes, in parallel
    for name in cat.origins:
        try:
            load(cat[name].module)
        except CudalabError as exc:
            broken.append((name, str(exc)))
    bad = {name for name, _ in broken}
    rows = [(f.name, ", ".join(f.names()), f.description, cat.origin(f.name)) for f in cat.values() if f.name not in bad]
    return rows, broken


@cli.command("list")
@click.argument("family", required=False)
def list_cmd(family: str | None) -> None:
    """List families, or one family's variants with their launch rules."""
    if family is None:  # plain text from the family.toml files: no rich, NumPy or family module (fast)
        from cudalab.cli.plain import echo_table  # noqa: PLC0415

        rows, broken = list_rows(catalog.load_catalog())
        echo_table(LIST_COLUMNS, rows, title=LIST_TITLE, wrap=LIST_WRAP)
        for name, reason in broken:  # the others work; each broken one gets its line, and the exit says so
            click.echo(clean(f"cudalab: broken family {name}: {reason}"), err=True)
        if broken:
            sys.exit(2)
        return
    from cudalab import report  # noqa: PLC0415
    from cudalab.families import load  # noqa: PLC0415

    con = report.console()
    spec = catalog.family(family)
    fam = load(spec.module)  # a broken family is its one line, before any table
    rows = []
    for v in spec.variants:
        if v.kind == "kernel":
            launch = (v.kernel, fmt_dims(v.block), v.grid if not v.tile else "tiles " + " × ".join(v.tile),
                      v.constraints())
        else:
            launch = (f"({v.kind})", "–", "–", "–")
        desc = v.description + (f"  [legacy: {v.legacy}]" if v.legacy else "")
        rows.append((v.name, *launch, desc))
    con.print(report.simple_table(["variant", "kernel", "block", "grid", "constraints", "description"], rows,
                                  title=f"{spec.name}: {spec.description} (dtypes {', '.join(spec.dtypes)})",
                                  wrap=("grid", "constraints", "description")))
    from cudalab.catalog import user  # noqa: PLC0415
    from cudalab.inspect.launches import default_launches  # noqa: PLC0415

    size, launches = default_launches(spec, fam)
    if launches:  # what the rows launch, before any GPU: a grid that covers too much or too little shows here
        con.print(f"Launches at the default size {size}:", markup=False, highlight=False)
        width = max(len(name) for name, _ in launches)
        for name, text in launches:
            con.print(f"  {name.ljust(width)}  {text}", markup=False, highlight=False)
        con.print("")
    con.print(user.describe(spec, fam), markup=False, highlight=False)
    for t in spec.tune:  # the [[tune]] spaces: what 'cudalab tune FAMILY --variant V' searches
        from cudalab.tuning.spaces import make_space  # noqa: PLC0415

        space = make_space(spec, fam, spec.variant(t.variant))
        valid = space.count_valid()
        dims = ", ".join(f"{d.name}={d.text or ','.join(d.values)}" for d in space.dims)
        click.echo(f"tune {t.variant}: {dims}" + (f"; require {'; '.join(space.require)}" if space.require else "")
                   + f" -> {space.size():,} points, {'?' if valid is None else f'{valid:,}'} meet the constraints"
                   + (f" (n {t.n})" if t.n else ""))


@cli.command()
@click.option("--device", "device_index", type=DEVICE_INDEX, default=None, help="Only this GPU (default: all).")
@click.option("--no-bandwidth", is_flag=True, help="Skip the memcpy_dtod roofline measurement.")
@click.option("--mib", type=int, default=1024, show_default=True, help="Buffer size for the roofline copy.")
def info(device_index: int | None, no_bandwidth: bool, mib: int) -> None:
    """Show every GPU (name, compute capability, SMs, memory, L2, clocks, versions, roofline), host
    memory, and per family the largest --n whose memory plan fits."""
    from cudalab import memplan, report
    from cudalab.families import load
    from cudalab.records.device import DeviceInfo
    from cudalab.records.results import Roofline
    from cudalab.execute.local.drive import Session

    # Each GPU is asked by a worker process, as a run would: this process never holds a CUDA context.
    session = Session([device_index if device_index is not None else 0])
    try:
        count = session.count()
        indices = [device_index] if device_index is not None else list(range(count))
        rows = []
        frees = {}
        for i in indices:
            ans = session.ask(i, op="info", mib=mib, bandwidth=not no_bandwidth)
            d = DeviceInfo.from_dict(ans["device"])
            frees[i] = int(ans["free"])
            roof = Roofline.from_dict(ans.get("roofline"))
            bw = "" if no_bandwidth else ans.get("reason") or "–"
            if roof is not None:
                bw = f"{roof.dtod_gbs:,.0f}" + (f" (copy kernel {roof.kernel_gbs:,.0f})" if roof.kernel_gbs else "")
            rows.append((i, d.name, d.arch, d.sm_count, f"{d.total_memory / 2**30:.1f} GiB",
                         f"{d.l2_bytes / 2**20:.0f} MiB", f"{d.sm_clock_mhz} / {d.mem_clock_mhz} MHz",
                         f"{d.peak_bandwidth_gbs:,.0f}", bw, d.driver_release or "–", d.driver_version, d.cuda_version))
    finally:
        session.close()
    report.console().print(report.simple_table(
        ["#", "GPU", "arch", "SMs", "memory", "L2", "SM / mem clock", "peak GB/s", "memcpy_dtod GB/s",
         "driver", "driver API", "CUDA (pycuda)"], rows))
    host = memplan.host_available()
    cat = catalog.load_catalog()
    sizes = []
    for spec in cat.values():
        try:
            fam = load(spec.module)
        except CudalabError:  # an outside family whose module is broken: 'cudalab list' says why
            continue
        opts = {o.name: o.default for o in fam.OPTIONS}
        cells = []
        for i in indices:
            n = memplan.largest_n(fam, spec.default_dtype, opts, frees[i], host)
            cells.append(str(n) if n else "–")
        sizes.append((spec.name, spec.default_dtype, *cells))
    report.console().print(report.simple_table(
        ["family", "dtype", *[f"largest --n, GPU {i} ({frees[i] / 2**30:.1f} GiB free)" for i in indices]], sizes,
        title=f"memory plan: host memory available {host / 2**30:.1f} GiB" if host else "memory plan (host memory unknown)"))


@cli.command("compile")
@click.argument("family")
@click.option("--variant", "variants", default=None, help="Comma list of variants (default: all).")
@click.option("--arch", default=None,
              help="nvcc architecture (a run uses its GPU's; default: the local GPU's, else sm_90); occupancy is for it.")
@click.option("--block", default=None, help="Block dims (default: each variant's own); sets block-derived macros.")
@click.option("--dtype", default=None, help="Element type, for families with several.")
@click.option("--define", "-D", "defines", multiple=True, metavar="NAME=VALUE", help="Override a kernel macro.")
def compile_cmd(family: str, variants: str | None, arch: str, block: str | None, dtype: str | None,
                defines: tuple[str, ...]) -> None:
    """Build a family's kernels as a run does (no GPU needed): registers, shared memory, spills, and the
    theoretical occupancy on --arch with the limit that binds (warps, registers, shared memory, blocks)."""
    from cudalab import build

    with build.terminations():  # SIGTERM/SIGHUP end nvcc and remove its folder, as Ctrl-C does
        _compile_table(family, variants, arch, block, dtype, defines)


def _compile_table(family: str, variants: str | None, arch: str, block: str | None, dtype: str | None,
                   defines: tuple[str, ...]) -> None:
    """The ``compile`` table: each kernel variant built as a run builds it."""
    from cudalab import build, report
    from cudalab.inspect import occupancy, variant
    from cudalab.plan import RunRequest, make_problem, plan_launch
    from cudalab import launch as L
    from cudalab.errors import UsageError
    from cudalab.families import load
    from cudalab.plan import variant_arch as plan_arch

    spec = catalog.family(family)
    fam = load(spec.module)
    problem = make_problem(spec, fam, RunRequest(family=family, dtype=dtype))
    overrides = parse_defines(defines, spec)
    arch = arch or occupancy.default_arch()
    rows = []
    for v in spec.select(variants):
        if v.kind != "kernel":
            continue
        lau = plan_launch(v, fam, problem, block, None, L.DeviceLimits(), overrides)
        try:
            target = plan_arch(v, arch)  # sm_90a for a variant that needs it, as a run builds it
        except UsageError as exc:
            rows.append((v.name, v.kernel, str(exc), "–", "–", "–", "–", "–", "–", "–", "–"))
            continue
        # The build a run of this variant loads; variants sharing a source and defines hit the cache.
        try:
            b = build.build(spec.directory / v.source, dict(lau.defines), target)
        except CudalabError:
            variant.check_arch(target)  # an arch this nvcc cannot build: one line saying which it can
            raise
        r = b.kernel(v.kernel)
        if r is None:
            raise CudalabError(f"{v.source} has no kernel {v.kernel!r} (is it extern \"C\"?)")
        # the launch's own macros (BLOCK_X ... TILE_Z) repeat the block and tile columns' story: left out
        launch_macros = {k for k, _ in user.LAUNCH_DEFINES}
        defs = " ".join(f"{k}={val}" for k, val in lau.defines if k not in launch_macros)
        name = v.name + (f" ({target})" if target != arch else "")
        try:
            occ = occupancy.occupancy(target, L.threads(lau.block), r.registers, r.static_shared + lau.shared)
            occ_cell = occ.cell() if occ else f"– (no limits for {target})"
        except CudalabError as exc:  # the block cannot be resident at all: say which limit
            occ_cell = f"0% ({exc})"
        rows.append((name, v.kernel, defs or "–", r.registers, r.static_shared, lau.shared, r.spill_stores,
                     r.spill_loads, r.stack_frame, occ_cell, "yes" if b.cached else "no"))
    report.console().print(report.simple_table(
        ["variant", "kernel", "defines", "registers", "static smem B", "dynamic smem B", "spill st B",
         "spill ld B", "stack B", "occupancy (limiter)", "cached"], rows, title=f"{spec.name} compiled for {arch}",
        wrap=("defines", "occupancy (limiter)"),
        drop=("cached", "stack B", "spill ld B", "spill st B", "dynamic smem B", "static smem B")))


for _command in (list_cmd, compile_cmd):  # their tables hide columns on a narrow terminal; --wide shows all
    _command.params.append(wide_option("Show every column however narrow the terminal (it folds long lines)."))
