"""Run tables and headers (rich); the JSON and CSV writers live in :mod:`cudalab.files`. An instrument's
columns and legend come from the point (:mod:`cudalab.instruments`)."""

from __future__ import annotations

import shlex
from typing import Any, Iterable, Sequence

from rich.console import Console
from rich.text import Text

from cudalab import instruments as instrument
from cudalab.files import CSV_FIELDS, atomic_write, write_csv, write_json  # noqa: F401  (re-exported)
from cudalab.report.console import WIDE, console  # noqa: F401  (re-exported)
from cudalab.report.grid import Column, Grid, Prose
from cudalab.report.instruments import print_views
from cudalab.report.runtable import (  # noqa: F401  (re-exported: the run table's pieces)
    LEGEND, RATE_HEADER, TELEMETRY_COLUMNS, TableView, _fmt, _ms, draw, gather, point_notes, rate_of, results_table,
    telemetry_cell, telemetry_columns, over_note, pct_cell
)
from cudalab.records.results import Result, Roofline
from cudalab.roofline import pct_column  # noqa: F401  (re-exported: the rule is the roofline's)




def header_lines(device: dict[str, Any] | None, title: str, problem: str, protocol: Any,
                 roofline: Roofline | None, results: Sequence[Result] = ()) -> list[str]:
    """The lines above a table: GPU, clocks, versions, size, dtype, timing protocol, roofline, and
    warnings about what else the GPU was doing.

    Clocks are the ones measured during the samples (NVML, median over the run) where there are
    any; the device's nominal maximum is printed only when nothing was measured, and says so.
    """
    lines = [title]
    if device:
        tele = device.get("telemetry") or {}
        lines.append(device_line(device))
        if tele.get("locked_sm_mhz"):
            lines.append(f"SM clock locked at {tele['locked_sm_mhz']} MHz for this run (--lock-clocks; restored after)")
        if tele.get("throttle"):
            lines.append(f"clock events during the samples: {', '.join(tele['throttle'])} (see the throttle column)")
        if tele.get("note"):
            lines.append(tele["note"])
    lines.append(problem)
    if protocol is not None:
        lines.append(
            f"timing: CUDA events, median of ≥{protocol.min_samples} samples (until IQR/median < "
            f"{protocol.target_rel_iqr:.0%}, the median's 95% CI within ±{getattr(protocol, 'target_rel_ci', 0):.1%}, "
            f"or {protocol.budget_s:g} s), {protocol.warmup} warm-up, "
            f"{'L2 flushed before each sample' if protocol.flush_l2 else 'hot L2 (--hot)'}, each sample enqueued behind a spin kernel"
        )
        # the batch's rows only: a graph's or cupti's N launches are described by their own lines below
        batched = sorted({int(r.extra["batch"]) for r in results
                          if r.extra.get("batch") and r.extra.get("timed_by", "batch") == "batch"})
        if batched:
            ns = "/".join(str(n) for n in batched)
            l2 = (f"L2 flushed before each batch of {ns}, not each launch (launches 2..N find a warm L2)"
                  if protocol.flush_l2 else "hot L2")
            lines.append(f"rows marked batch ×N: kernels under {protocol.batch_below_ms * 1e3:g} µs, timed as N "
                         f"back-to-back launches per event pair (time per launch = batch / N): the throughput a "
                         f"stream of launches reaches, each launch with the gap to the next, not the kernel's own "
                         f"span (docs/timing.md); {l2}")
    graphs = [r for r in results if r.extra.get("timed_by") == "graph"]
    if graphs and protocol is not None:
        how = ("an L2 flush node before each launch; each launch between two event nodes, the same windows of an "
               "empty kernel taken out and its hot time put back" if protocol.flush_l2 else
               "hot L2, the replay / N (a row reset before each launch: event windows as cold)")
        lines.append(f"timed by graph ×N: the N launches of a sample captured once in a CUDA graph and replayed; {how}; "
                     "designed to agree with CUPTI's spans (docs/timing.md); "
                     "−µs = the launch overhead removed (one launch between two events, less the time per launch)")
    if protocol is not None and any(r.extra.get("timed_by") == "cupti" for r in results):
        how = "an L2 flush before each launch, not counted" if protocol.flush_l2 else "hot L2"
        lines.append(f"timed by cupti ×N: N launches a sample, each launch's own GPU start and end from CUPTI's "
                     f"activity records (its kernels, memsets and copies summed; the flushes, the spin and the gaps "
                     f"between launches not counted); {how}")
    fell = [f"{r.variant} ({r.extra['timed_by_note']})" for r in results if r.extra.get("timed_by_note")]
    if fell:
        lines.append("timed by * : " + "; ".join(fell))
    others = sorted({int(p) for r in results for p in (r.extra.get("other_process") or ())})
    if others:
        names = ", ".join(r.variant for r in results if r.extra.get("other_process"))
        lines.append(f"WARNING: another process (pid {', '.join(map(str, others))}) was computing on this GPU "
                     f"while {names} ran: those timings are not trustworthy (rows marked !)")
    hot = [r for r in results if r.extra.get("throttled") and r.stats]
    if hot:
        dropped = any(r.extra.get("throttled_dropped") for r in hot)
        lines.append("throttled = samples taken while NVML saw the GPU held back (SM clock under 75% of nominal, or a "
                     "power/thermal clock event): " + ", ".join(f"{r.variant} {r.extra['throttled']}" for r in hot)
                     + ("; left out of the statistics (--drop-throttled)" if dropped
                        else "; kept in the statistics (--drop-throttled leaves them out)"))
    late = [f"{r.variant} ({r.extra['host_gaps']} of {r.stats.n})" for r in results if r.extra.get("host_gaps") and r.stats]
    if late:
        lines.append(f"note: samples the GPU started before the host had queued the launch, even behind the longest "
                     f"spin, may hold host latency: {', '.join(late)}")
    if roofline:
        lines.append(roofline_line(roofline))
    return lines


def roofline_line(roofline: Roofline) -> str:
    """``roofline 4,108 GB/s = memcpy_dtod (memcpy_dtod 4,108, copy kernel 4,076; read stream 4,565, write stream
    4,612)``: said once per table, or once for a huge saved run (report/saved.py)."""
    kern = f", copy kernel {roofline.kernel_gbs:,.0f}" if roofline.kernel_gbs else ""
    streams = (f"; read stream {roofline.read_gbs:,.0f}, write stream {roofline.write_gbs:,.0f}"
               if roofline.read_gbs and roofline.write_gbs else "; no read/write streams: every row rated as a copy")
    return (f"roofline {roofline.gbs:,.0f} GB/s = {roofline.source} (memcpy_dtod {roofline.dtod_gbs:,.0f}{kern}"
            f"{streams})")


def device_line(device: dict[str, Any]) -> str:
    """One line naming the GPU, its clocks and versions (saved records may lack some facts: '?')."""
    d = {k: ("?" if v is None else v) for k, v in device.items()}
    g = lambda k: d.get(k, "?")  # noqa: E731
    l2 = f"{d['l2_bytes'] / 2**20:.0f}" if isinstance(d.get("l2_bytes"), (int, float)) else "?"
    release = d.get("driver_release") or ""
    tele = device.get("telemetry") or {}
    if tele.get("sm_mhz"):  # what the GPU ran at, not what it could
        clocks = f"SM clock {tele['sm_mhz']} MHz, memory clock {tele.get('mem_mhz', '?')} MHz (measured: median over the samples)"
    else:
        clocks = f"SM clock {g('sm_clock_mhz')} MHz (nominal max), memory clock {g('mem_clock_mhz')} MHz (nominal)"
    return (f"GPU {g('index')}: {g('name')} (sm_{str(g('compute_capability')).replace('.', '')}, "
            f"{g('sm_count')} SMs, {clocks}, "
            f"L2 {l2} MiB) · driver {release}{' ' if release else ''}(CUDA {g('driver_version')} driver API) · "
            f"CUDA {g('cuda_version')} (pycuda build)")


def print_point(con: Console, record: Any, point: Any, extra_columns: Iterable[tuple[str, str]] = (),
                header: bool = True, wide: bool | None = None) -> None:
    """Print one point of a run record: header lines, the table, its legend and notes, then the views its rows
    hold (:func:`print_table`).

    Args:
        con: where to print.
        record: the :class:`cudalab.records.results.RunRecord` (device, incomplete).
        point: the :class:`cudalab.records.results.RunPoint`.
        extra_columns: the family's ``EXTRA_COLUMNS``.
        header: print the GPU and protocol lines too (a live run printed them before it started).
        wide: every column (``--wide``); None: what the command's ``--wide`` set (:data:`WIDE`).
    """
    print_table(con, record, [point], extra_columns, header=header, wide=wide)


def print_table(con: Console, record: Any, points: Sequence[Any], extra_columns: Iterable[tuple[str, str]] = (),
                long: bool = False, header: bool = True, wide: bool | None = None) -> None:
    """Print one run table: a point's (``points`` holds one), or ``long`` one of several points with a point
    column (:func:`print_long`); then the views the points' rows hold (:mod:`cudalab.report.instruments`: ncu's
    hot lines and advice; rows without any print nothing more). In the order they are printed: the lines above
    the table (from the record and its points alone), what the table shows, gathered once
    (:func:`cudalab.report.runtable.gather`: the rows' rates, the instruments' columns and notes), the lines
    below it (its legend, from what was gathered), and the table drawn from it.

    Args:
        header: a point's table: print the GPU and protocol lines too (a live run printed them before it started).
        wide: every column (``--wide``); None: what the command's ``--wide`` set (:data:`WIDE`).
    """
    above = long_lines(record, points) if long else point_lines(record, points[0], header)
    rows = [r for p in points for r in p.results]
    labels = [p.label for p in points for _ in p.results] if long else None
    view = gather(rows, points[0].metric, [i for p in points for i in instrument.of(p)], points=labels)
    wide = WIDE.get() if wide is None else wide
    below = ([LEGEND.get(view.metric, LEGEND["none"]) + " Speedups restart at each point."] if long
             else point_notes(points[0], view, wide))
    table = draw(view, extra_columns, wide)
    if not long:
        # One print a point (rich costs ~0.2 ms a print, which a saved sweep of 1,000 points pays per call);
        # the prose as plain lines where they fit (rich's wrapping of a Text measures it word by word).
        con.print(Prose(above), table, Prose(below))
    else:
        con.print("\n".join(above), markup=False, highlight=False)  # one print: rich costs ~0.2 ms a call
        # crop=False: the grid fits itself to the width; rich's cropping measures every line again, char by char
        con.print(table, crop=False)
        con.print("\n".join(below), markup=False)
        if view.over:
            con.print(view.over, markup=False, highlight=False)
    for p in points:
        print_views(con, p.results)


def point_lines(record: Any, point: Any, header: bool = True) -> list[str]:
    """The lines above a point's table (:func:`header_lines`); without ``header``, only what the run itself
    found (a live run printed the GPU and protocol as it started)."""
    title, line = _point_title(record, point)
    lines = header_lines(record.device, title, line, _protocol(point.protocol), point.roofline, point.results)
    if point.roofline is None and point.roofline_note:  # the rows stand; the % column stays empty
        lines.append(f"roofline unavailable: {point.roofline_note}")
    if point.device is not None and record.device.get("devices"):
        lines[0] += f"  [GPU {point.device}]"
    if not header:
        keep = ("size ", "roofline ", "clock events", "SM clock locked", "rows marked", "WARNING", "throttled = ", "timed by")
        if (record.device.get("telemetry") or {}).get("sm_mhz"):
            keep += ("GPU ",)  # it now names the clocks measured during the samples
        lines = [lines[0]] + [ln for ln in lines[1:] if ln.startswith(keep)]
    return lines


def _point_title(record: Any, point: Any) -> tuple[str, str]:
    """The title and the problem line of one point."""
    title = f"cudalab {point.family}" + (f" --block {point.block}" if point.block else "") + (
        "  [INCOMPLETE: interrupted]" if record.incomplete else "")
    prob = point.problem
    size = "x".join(str(d) for d in prob.get("dims", ()))
    line = f"size {size} · dtype {prob.get('dtype', '')}" + "".join(
        f" · {_option(k, v)}" for k, v in sorted((prob.get("options") or {}).items()) if v is not False)
    return title, line + "".join(f" · -D {k}={v}" for k, v in point.defines)


def _option(name: str, value: Any) -> str:
    """A family option as the user types it: ``--tile 32``, ``--example`` (a flag that is off is not shown: the
    line names the problem, and ``example False`` told the reader nothing)."""
    flag = f"--{name}"
    return flag if value is True else f"{flag} {value}"


def _protocol(saved: dict[str, Any]) -> Any:
    """The saved timing protocol (keys this version does not know are ignored), or None."""
    from dataclasses import fields

    from cudalab.bench import Protocol

    known = {f.name for f in fields(Protocol)}
    return Protocol(**{k: v for k, v in saved.items() if k in known}) if saved else None


def saved_lines(record: Any, source: str) -> list[str]:
    """What a re-rendered record says about itself: file, command, date, machine."""
    import time

    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(record.started)) if record.started else "date unknown"
    m = record.machine
    host = ", ".join(f"{k} {m[k]}" for k in ("hostname", "python", "numpy", "pycuda", "cupy", "kernel_revision")
                     if m.get(k))
    return [f"saved run {source} (schema {record.schema_version}, cudalab {record.cudalab or '?'}, {when})",
            "command: " + (shlex.join(_as_typed(record.command)) or "?")] + ([f"machine: {host}"] if host else [])


def _as_typed(command: Sequence[str]) -> list[str]:
    """Records made before cudalab saved the command as typed hold the path of the console script or of
    ``cudalab/__main__.py`` first: show ``cudalab``."""
    cmd = list(command)
    if cmd and (cmd[0].replace("\\", "/").endswith("cudalab/__main__.py") or cmd[0].rsplit("/", 1)[-1] == "cudalab"):
        cmd[0] = "cudalab"
    return cmd


def markdown_record(record: Any, source: str) -> str:
    """A saved run as GitHub markdown: header lines as text, one table per point."""
    out = [f"### cudalab run `{source}`", ""] + [line + "  " for line in saved_lines(record, source)]
    for point in record.points:
        _, line = _point_title(record, point)
        flag = "  (INCOMPLETE: interrupted)" if record.incomplete else ""
        out += ["", f"#### {point.family} {point.label}{flag}", ""]
        out += [t + "  " for t in header_lines(record.device, "", line, _protocol(point.protocol), point.roofline)[1:]]
        out += ["", markdown_table(point.results, point.metric)]
    return "\n".join(out) + "\n"


def print_long(con: Console, record: Any, extra_columns: Iterable[tuple[str, str]] = (), wide: bool | None = None,
               points: Sequence[Any] | None = None) -> None:
    """Print a sweep as one long table (``--layout long``): a point column, then each point's rows; then each
    point's views (:func:`print_table`).

    Args:
        points: the points of the table (default: all the record's); they share the first one's family, metric
            and timing protocol (:func:`point_groups`).
    """
    print_table(con, record, record.points if points is None else points, extra_columns, long=True, wide=wide)


def long_lines(record: Any, points: Sequence[Any]) -> list[str]:
    """The lines above a long table of ``points``: one header, the roofline once when every point shares it."""
    first = points[0]
    title = f"cudalab {first.family}: {len(points):,} points" + (
        "  [INCOMPLETE: interrupted]" if record.incomplete else "")
    lines = header_lines(record.device, title, "points: size dtype [options] [block] [-D]", _protocol(first.protocol),
                         None)
    roofs = {p.roofline for p in points}
    if len(roofs) == 1 and first.roofline:  # one roofline for every point (a -D sweep): said once
        lines.append(roofline_line(first.roofline))
    elif roofs != {None}:
        lines += [f"{p.label}: roofline {p.roofline.gbs:,.0f} GB/s = {p.roofline.source}" for p in points if p.roofline]
    return lines


def point_groups(points: Sequence[Any]) -> list[list[Any]]:
    """Consecutive points that share their family, metric and timing protocol: what one long table can show
    under one header (a record of several families or protocols is several tables)."""
    groups: list[list[Any]] = []
    for p in points:
        if groups and (p.family, p.metric, p.protocol) == (groups[-1][0].family, groups[-1][0].metric,
                                                           groups[-1][0].protocol):
            groups[-1].append(p)
        else:
            groups.append([p])
    return groups


def simple_table(columns: Sequence[str], rows: Iterable[Sequence[Any]], title: str | None = None,
                 wrap: Sequence[str] = (), drop: Sequence[str] = ()) -> Grid:
    """A plain table for list, compile and info: numeric columns right-aligned; the ``wrap`` columns (default:
    the last) wrap at spaces on a narrow terminal, the others never split; the ``drop`` columns are hidden,
    in that order, where even that does not fit."""
    rows = [[x if isinstance(x, Text) else str(x) for x in r] for r in rows]
    wrap = tuple(wrap) or (columns[-1],)

    def numeric(i: int) -> bool:
        cells = [str(r[i].plain if isinstance(r[i], Text) else r[i]).replace(",", "") for r in rows if i < len(r)]
        return bool(cells) and all(c.replace(".", "", 1).isdigit() or c == "–" for c in cells)

    t = Grid([Column(c, right=numeric(i), wrap=c in wrap, drop=list(drop).index(c) + 1 if c in drop else 0)
              for i, c in enumerate(columns)], title=title)
    for r in rows:
        t.add_row(*r)
    return t


def markdown_table(results: Sequence[Result], metric: str) -> str:
    """The comparison table as GitHub markdown (benchmark records, README)."""
    rate = RATE_HEADER.get(metric, "")
    pct = "% roofline" if metric == "bandwidth" else "% ref"
    tele = telemetry_columns(results)
    head = (["variant", "block", "grid", "median ms", "IQR ms", "n"] + ([rate, pct] if rate else [])
            + [h for _, h in tele] + ["status"])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in results:
        s = r.stats
        row = [r.variant + (" (legacy)" if r.legacy else "") + (" (reference)" if r.kind == "library" else ""),
               r.block or "–", r.grid or "–",
               (_ms(s.median) + (f" ×{r.extra['batch']}" if r.extra.get("batch") else "")) if s else "–",
               _ms(s.iqr) if s else "–",
               str(s.n) if s else "–"]
        if rate:
            cell = pct_cell(r)
            row += [_fmt(rate_of(r, metric), 2 if metric == "rate" else 0), cell if isinstance(cell, str) else cell[0]]
        row += [telemetry_cell(k, r.extra) for k, _ in tele]
        row.append(r.status + (f": {r.reason}" if r.reason else ""))
        lines.append("| " + " | ".join(x.replace("|", "/") for x in row) + " |")
    over = over_note(results)
    return "\n".join(lines + ([f"\n{over}"] if over else []))
