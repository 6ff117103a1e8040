"""The one option set of a family run, shared by the family command, ``ncu`` and ``sanitize``,
and the requests built from it."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import click

from cudalab.bench import Protocol
from cudalab.catalog import FamilySpec
from cudalab.errors import UsageError
from cudalab.families import Family
from cudalab.runner import RunRequest


def problem_options(spec: FamilySpec, fam: Family) -> list[click.Parameter]:
    """What selects variants and sets the problem and launch: every command that runs a family has these."""
    params: list[click.Parameter] = [
        click.Option(["--variant", "variants"], default=None,
                     help=f"Comma list of variants (default: all). One of: {', '.join(spec.names())}."),
        click.Option(["--all", "all_"], is_flag=True, help="Run every variant (the default)."),
        click.Option(["--n"], default=None, help=fam.SIZE_HELP),
        click.Option(["--shape"], default=None, help="Rectangular shape, e.g. 4096x1024."),
        click.Option(["--dtype"], default=None, type=click.Choice(list(spec.dtypes)),
                     help=f"Element type (default {spec.default_dtype})."),
        click.Option(["--block"], default=None,
                     help="Block dims for every variant, e.g. 32x8 (default: each variant's own); "
                          "a comma list is a sweep (--block 128,256,512)."),
        click.Option(["--grid"], default=None, help="Grid dims override (must cover the data)."),
        click.Option(["--define", "-D", "defines"], multiple=True, metavar="NAME=VALUE",
                     help="Override a kernel macro for every variant (repeatable), e.g. -D UNROLL=8."),
        click.Option(["--seed"], type=int, default=None, help="Random seed for the inputs (default: fresh)."),
        click.Option(["--device"], type=click.IntRange(min=0), default=0, show_default=True, help="GPU index."),
    ]
    for opt in fam.OPTIONS:
        if opt.type is bool:
            params.append(click.Option([f"--{opt.name}"], is_flag=True, default=opt.default, help=opt.help))
        else:
            params.append(click.Option([f"--{opt.name}"], type=opt.type, default=opt.default, show_default=True,
                                       help=opt.help))
    return params


def timing_options() -> list[click.Parameter]:
    """How the family command times and what it writes."""
    return [
        click.Option(["--hot"], is_flag=True, help="Do not flush L2 before each sample."),
        click.Option(["--budget"], type=float, default=0.5, show_default=True, help="Seconds of sampling per variant."),
        click.Option(["--min-samples"], type=int, default=10, show_default=True, help="Fewest timed samples."),
        click.Option(["--no-roofline"], is_flag=True, help="Skip the copy roofline measurement."),
        click.Option(["--json", "json_path"], default=None, help="Write everything (raw samples too) to this JSON file."),
        click.Option(["--csv", "csv_path"], default=None, help="Write one row per variant to this CSV file."),
    ]


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


def requests_from(spec: FamilySpec, fam: Family, kw: dict[str, Any]) -> list[RunRequest]:
    """The runs a command line asks for: one per ``--block`` entry (a sweep), else one.

    Raises:
        UsageError: conflicting or malformed options.
    """
    if kw.get("all_") and kw.get("variants"):
        raise UsageError("give --all or --variant, not both")
    if kw.get("budget", 1.0) <= 0 or kw.get("min_samples", 1) < 1:
        raise UsageError("--budget must be positive and --min-samples at least 1")
    blocks = [b.strip() for b in kw["block"].split(",")] if kw.get("block") else [None]
    if kw.get("block") and not all(blocks):
        raise UsageError(f"--block {kw['block']!r} has an empty entry (example: --block 128,256,512)")
    options = tuple((o.name, kw[o.name.replace("-", "_")]) for o in fam.OPTIONS)
    protocol = Protocol(budget_s=kw.get("budget", 0.5), min_samples=kw.get("min_samples", 10),
                        flush_l2=not kw.get("hot", False))
    base = RunRequest(
        family=spec.name, variants=kw["variants"], n=kw["n"], shape=kw["shape"], dtype=kw["dtype"],
        grid=kw["grid"], options=options, protocol=protocol, seed=kw["seed"],
        roofline=not kw.get("no_roofline", False), device=kw["device"],
        keep_outputs=bool(kw.get("show") or kw.get("example")), defines=parse_defines(kw["defines"]),
    )
    return [replace(base, block=b) for b in blocks]
