"""``cudalab sass``: the machine code of one or two variants, with their CUDA lines, instruction classes,
resources and occupancy side by side (no GPU: the build cache or nvcc, and nvdisasm)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from cudalab import catalog
from cudalab.cli.app import cli
from cudalab.cli.options import parse_defines
from cudalab.catalog.user import LAUNCH_DEFINES
from cudalab.errors import UsageError

#: The launch's own macros (BLOCK_X ... TILE_Z): the header's block says them, as cudalab compile leaves them out.
LAUNCH_MACROS = {k for k, _ in LAUNCH_DEFINES}


def _line_option(value: str | None) -> tuple[str | None, int] | None:
    """``--source-line 52`` or ``transpose.cu:52`` -> (file or None, line)."""
    if value is None:
        return None
    file, _, num = value.rpartition(":")
    if not num.isdigit() or int(num) < 1:
        raise UsageError(f"--source-line {value!r}: give a line number (52) or FILE:LINE (sgemm.cuh:40)")
    return (file or None), int(num)


def _listing(code: Any, only: tuple[str | None, int] | None) -> list[str]:
    """The listing as text lines: each CUDA source line (file:line and its text) before its instructions."""
    from cudalab.inspect import sass  # noqa: PLC0415

    insns = code.code if only is None else sass.at_line(code.code, only[1], only[0] or None)
    texts: dict[str, list[str]] = {}
    out, last = [], None
    for i in insns:
        here = (i.file, i.line)
        if here != last and i.line:
            if i.file not in texts:
                try:
                    texts[i.file] = Path(i.file).read_text(errors="replace").splitlines()
                except OSError:
                    texts[i.file] = []
            src = texts[i.file][i.line - 1].strip() if 0 < i.line <= len(texts[i.file]) else ""
            out.append(f"{Path(i.file).name}:{i.line}  {src}")
        last = here
        out.append(f"    {i.offset:04x}  {i.text}")
    return out


def _timed(path: str, family: str, names: list[str]) -> dict[str, tuple[str, str]]:
    """Each named variant's median time and rate in a saved run of ``family`` (its first point that has it).

    Raises:
        UsageError: the file is no run, or a run of another family.
    """
    from cudalab.records.results import PASSED, load_record  # noqa: PLC0415

    record = load_record(path)
    points = [p for p in record.points if p.family == family]
    if not points:
        other = ", ".join(sorted({p.family for p in record.points})) or "no family"
        raise UsageError(f"--run {path} is a run of {other}, not {family}")
    out = {}
    for name in names:
        for p in points:
            r = next((r for r in p.results if r.variant == name and r.status == PASSED and r.median_ms), None)
            if r is not None:
                rate = f"{r.gbs:,.0f} GB/s" if r.gbs else f"{r.gflops:,.0f} GFLOP/s" if r.gflops else "–"
                out[name] = (f"{r.median_ms:.4f}", rate + (f" ({p.label})" if len(points) > 1 else ""))
                break
    return out


@cli.command("sass")
@click.argument("family")
@click.option("--variant", "variants", required=True, metavar="A[,B]", help="One variant, or two to compare.")
@click.option("--arch", default=None, help="nvcc architecture (default: the local GPU's, else sm_90).")
@click.option("--block", default=None, help="Block dims (default: each variant's own); sets block-derived macros.")
@click.option("--dtype", default=None, help="Element type, for families with several.")
@click.option("--define", "-D", "defines", multiple=True, metavar="NAME=VALUE", help="Override a kernel macro.")
@click.option("--source-line", "source_line", default=None, metavar="[FILE:]N",
              help="Only the instructions of this CUDA source line (of the variant's .cu, or FILE's).")
@click.option("--run", "run_file", default=None, metavar="FILE", help="A saved run of this family: each variant's time.")
@click.option("--listing/--no-listing", default=True, show_default=True, help="Print the SASS listings.")
@click.option("--diff", "show_diff", is_flag=True, help="With two variants: the listings' diff, registers renamed.")
def sass_cmd(family: str, variants: str, arch: str | None, block: str | None, dtype: str | None,
             defines: tuple[str, ...], source_line: str | None, run_file: str | None, listing: bool,
             show_diff: bool) -> None:
    """Show the machine code of a variant, or of two side by side (no GPU needed).

    Per variant: the SASS with each CUDA source line above its instructions, then a table of instruction
    classes (FFMA, HMMA, GMMA, LDG/STG, LDS/STS, LDGSTS, TMA, BAR, branches, conversions), registers,
    spills, shared memory and theoretical occupancy; with two variants, their differences. Register
    numbers do not count as a difference.

    \b
    Examples:
      cudalab sass transpose --variant block,bankopt
      cudalab sass matmul --variant tiled,regblock --no-listing --run matmul.json
      cudalab sass transpose --variant bankopt --source-line 55
    """
    from cudalab import report  # noqa: PLC0415
    from cudalab.plan import RunRequest, make_problem, plan_launch  # noqa: PLC0415
    from cudalab import launch as L  # noqa: PLC0415
    from cudalab.families import load  # noqa: PLC0415
    from cudalab.inspect import occupancy, sass, variant  # noqa: PLC0415
    from cudalab.plan import variant_arch  # noqa: PLC0415

    only = _line_option(source_line)
    spec = catalog.family(family)
    chosen = spec.select(variants)
    if len(chosen) > 2:
        raise UsageError(f"--variant {variants!r}: give one variant or two to compare")
    for v in chosen:
        if v.kind != "kernel":
            raise UsageError(f"{family} {v.name} is a {v.kind} row: it has no kernel of cudalab's to show")
    arch = arch or occupancy.default_arch()
    timed = _timed(run_file, spec.name, [v.name for v in chosen]) if run_file else {}
    fam = load(spec.module)
    problem = make_problem(spec, fam, RunRequest(family=family, dtype=dtype))
    overrides = parse_defines(defines, spec)
    launches = [plan_launch(v, fam, problem, block, None, L.DeviceLimits(), overrides) for v in chosen]
    codes = variant.load(chosen, launches, spec.directory, [variant_arch(v, arch) for v in chosen])

    if listing or only:
        for c in codes:
            defs = " ".join(f"{k}={val}" for k, val in c.defines if k not in LAUNCH_MACROS)  # the block says them
            click.echo(f"── {c.name}: {c.kernel}{f' ({defs})' if defs else ''}, {c.arch}, block {L.fmt_dims(c.block)}"
                       + (f", line {only[1]}" if only else "") + " ──")
            lines = _listing(c, only)
            click.echo("\n".join(lines) if lines else "    (no instructions from that line)")
            click.echo()

    picked = [c.code if only is None else sass.at_line(c.code, only[1], only[0]) for c in codes]
    hists = [sass.histogram(p) for p in picked]
    rows: list[tuple[Any, ...]] = []
    two = len(codes) == 2

    def row(name: str, values: list[Any]) -> None:
        cells = ["–" if x is None else x for x in values]
        if two:
            a, b = values
            delta = (f"{b - a:+d}" if b != a else "") if isinstance(a, int) and isinstance(b, int) else (
                "differs" if a != b else "")
            cells.append(delta)
        rows.append((name, *cells))

    for k in sass.CLASSES:
        if any(h[k] for h in hists):
            row(k, [h[k] for h in hists])
    row("instructions" if only is None else f"instructions of line {only[1]}", [len(p) for p in picked])
    if only is None:
        for key in ("registers", "spill stores B", "spill loads B", "static smem B", "dynamic smem B", "threads",
                    "occupancy %", "blocks / SM", "limiter"):
            row(key, [c.resources()[key] for c in codes])
    if run_file:
        row("median ms (--run)", [timed.get(c.name, ("–",))[0] for c in codes])
        row("rate (--run)", [timed.get(c.name, ("", "–"))[1] for c in codes])
    cols = ["", *[c.name for c in codes]] + (["B − A"] if two else [])
    report.console().print(report.simple_table(cols, rows, title=f"{spec.name} on {arch}: instruction classes "
                                               "and resources" + (f" (line {only[1]})" if only else "")))
    if two:
        diff = sass.listing_diff(picked[0], picked[1], (codes[0].name, codes[1].name))
        changed = sum(1 for d in diff if d[:1] in "+-" and not d.startswith(("+++", "---")))
        click.echo(f"listings: {'identical up to register numbering' if not diff else f'{changed} lines differ'}"
                   " (registers, predicates and labels renumbered before comparing"
                   + ("" if show_diff or not diff else "; --diff shows them") + ")")
        if show_diff and diff:
            click.echo("\n".join(diff))
