"""The command line. Each command is thin: parse, call, render.

Family commands (``cudalab transpose``...) are not listed here: they are made from the catalog,
one per folder under cuda_src/, with the options of the family's module.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from dataclasses import replace
from typing import Any

import click

from cudalab import __version__, catalog, files, gpu
from cudalab.bench import Protocol
from cudalab.errors import CatalogError, CudalabError, UsageError
from cudalab.families import load
from cudalab.launch import fmt_dims

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 110}


class CudalabGroup(click.Group):
    """A group whose subcommands include one per kernel family, and which turns cudalab's errors
    into one message and an exit code (a traceback only with ``--debug``)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        fixed = super().list_commands(ctx)
        try:
            cat = catalog.load_catalog()
        except CudalabError:  # a bad CUDALAB_SRC: the fixed commands still get help; families say why
            return fixed
        families = [*cat, *(b.name for b in cat.broken)]  # broken ones listed with their reason
        return fixed + sorted(set(families) - set(fixed))

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        cmd = super().get_command(ctx, name)
        if cmd is not None:
            return cmd
        try:
            cat = catalog.load_catalog()
        except CudalabError as exc:  # 'cudalab transpose' with a bad CUDALAB_SRC says what is wrong with it
            return self._unusable(name, exc)
        if name in cat:
            return family_command(cat[name])
        reason = cat.broken_reason(name)
        return self._unusable(name, CatalogError(f"broken family {name}: {reason}")) if reason else None

    @staticmethod
    def _unusable(name: str, error: CudalabError) -> click.Command:
        """A command that only reports ``error`` (one line, exit 2), whatever its arguments."""

        def fail(**_: Any) -> None:
            raise error

        return click.Command(name, callback=fail, add_help_option=False, short_help=str(error),
                             context_settings={"ignore_unknown_options": True, "allow_extra_args": True})

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except CudalabError as exc:
            if ctx.meta.get("cudalab.debug"):
                raise
            click.echo(f"cudalab: {exc}", err=True)
            ctx.exit(exc.exit_code)


@click.group(cls=CudalabGroup, context_settings=CONTEXT)
@click.version_option(__version__, prog_name="cudalab")
@click.option("--debug", is_flag=True, help="Show tracebacks instead of one-line errors.")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """cudalab: compile, launch, verify and time CUDA kernel variants side by side.

    \b
    Examples:
      cudalab list
      cudalab transpose --variant bankopt --n 16384
      cudalab reduce --all
      cudalab compile transpose
    """
    ctx.meta["cudalab.debug"] = debug


def main() -> None:
    """Console-script entry point."""
    cli(prog_name="cudalab")


# --- list, info, compile ------------------------------------------------------------------------

@cli.command("list")
@click.argument("family", required=False)
def list_cmd(family: str | None) -> None:
    """List families, or one family's variants with their launch rules."""
    from cudalab import report

    con = report.console()
    if family is None:
        cat = catalog.load_catalog()
        con.print(report.simple_table(
            ["family", "variants", "description"],
            [(f.name, ", ".join(f.names()), f.description) for f in cat.values()],
            title="cudalab families (cudalab list FAMILY for details)"))
        for b in cat.broken:  # the others work; each broken one gets its line, and the exit says so
            click.echo(f"cudalab: broken family {b.name}: {b.reason}", err=True)
        if cat.broken:
            sys.exit(2)
        return
    spec = catalog.family(family)
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
                                  title=f"{spec.name}: {spec.description} (dtypes {', '.join(spec.dtypes)})"))


@cli.command()
@click.option("--device", "device_index", type=int, default=None, help="Only this GPU (default: all).")
@click.option("--no-bandwidth", is_flag=True, help="Skip the memcpy_dtod roofline measurement.")
@click.option("--mib", type=int, default=1024, show_default=True, help="Buffer size for the roofline copy.")
def info(device_index: int | None, no_bandwidth: bool, mib: int) -> None:
    """Show every GPU: name, compute capability, SMs, memory, L2, clocks, versions and roofline."""
    from cudalab import report, runner

    count = gpu.device_count()
    if count == 0:
        raise CudalabError("no CUDA GPU found")
    indices = [device_index] if device_index is not None else list(range(count))
    rows = []
    for i in indices:
        dev = gpu.Device(i)
        d = dev.info
        bw = ""
        if not no_bandwidth:
            nbytes = min(mib * 2**20, dev.mem_info()[0] // 4)
            roof = runner.measure_roofline(dev, nbytes, Protocol())
            bw = f"{roof.dtod_gbs:,.0f}" + (f" (copy kernel {roof.kernel_gbs:,.0f})" if roof.kernel_gbs else "")
        rows.append((i, d.name, d.arch, d.sm_count, f"{d.total_memory / 2**30:.1f} GiB",
                     f"{d.l2_bytes / 2**20:.0f} MiB", f"{d.sm_clock_mhz} / {d.mem_clock_mhz} MHz",
                     f"{d.peak_bandwidth_gbs:,.0f}", bw, d.driver_release or "–", d.driver_version, d.cuda_version))
        dev.close()
    report.console().print(report.simple_table(
        ["#", "GPU", "arch", "SMs", "memory", "L2", "SM / mem clock", "peak GB/s", "memcpy_dtod GB/s",
         "driver", "driver API", "CUDA (pycuda)"], rows))


@cli.command("compile")
@click.argument("family")
@click.option("--variant", "variants", default=None, help="Comma list of variants (default: all).")
@click.option("--arch", default="sm_90", show_default=True, help="nvcc architecture.")
@click.option("--block", default=None, help="Block dims (default: each variant's own); sets block-derived macros.")
@click.option("--dtype", default=None, help="Element type, for families with several.")
@click.option("--define", "-D", "defines", multiple=True, metavar="NAME=VALUE", help="Override a kernel macro.")
def compile_cmd(family: str, variants: str | None, arch: str, block: str | None, dtype: str | None,
                defines: tuple[str, ...]) -> None:
    """Compile a family's kernels with nvcc (no GPU needed): registers, shared memory, spills."""
    from cudalab import launch as L
    from cudalab import nvcc, report, runner

    spec = catalog.family(family)
    module = load(spec.module)
    problem = runner.make_problem(spec, module, runner.RunRequest(family=family, dtype=dtype))
    overrides = parse_defines(defines)
    rows = []
    compiled: dict[tuple, dict] = {}  # variants that share a source and its defines compile once
    for v in spec.select(variants):
        if v.kind != "kernel":
            continue
        lau = runner.plan_launch(v, module, problem, block, None, L.DeviceLimits(), overrides)
        key = (v.source, tuple(sorted(lau.defines)))
        if key not in compiled:
            compiled[key] = {r.kernel: r for r in nvcc.compile_resources(spec.directory / v.source,
                                                                         dict(lau.defines), arch)}
        r = compiled[key].get(v.kernel)
        if r is None:
            raise CudalabError(f"{v.source} has no kernel {v.kernel!r} (is it extern \"C\"?)")
        defs = " ".join(f"{k}={val}" for k, val in lau.defines)
        rows.append((v.name, v.kernel, defs or "–", r.registers, r.static_shared, lau.shared, r.spill_stores,
                     r.spill_loads, r.stack_frame))
    report.console().print(report.simple_table(
        ["variant", "kernel", "defines", "registers", "static smem B", "dynamic smem B", "spill st B",
         "spill ld B", "stack B"], rows, title=f"{spec.name} compiled for {arch}"))


# --- family commands --------------------------------------------------------------------------------

def family_command(spec: catalog.FamilySpec) -> click.Command:
    """Build ``cudalab <family>`` from the family's spec and module options."""
    module = load(spec.module)

    def callback(**kw: Any) -> None:
        run_family(spec, module, kw)

    params: list[click.Parameter] = [
        click.Option(["--variant", "variants"], default=None,
                     help=f"Comma list of variants (default: all). One of: {', '.join(spec.names())}."),
        click.Option(["--all", "all_"], is_flag=True, help="Run every variant (the default)."),
        click.Option(["--n"], default=None, help=getattr(module, "SIZE_HELP", "problem size (16k, 1M, 2^24)")),
        click.Option(["--shape"], default=None, help="Rectangular shape, e.g. 4096x1024."),
        click.Option(["--dtype"], default=None, type=click.Choice(list(spec.dtypes)),
                     help=f"Element type (default {spec.default_dtype})."),
        click.Option(["--block"], default=None, help="Block dims for every variant, e.g. 32x8 (default: each variant's own)."),
        click.Option(["--grid"], default=None, help="Grid dims override (must cover the data)."),
        click.Option(["--define", "-D", "defines"], multiple=True, metavar="NAME=VALUE",
                     help="Override a kernel macro for every variant (repeatable), e.g. -D UNROLL=8."),
        click.Option(["--hot"], is_flag=True, help="Do not flush L2 before each sample."),
        click.Option(["--budget"], type=float, default=0.5, show_default=True, help="Seconds of sampling per variant."),
        click.Option(["--min-samples"], type=int, default=10, show_default=True, help="Fewest timed samples."),
        click.Option(["--seed"], type=int, default=None, help="Random seed for the inputs (default: fresh)."),
        click.Option(["--no-roofline"], is_flag=True, help="Skip the copy roofline measurement."),
        click.Option(["--json", "json_path"], default=None, help="Write everything (raw samples too) to this JSON file."),
        click.Option(["--csv", "csv_path"], default=None, help="Write one row per variant to this CSV file."),
        click.Option(["--device"], type=click.IntRange(min=0), default=0, show_default=True, help="GPU index."),
        click.Option(["--ncu", "ncu_"], is_flag=True,
                     help="Add Nsight Compute columns (wavefronts/request, bank conflicts, ncu ms): one ncu run per variant after timing."),
        click.Option(["--profile-run"], is_flag=True, hidden=True,
                     help="Under ncu: one warm-up and one verified launch per variant, no timing."),
    ]
    if hasattr(module, "show"):
        params.append(click.Option(["--show"], is_flag=True, help="Print the inputs and each variant's result (small problems)."))
    for opt in getattr(module, "OPTIONS", ()):
        if opt.type is bool:
            params.append(click.Option([f"--{opt.name}"], is_flag=True, default=opt.default, help=opt.help))
        else:
            params.append(click.Option([f"--{opt.name}"], type=opt.type, default=opt.default, show_default=True,
                                       help=opt.help))
    return click.Command(spec.name, callback=callback, params=params, context_settings=CONTEXT,
                         help=f"{spec.description}.\n\nVariants: {', '.join(spec.names())}.",
                         short_help=spec.description)


def parse_defines(items: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """Parse repeated ``NAME=VALUE`` options.

    Raises:
        UsageError: an item is not NAME=VALUE with a C identifier for NAME.
    """
    import re

    out = []
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not re.fullmatch(r"[A-Za-z_]\w*", name) or not value:
            raise UsageError(f"--define {item!r} must be NAME=VALUE (example: -D UNROLL=8)")
        out.append((name, value))
    return tuple(out)


def run_family(spec: catalog.FamilySpec, module: Any, kw: dict[str, Any]) -> None:
    """Run one family command: precheck on the CPU, open the GPU, run, render, export.

    ``--block 128,256,512`` is a block-size sweep: one run and one table per block.
    """
    from cudalab import report, runner

    if kw["all_"] and kw["variants"]:
        raise UsageError("give --all or --variant, not both")
    if kw["budget"] <= 0 or kw["min_samples"] < 1:
        raise UsageError("--budget must be positive and --min-samples at least 1")
    for opt in ("json", "csv"):  # refused now, not after minutes of measuring
        if kw[f"{opt}_path"] is not None:
            files.check_output_path(kw[f"{opt}_path"], f"--{opt}")
    blocks = [b.strip() for b in kw["block"].split(",")] if kw["block"] else [None]
    if kw["block"] and not all(blocks):
        raise UsageError(f"--block {kw['block']!r} has an empty entry (example: --block 128,256,512)")
    options = tuple((o.name, kw[o.name.replace("-", "_")]) for o in getattr(module, "OPTIONS", ()))
    protocol = Protocol(budget_s=kw["budget"], min_samples=kw["min_samples"], flush_l2=not kw["hot"])
    base = runner.RunRequest(
        family=spec.name, variants=kw["variants"], n=kw["n"], shape=kw["shape"], dtype=kw["dtype"],
        grid=kw["grid"], options=options, protocol=protocol, seed=kw["seed"],
        roofline=not kw["no_roofline"], device=kw["device"], profile=kw["profile_run"],
        keep_outputs=bool(kw.get("show")), defines=parse_defines(kw["defines"]),
    )
    requests = [replace(base, block=b) for b in blocks]
    for req in requests:
        runner.precheck(req)  # everything that can be refused without a GPU, before opening one
    dev = gpu.Device(kw["device"])
    err = report.console(stderr=True)

    def progress(r: runner.Result) -> None:
        t = f"{r.median_ms:.4f} ms" if r.median_ms is not None else ""
        err.print(f"  {spec.name}/{r.variant}: {r.status} {t} {r.reason}".rstrip(), markup=False)

    runs: list[runner.FamilyRun] = []
    incomplete = False
    started = time.time()
    # A batch system's SIGTERM is handled like Ctrl-C: the rows measured so far are kept.
    previous = signal.signal(signal.SIGTERM, _interrupt) if threading.current_thread() is threading.main_thread() else None
    try:
        for req in requests:
            runs.append(runner.FamilyRun(req, dev, on_result=progress))
            runs[-1].run()
    except KeyboardInterrupt:
        incomplete = True
        err.print("interrupted: keeping the rows measured so far (marked incomplete)")
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        info = dev.info
        try:
            dev.close()
        except Exception:  # after a sticky GPU error closing can fail too; the rows matter more
            pass
    payloads = [render_run(spec, module, kw, run, info.to_dict(), incomplete) for run in runs]
    payload = dict(payloads[0], started=started) if len(payloads) == 1 else {
        "cudalab": __version__, "command": sys.argv, "started": started, "incomplete": incomplete,
        "family": spec.name, "device": info.to_dict(), "sweep": payloads}
    if kw["json_path"]:
        report.write_json(kw["json_path"], payload)
    everything = [r for run in runs for r in run.results]
    if kw["csv_path"]:
        report.write_csv(kw["csv_path"], everything)
    if incomplete:
        sys.exit(130)
    if any(r.status in (runner.INCORRECT, runner.FAILED) for r in everything):
        sys.exit(1)
    if everything and all(r.status == runner.SKIPPED for r in everything):
        raise UsageError(everything[0].reason)


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def render_run(spec: catalog.FamilySpec, module: Any, kw: dict[str, Any], run: Any, device: dict,
               incomplete: bool) -> dict[str, Any]:
    """Print one run's header, table and notes; return its JSON payload."""
    from cudalab import report

    req = run.req
    results = report.pct_column(run.results, spec.metric)
    ncu_cols, ncu_rep = (), None
    if kw["ncu_"] and not req.profile and not incomplete:
        from cudalab import ncu

        ncu_cols, per, ncu_rep = ncu.profile_columns(spec.name, kw["variants"], dict(kw, block=req.block), module)
        results = [replace(r, extra={**r.extra, **per.get(r.variant, {})}) for r in results]
    con = report.console()
    title = f"cudalab {spec.name}" + (f" --block {req.block}" if req.block else "") + (
        "  [INCOMPLETE: interrupted]" if incomplete else "")
    prob = run.problem
    for line in report.header_lines(device, title, f"size {prob.label} · dtype {prob.dtype}"
                                    + "".join(f" · {k} {v}" for k, v in prob.options),
                                    None if req.profile else req.protocol, run.roofline):
        con.print(line, markup=False, highlight=False)
    if not req.profile:
        con.print(report.results_table(results, spec.metric, getattr(module, "EXTRA_COLUMNS", ()), ncu_cols))
        con.print(report.LEGEND.get(spec.metric, report.LEGEND["none"]), markup=False)
    if ncu_rep is not None:
        for line in ncu.SMEM_EXPLAIN if ncu_rep.metric_set.name != "memory" else ncu.MEMORY_EXPLAIN:
            con.print(line, markup=False)
    if any(r.legacy for r in results):
        con.print("[legacy] faithful textbook code that is undefined on current GPUs (see `cudalab list "
                  f"{spec.name}`); its correct twin runs beside it.", markup=False)
    if run.outputs and hasattr(module, "show"):
        con.print(module.show(prob, run.inputs, None), markup=False)
        for name, out in run.outputs.items():
            con.print(f"--- {name}", markup=False)
            con.print(module.show(prob, {}, out), markup=False)
    return {
        "cudalab": __version__, "command": sys.argv, "incomplete": incomplete, "family": spec.name,
        "device": device, "problem": prob.to_dict(), "block": req.block, "protocol": req.protocol.__dict__,
        "roofline": run.roofline.__dict__ if run.roofline else None,
        "results": [r.to_dict() for r in results],
    }


# --- ncu (Nsight Compute) ---------------------------------------------------------------------------

@cli.command("ncu", context_settings=dict(CONTEXT, ignore_unknown_options=True, allow_extra_args=True))
@click.argument("target")
@click.option("--variant", "variants", default=None, help="Comma list of variants (default: all).")
@click.option("--n", default=None, help="Problem size, as for the family command.")
@click.option("--shape", default=None, help="Rectangular shape, as for the family command.")
@click.option("--block", default=None, help="Block dims for every variant, e.g. 32x8.")
@click.option("--dtype", default=None, help="Element type.")
@click.option("--grid", default=None, help="Grid dims override.")
@click.option("--seed", type=int, default=None, help="Random seed for the inputs.")
@click.option("--device", type=int, default=None, help="GPU index.")
@click.option("--metrics", default=None,
              help="smem | memory | time | a comma list of ncu metric names (default: smem for families that "
                   "declare expected bank conflicts, memory otherwise).")
@click.option("--import", "import_path", default=None,
              help="Render a saved ncu CSV (or .ncu-rep, needs ncu but no GPU) instead of profiling.")
@click.option("--export", "export_path", default=None,
              help="Keep the raw result: FILE.csv (CSV per variant) or FILE.ncu-rep (ncu's reports).")
@click.option("--strict", is_flag=True, help="Exit 1 when a measured wavefronts/request misses its expectation.")
@click.pass_context
def ncu_cmd(ctx: click.Context, target: str, variants: str | None, n: str | None, shape: str | None,
            block: str | None, dtype: str | None, grid: str | None, seed: int | None, device: int | None,
            metrics: str | None, import_path: str | None, export_path: str | None, strict: bool) -> None:
    """Profile a family's kernels with Nsight Compute: one ncu run per variant, its verified launch.

    Options the family command has (--ipad, --blocks...) are passed on to it.

    \b
    Examples:
      cudalab ncu smem-square
      cudalab ncu smem-rect --ipad 1
      cudalab ncu transpose --variant block,bankopt --n 4096
      cudalab ncu copy --metrics memory --export copy.csv
      cudalab ncu transpose --import transpose.csv
    """
    from cudalab import ncu, report

    args = ncu.run_args(n, shape, block, dtype, grid, seed, device, ctx.args)
    if import_path and export_path:
        raise UsageError("give --import or --export, not both")
    if export_path is not None:
        files.check_output_path(export_path, "--export")
    if import_path:
        rep = ncu.load_import(import_path, target, variants, args, metrics)
    else:
        rep = ncu.profile(target, variants, args, metrics, export_path)
    report.print_ncu(ncu.build_table(rep), rep.problem)
    if any(r.status == ncu.INCORRECT for r in rep.rows):
        sys.exit(1)
    if strict and rep.failed_expectations():
        click.echo(f"cudalab: expectation missed: {', '.join(rep.failed_expectations())}", err=True)
        sys.exit(1)



# --- sanitize (compute-sanitizer) ------------------------------------------------------------------

@cli.command("sanitize")
@click.argument("family")
@click.option("--variant", "variants", default=None, help="Comma list of variants (default: every kernel variant).")
@click.option("--tool", type=click.Choice(["memcheck", "racecheck", "synccheck", "initcheck", "all"]),
              default="all", show_default=True, help="compute-sanitizer tool.")
@click.option("--n", "sizes", multiple=True,
              help="Size to run at (repeatable; default: the family's SANITIZE_SIZES, else 64 and 33).")
@click.option("--log", "log_dir", default=None, type=click.Path(file_okay=False),
              help="Write the sanitizer's raw output of each run to this folder.")
@click.option("--json", "json_path", default=None, help="Write the rows to this JSON file.")
@click.option("--print-limit", type=click.IntRange(min=1), default=20, show_default=True,
              help="Reports the sanitizer prints per run.")
@click.option("--timeout", "timeout_s", type=click.FloatRange(min=0, min_open=True), default=600.0,
              show_default=True, help="Seconds one run may take.")
def sanitize_cmd(family: str, variants: str | None, tool: str, sizes: tuple[str, ...], log_dir: str | None,
                 json_path: str | None, print_limit: int, timeout_s: float) -> None:
    """Run each kernel variant under compute-sanitizer at small sizes (one a multiple of the tile,
    one not): out-of-bounds accesses, shared-memory races, barrier misuse, uninitialised reads.

    Exits 1 when a variant that is not marked legacy has a finding (or its run failed).
    """
    from cudalab import report
    from cudalab import sanitize as S

    tools = S.tools_for(tool)
    if json_path is not None:
        files.check_output_path(json_path, "--json")
    if log_dir is not None:
        files.check_output_dir(log_dir, "--log")
    err = report.console(stderr=True)

    done: list = []

    def progress(r) -> None:
        done.append(r)
        what = f"{r.findings} error(s)" if r.status == S.FINDINGS else r.reason if r.status != S.CLEAN else ""
        err.print(f"  {family}/{r.variant} {r.tool} {r.size}: {r.status} {what}".rstrip(), markup=False)

    interrupted = False
    try:
        rows = S.sanitize(family, variants, tools, sizes or None, log_dir, print_limit, timeout_s, on_row=progress)
    except KeyboardInterrupt:  # subprocess.run has killed the child; keep the rows judged so far
        interrupted, rows = True, done
        err.print("interrupted: showing the runs finished so far", markup=False)
    con = report.console()
    con.print(report.sanitize_table(rows, title=f"cudalab sanitize {family} ({', '.join(tools)})"
                                    + ("  [INCOMPLETE: interrupted]" if interrupted else "")))
    if any(r.legacy for r in rows):
        con.print("legacy rows are faithful textbook code, undefined on current GPUs: their findings are "
                  "shown, not counted (see `cudalab list " + family + "`).", markup=False)
    for v in S.never_ran(rows):
        err.print(f"warning: {v} was skipped at every size, so the sanitizer never ran it; give sizes it "
                  "accepts with --n (or SANITIZE_SIZES in the family module)", markup=False)
    if log_dir:
        con.print(f"raw sanitizer output: {log_dir}/", markup=False)
    if json_path:
        report.write_json(json_path, {"cudalab": __version__, "family": family, "tools": list(tools),
                                      "incomplete": interrupted, "rows": [r.to_dict() for r in rows]})
    if interrupted:
        sys.exit(130)
    bad = S.failing(rows)
    if bad:
        con.print(f"{len(bad)} run(s) of non-legacy variants with findings or failures", markup=False)
        sys.exit(1)
