"""The one option set of a family run, shared by the family command, ``ncu`` and ``sanitize``, and the
typed request it becomes (:func:`run_options`: no click-named dict travels past the command).

Light on purpose (``cudalab --help`` and ``cudalab list`` import it): the run's modules (NumPy among
them) are imported by :func:`requests_from`, when a command runs.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import click

from cudalab.catalog import FamilySpec
from cudalab.errors import UsageError
from cudalab.execute import Workers
from cudalab.session.options import RunOptions, seconds


def parse_defines(items: Any, spec: FamilySpec | None = None) -> tuple[tuple[str, str], ...]:
    """:func:`cudalab.build.defines.parse_defines`, for cli.basic and cli.sass.

    Imported when called, not with this module: ``cudalab --help`` and ``cudalab list`` would load the build
    package (its cache, ptxas and nvcc modules, tempfile, hashlib) for nothing, about 8 ms of the 90 ms ``list``
    takes on a laptop-class CPU and more on the H200 hosts, where ``list`` measured 0.106 s before the layout's
    new commands and 0.146 s after.
    """
    from cudalab.build.defines import parse_defines as parse  # noqa: PLC0415  (start-up time, above)

    return parse(items, spec)

if TYPE_CHECKING:
    from cudalab.families import Family
    from cudalab.plan import RunRequest


#: Every command's click context settings.
CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 110}


class _PositiveSeconds(click.ParamType):
    """A positive, finite number of seconds: ``nan``, ``inf``, 0 and negatives are refused while parsing
    (``float('nan')`` passes every comparison, so a range check alone lets it through to the GPU)."""

    name = "seconds"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        try:  # the one rule (session.options.seconds): tune's and cudalab.tune(...)'s too
            return seconds(value, "")
        except UsageError:
            self.fail(f"{value!r} must be a positive number of seconds, at most a day", param, ctx)


POSITIVE_SECONDS = _PositiveSeconds()


class _DeviceIndex(click.ParamType):
    """A GPU index in ASCII digits: ``int()`` also takes '٣' and ``str.isdigit`` also '²', and the worker
    reads ``--device`` before the parser does, so every reader agrees on one strict form."""

    name = "integer"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        text = str(value)
        if not (text.isascii() and text.isdigit()) or len(text) > 4:
            self.fail(f"{value!r} is not a GPU index (0, 1, 2...)", param, ctx)
        return int(text)


DEVICE_INDEX = _DeviceIndex()


def shape_option(fam: Family) -> click.Option:
    """``--shape`` with the form this family takes (``ROWSxCOLS``, ``MxKxN``), read off its size help;
    hidden for families that take a length only (they refuse it in one line)."""
    import re  # noqa: PLC0415

    form = re.search(r"--shape (\S+)", fam.SIZE_HELP)
    if form is None:
        return click.Option(["--shape"], default=None, hidden=True, help="Not taken by this family: use --n.")
    example = {"ROWSxCOLS": "4096x1024", "MxN": "4096x1024", "MxKxN": "4096x1024x2048"}.get(form.group(1).rstrip(";,"), "")
    return click.Option(["--shape"], default=None, metavar=form.group(1).rstrip(";,"),
                        help=f"The problem's shape{f', e.g. {example}' if example else ''} (a comma list is a sweep).")


def wide_option(text: str = "") -> click.Option:
    """``--wide``: every table column (sample count, step, the family's columns, telemetry); the default
    view fits 100-120 columns. Set for the whole command (:data:`cudalab.report.console.WIDE`), so every
    table the command prints follows it."""

    def set_wide(ctx: click.Context, _param: click.Parameter, value: bool) -> bool:
        ctx.meta["cudalab.wide"] = bool(value)
        # The report package (rich, NumPy) only when --wide is given or it is loaded already (an earlier
        # command in this process may have set it): `cudalab list` prints without it.
        if value or "cudalab.report.console" in sys.modules:
            from cudalab.report.console import WIDE  # noqa: PLC0415

            WIDE.set(bool(value))
        return value

    return click.Option(["--wide"], is_flag=True, callback=set_wide, expose_value=False, is_eager=True,
                        help=text or "Show every column (samples, step, the family's own columns, telemetry); "
                                     "the default view fits 100-120 columns and JSON has everything.")


def problem_options(spec: FamilySpec, fam: Family) -> list[click.Parameter]:
    """What selects variants and sets the problem and launch: every command that runs a family has these."""
    params: list[click.Parameter] = [
        click.Option(["--variant", "variants"], default=None,
                     help=f"Comma list of variants (default: all). One of: {', '.join(spec.names())}."),
        click.Option(["--all", "all_"], is_flag=True, help="Run every variant (the default)."),
        click.Option(["--n"], default=None, help=fam.SIZE_HELP + "; a comma list is a sweep (--n 1k,4k,16k)."),
        shape_option(fam),
        click.Option(["--dtype"], default=None, metavar="|".join(spec.dtypes),
                     help=f"Element type (default {spec.default_dtype}); a comma list is a sweep."),
        click.Option(["--block"], default=None,
                     help="Block dims for every variant, e.g. 32x8 (default: each variant's own); "
                          "a comma list is a sweep (--block 16x16,32x8)."),
        click.Option(["--grid"], default=None, help="Grid dims override (must cover the data)."),
        click.Option(["--define", "-D", "defines"], multiple=True, metavar="NAME=VALUE",
                     help="Override a kernel macro for every variant (repeatable), e.g. -D UNROLL=8; "
                          "-D UNROLL=2,4,8 is a sweep."),
        click.Option(["--add"], multiple=True, metavar="FILE.cu:KERNEL[@KEY=VALUE,...]",
                     help="Run your own kernel beside the variants (repeatable; --variant none: only yours). "
                          "It must take the family's arguments (cudalab list " + spec.name + "). Keys: "
                          "block=32x8, per_thread=1x4, tile=32x32, grid=tiles|sm:K|DIMS, shared=BYTES, name=NAME, "
                          "-DNAME=VALUE; e.g. --add my.cu:k@block=32x8,tile=32x32,-DPAD=1."),
        click.Option(["--seed"], type=click.IntRange(0, 2**64 - 1), default=None,
                     help="Random seed for the inputs, 0 to 2^64-1 (default: fresh)."),
        click.Option(["--device"], type=DEVICE_INDEX, default=0, show_default=True, help="GPU index."),
    ]
    for opt in fam.OPTIONS:
        if opt.type is bool:
            params.append(click.Option([f"--{opt.name}"], is_flag=True, default=opt.default, help=opt.help))
        else:  # read as text: a comma list is a sweep; sweep.axes checks each value's type
            params.append(click.Option([f"--{opt.name}"], default=None, metavar=opt.type.__name__.upper(),
                                       help=f"{opt.help} [default: {opt.default}; a comma list is a sweep]"))
    return params


def timing_options() -> list[click.Parameter]:
    """How the family command times and what it writes."""
    return [
        click.Option(["--hot"], is_flag=True, help="Do not flush L2 before each sample."),
        click.Option(["--budget"], type=POSITIVE_SECONDS, default=0.5, show_default=True,
                     help="Seconds of sampling per variant (a positive number)."),
        click.Option(["--min-samples"], type=click.IntRange(1, 100_000), default=10, show_default=True,
                     help="Fewest timed samples."),
        click.Option(["--no-roofline"], is_flag=True, help="Skip the copy roofline measurement."),
        click.Option(["--exclusive"], is_flag=True,
                     help="Refuse to start while another process computes on the GPU (needs NVML)."),
        click.Option(["--energy"], is_flag=True,
                     help="Measure each GPU row's energy: its launches back to back for a second while NVML's "
                          "energy counter runs (about a second more per row; needs NVML)."),
        # the choices are cudalab.bench.LAUNCH_METHODS, written out: this module stays light (no NumPy)
        click.Option(["--launch"], type=click.Choice(["auto", "batch", "graph", "cupti", "events"]), default="auto",
                     show_default=True,
                     help="How a kernel under 20 µs is timed: cupti = N launches, each timed by its own GPU start "
                          "and end from CUPTI's activity records (the reference; cold: an L2 flush before each, not "
                          "counted; needs cupti-python, else graph and the row says why); graph = CUDA graph replay, "
                          "designed to agree with CUPTI (cold: each launch between two event nodes, an empty "
                          "kernel's windows taken out); batch = N launches between two events (the throughput a "
                          "stream of launches reaches); events = one launch per event pair; auto = cupti where "
                          "cupti-python loads, else graph (docs/timing.md)."),
        click.Option(["--drop-throttled"], is_flag=True,
                     help="Leave samples taken while the GPU was throttled (NVML: SM clock under 75% of nominal, "
                          "or a power/thermal reason) out of the statistics; the row counts them either way."),
        click.Option(["--lock-clocks"], type=click.IntRange(min=1), default=None, metavar="MHZ",
                     help="Lock the SM clock at MHZ during the run and restore it after (needs NVML and "
                          "permission to set clocks; never on a shared GPU)."),
        click.Option(["--json", "json_path"], default=None, help="Write everything (raw samples too) to this JSON file; '-': to stdout, alone (tables to stderr)."),
        click.Option(["--csv", "csv_path"], default=None, help="Write one row per variant to this CSV file."),
        click.Option(["--plot", "plot_path"], default=None,
                     help="Draw the run (bars per variant, the roofline as a line; a sweep as lines) to FILE.png or .svg."),
        click.Option(["--force"], is_flag=True,
                     help="Run even when the memory plan says the GPU's free memory is too small (host memory is never overridden)."),
        click.Option(["--layout"], type=click.Choice(["points", "long"]), default="points", show_default=True,
                     help="A sweep as one table per point, or as one long table with a point column."),
        wide_option(),
        click.Option(["--quiet", "-q"], is_flag=True,
                     help="No progress on stderr (a bar on a terminal, one line per variant otherwise)."),
    ]


def run_options(fam: Family, kw: dict[str, Any]) -> RunOptions:
    """The typed request of a family command's keyword arguments (click's names: ``all_``, ``no_roofline``...).

    Raises:
        UsageError: a malformed ``--add``, or its file missing.

    Where the run goes is :func:`workers_of`'s; render-only options (``--json``, ``--layout``, ``--quiet``,
    ``--ncu``...) stay with the command.
    """
    from cudalab.catalog.user import parse_adds  # noqa: PLC0415  (the build modules: only when a command runs)

    names = [o.name for o in fam.OPTIONS]
    return RunOptions(
        variants=kw.get("variants"), all=bool(kw.get("all_")), n=kw.get("n"), shape=kw.get("shape"),
        dtype=kw.get("dtype"), block=kw.get("block"), grid=kw.get("grid"), add=parse_adds(kw.get("add") or ()),
        defines=tuple(kw.get("defines") or ()), seed=kw.get("seed"), budget=kw.get("budget", 0.5),
        min_samples=kw.get("min_samples", 10), hot=bool(kw.get("hot")), roofline=not kw.get("no_roofline", False),
        energy=bool(kw.get("energy")), drop_throttled=bool(kw.get("drop_throttled")),
        launch=kw.get("launch") or "auto", exclusive=bool(kw.get("exclusive")), lock_clocks=kw.get("lock_clocks"),
        force=bool(kw.get("force")), device=kw.get("device") or 0,
        keep_outputs=bool(kw.get("show") or kw.get("example")),
        options=tuple((n, kw.get(n.replace("-", "_"))) for n in names))


def workers_of(kw: dict[str, Any]) -> Workers:
    """Where a family command's points run (``--device``, ``--devices``, ``--cluster``, ``--timeout``) and how its
    workers start (``--energy``; ``--exclusive`` and ``--lock-clocks`` ask NVML first): read from the command
    line, nothing of the family."""
    return Workers(device=kw.get("device") or 0, devices=kw.get("devices"), cluster=kw.get("cluster"),
                   timeout=kw.get("timeout"), energy=bool(kw.get("energy")),
                   nvml_first=bool(kw.get("exclusive")) or kw.get("lock_clocks") is not None)


def requests_from(spec: FamilySpec, fam: Family, kw: dict[str, Any]) -> list[RunRequest]:
    """The runs a command line asks for (:func:`cudalab.session.run.requests_from`, imported when asked).

    Raises:
        UsageError: conflicting or malformed options, a missing ``--add`` file.
    """
    from cudalab.session.run import requests_from as build  # noqa: PLC0415  (NumPy: only for a run)

    return build(spec, fam, run_options(fam, kw))
