"""The run table: one row per variant (time, rate, % of roofline, speedups, check, status).

The default view fits 100 to 120 columns: variant, block, grid, median, ± IQR, the rate, % roofline,
speedup, check and status (and the ncu columns a ``--ncu`` run asked for); ``--wide`` adds the sample
count, step, the family's own columns and the telemetry. Every figure is in the JSON either way. It
is drawn by :class:`cudalab.report.grid.Grid`: numbers and names never split, reasons wrap as text.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from cudalab.instruments import Column as InstrumentColumn
from cudalab.instruments import Instrument, columns_of, notes_of
from cudalab.instruments import fmt as _fmt
from cudalab.report.grid import Column, Grid
from cudalab.records.results import FAILED, INCORRECT, OVER_ROOFLINE, PASSED, SKIPPED, TIMEOUT, Result
from cudalab.roofline import rate_of

_STATUS_STYLE = {PASSED: "green", INCORRECT: "bold red", FAILED: "red", TIMEOUT: "red", SKIPPED: "yellow"}
#: Hidden first when even the wrapped default view is wider than the terminal (1 first).
_DROP = {"± IQR": 1, "grid": 2, "block": 3, "speedup": 4, "check": 5}
_LEFT = ("point", "#", "variant", "block", "grid", "status", "check")


def _ms(x: float) -> str:
    if 0 < x < 0.01:  # batched kernels of a few µs: keep 10 ns steps
        return f"{x:.5f}"
    return f"{x:.4f}" if x < 1 else f"{x:.3f}" if x < 100 else f"{x:,.1f}"


@dataclass(frozen=True)
class TableView:
    """What a run table shows, gathered once before it is drawn (:func:`draw`): nothing below the table's
    drawing is asked for again.

    Attributes:
        rows: the table's rows, in the order they ran.
        metric: the family's metric (``bandwidth``, ``flops``, ``rate``, ``none``).
        rates: each row's figure for the metric (:func:`cudalab.roofline.rate_of`).
        over: the legend line of the rows above their roofline (:func:`over_note`), or None.
        instrument_columns: instruments' columns (``--ncu``), shown in the default view too.
        instrument_notes: what the instruments say under a table of these rows (:func:`cudalab.instruments.notes_of`).
        points: one point label per row (``--layout long``: a point column); None: none.
    """

    rows: tuple[Result, ...]
    metric: str
    rates: tuple[float | None, ...]
    over: str | None = None
    instrument_columns: tuple[InstrumentColumn, ...] = ()
    instrument_notes: tuple[str, ...] = ()
    points: tuple[str, ...] | None = None


def gather(rows: Sequence[Result], metric: str, instruments: Sequence[Instrument] = (),
           columns: Iterable[InstrumentColumn] | None = None, points: Sequence[str] | None = None) -> TableView:
    """A table's :class:`TableView`.

    Args:
        instruments: the instruments of the rows' points (:func:`cudalab.instruments.of`).
        columns: the instruments' columns to show; None: those of ``instruments`` some row has a figure for.
        points: one point label per row (``--layout long``).
    """
    rows = tuple(rows)
    over = over_note(rows)
    rates = tuple(rate_of(r, metric) for r in rows)
    if columns is None:
        columns = columns_of(instruments, rows)
    return TableView(rows, metric, rates, over, tuple(columns), tuple(notes_of(instruments, rows)),
                     None if points is None else tuple(points))


def results_table(results: Sequence[Result], metric: str, extra_columns: Iterable[tuple[str, str]] = (),
                  instrument_columns: Iterable[InstrumentColumn] = (), points: Sequence[str] | None = None,
                  wide: bool = True) -> Grid:
    """The comparison table of ``results`` (:func:`gather`, then :func:`draw`).

    Args:
        instrument_columns: instruments' columns (``--ncu``: :func:`cudalab.instruments.columns_of`), shown
            in the default view too.
        points: one label per row (``--layout long``): a point column.
        wide: as :func:`draw`.
    """
    return draw(gather(results, metric, columns=instrument_columns, points=points), extra_columns, wide)


def draw(view: TableView, extra_columns: Iterable[tuple[str, str]] = (), wide: bool = True) -> Grid:
    """The comparison table: one row per variant, in the order they ran.

    Speedup is over the first GPU variant that passed; 'step' over the previous GPU row that passed.
    A point column (``view.points``) restarts the speedups at each point.

    Args:
        extra_columns: the family's own columns (its ``EXTRA_COLUMNS``), shown with ``wide``.
        wide: every column (sample count, step, the family's columns, telemetry); False: the default
            view (what :func:`cudalab.report.print_point` shows without ``--wide``).
    """
    results, metric, points = view.rows, view.metric, view.points
    extra_columns = list(extra_columns) if wide else []
    inst_columns = view.instrument_columns
    # --energy's columns were asked for: the default view keeps them (the rest of the telemetry is --wide's)
    tele_columns = [c for c in telemetry_columns(results) if wide or c[0] in ENERGY_KEYS + ("throttled",)]
    occ = wide and any(r.extra.get("occupancy") is not None for r in results)
    # which method timed each row, once any row was not one launch per event pair
    method = any(timed_by(r.extra) != "events" for r in results if r.stats)
    rate = RATE_HEADER.get(metric)
    cols = (["point"] if points else []) + (["#"] if wide else []) + ["variant", "block", "grid", "median ms", "± IQR"]
    cols += ["n"] if wide else []
    if rate:
        cols += [rate, "% roofline" if metric == "bandwidth" else "% of ref"]
    cols += ["speedup"] + (["step"] if wide else [])
    cols += [h for _, h in extra_columns] + (["occupancy"] if occ else []) + (["timed by"] if method else [])
    cols += [c.header for c in inst_columns]
    cols += [h for _, h in tele_columns] + ["check", "status"]
    # every row's cells first (a new point starts a section; what a kernel printed goes under its row), then the grid
    lines: list[tuple[bool, list[Any], list[str] | None]] = []
    first = prev = None
    for i, r in enumerate(results, 1):
        section = bool(points and i > 1 and points[i - 1] != points[i - 2])
        if section:
            first = prev = None
        med = r.median_ms
        speed = step = None
        if r.kind != "host" and r.status == PASSED and med:
            if first is None:
                first = med
            speed = first / med
            step = prev / med if prev else None
            prev = med
        batch = f" ×{r.extra['batch']}" if r.extra.get("batch") else ""
        name = (r.variant + (" [legacy]" if r.legacy else "") + (" [ref]" if r.kind == "library" else "")
                + (" !" if r.extra.get("other_process") else ""))
        row: list[Any] = ([points[i - 1]] if points else []) + ([str(i)] if wide else [])
        row += [name, r.block, r.grid, _ms(med) + batch if med is not None else "–", _ms(r.stats.iqr) if r.stats else "–"]
        row += [str(r.stats.n) if r.stats else "–"] if wide else []
        if rate:
            row += [_fmt(view.rates[i - 1], 2 if metric == "rate" else 0), pct_cell(r)]
        row += [_fmt(speed, 2) + "×" if speed else "–"] + ([_fmt(step, 2) + "×" if step else "–"] if wide else [])
        for key, _ in extra_columns:
            v = r.extra.get(key)
            row.append(_fmt(v, 4 if key.endswith("_ms") else 2) if isinstance(v, float) else "–" if v is None else str(v))
        row += [occupancy_cell(r.extra)] if occ else []
        row += [method_cell(r.extra) if r.stats else "–"] if method else []
        row += [c.cell(r.extra) for c in inst_columns]
        row += [telemetry_cell(key, r.extra) for key, _ in tele_columns]
        if r.max_error is None:
            row.append("–")
        elif r.status == INCORRECT:
            row.append((f"✗ {r.max_error:.2g}", "bold red"))
        else:
            row.append((f"✓ {r.max_error:.1g}" if r.max_error else "✓", "green"))
        row.append((str(r.status) if not r.reason else f"{r.status}: {r.reason}", _STATUS_STYLE.get(r.status, "")))
        printed = isinstance(r.extra.get("stdout"), str) and r.extra["stdout"]  # what the row's kernel printed
        lines.append((section, row, printed_lines(r.extra["stdout"], r.extra.get("stdout_dropped")) if printed else None))
    t = Grid([Column(c, right=c not in _LEFT, wrap=c == "status", drop=0 if wide else _DROP.get(c, 0)) for c in cols])
    for section, row, note in lines:
        if section:
            t.add_section()
        t.add_row(*row)
        if note is not None:
            t.add_note(note)
    return t


def point_notes(point: Any, view: TableView, wide: bool) -> list[str]:
    """The lines under a point's table: the legends of the columns shown, the instruments' notes, legacy rows."""
    rows = view.rows
    notes = []
    if wide and any("telemetry_polls" in r.extra for r in rows):  # a legend only for columns shown
        notes.append("telemetry (NVML, polled during each row's samples): SM/mem MHz median (min when it dipped), "
                     "W median (the board's instantaneous draw, updated every 100 ms; 'avg': the driver has only its "
                     "one-second average), °C max.")
    if any("sustained_w" in r.extra for r in rows):
        notes.append("--energy: W busy = board power with the row's launches back to back for a second or more "
                     "(NVML's energy counter); mJ/launch = W busy x median; GB/J, GFLOP/J = work per launch / that.")
    notes.append(LEGEND.get(point.metric, LEGEND["none"]))
    notes += [n for n in (view.over,) if n]
    notes += view.instrument_notes  # the columns' legend, rows the instrument could not measure
    if any(r.legacy for r in rows):
        notes.append("[legacy] faithful textbook code that is undefined on current GPUs (see `cudalab list "
                     f"{point.family}`); its correct twin runs beside it.")
    return notes


#: The legend line under a run table of each metric (its rate, % and speedup columns).
LEGEND = {
    "bandwidth": "speedup = over the first GPU row that passed, step = over the previous one; GB/s counts each "
                 "necessary byte once; % roofline = the least time the row's own reads and writes take (at the read "
                 "and write streams and the faster of memcpy_dtod and the best copy kernel, same run) over its time.",
    "flops": "speedup = over the first GPU row that passed, step = over the previous one; GFLOP/s = 2·M·N·K / "
             "time; % of ref = over the library (cuBLAS) row.",
    "rate": "speedup = over the first GPU row that passed, step = over the previous one; G items/s = keys sorted, "
            "queries answered or elements searched per second (1e9); % of ref = over the library (CuPy) row.",
    "none": "speedup = over the first GPU row that passed, step = over the previous one.",
}


#: The mark of a row above its roofline beyond the noise floor (:func:`pct_cell`, :func:`over_note`).
OVER_MARK = "‡"


def pct_cell(r: Result) -> Any:
    """The % column's cell: the figure, or, for a row above its roofline beyond the noise floor, the figure
    marked (a number no kernel can honestly reach: the legend line of :func:`over_note` says why)."""
    if r.extra.get(OVER_ROOFLINE) is None or r.pct_roofline is None:
        return _fmt(r.pct_roofline, 1)
    return (f"{OVER_MARK} {r.pct_roofline:.1f}", "bold yellow")


def over_note(results: Sequence[Result]) -> str | None:
    """The legend line of the rows :func:`pct_cell` marks, or None when none is."""
    limits = [r.extra[OVER_ROOFLINE] for r in results if r.extra.get(OVER_ROOFLINE) is not None and r.pct_roofline]
    if not limits:
        return None
    return (f"{OVER_MARK} above its own roofline beyond the noise floor (over {min(limits):g}%): not a speed to "
            "read as one; the row escaped the roofline's model (launches finding a warm L2, fewer bytes moved than "
            "the problem declares, or a declared read/write mix that is not the kernel's).")


def timed_by(extra: dict[str, Any]) -> str:
    """What timed a row: ``events``, ``batch``, ``graph`` or ``cupti`` (rows saved before it was kept: batch when
    batched)."""
    return str(extra.get("timed_by") or ("batch" if extra.get("batch") else "events"))


def method_cell(extra: dict[str, Any]) -> str:
    """``graph ×95 −2.1 µs``: the method, launches per sample, and the launch overhead the batch removed
    (the one-launch probes' median less the time per launch)."""
    how = timed_by(extra)
    n = extra.get("batch")
    text = how + (f" ×{n}" if n and how != "events" else "")
    over = extra.get("launch_overhead_us")
    if isinstance(over, (int, float)) and n:
        text += f" −{over:.2f} µs" if over >= 0 else f" +{-over:.2f} µs"
    return text + (" *" if extra.get("timed_by_note") else "")


#: Lines of a row's printf shown under it; the rest are counted (the JSON keeps them all).
PRINTED_LINES = 5


def printed_lines(text: str, dropped: Any = None) -> list[str]:
    """What a row printed (a kernel's printf), as shown under it: the first :data:`PRINTED_LINES` lines and
    how many more there are (``dropped``: bytes printed past what the row kept)."""
    lines = text.splitlines()
    out = [f"   ┆ printed {len(lines):,} line{'s' if len(lines) != 1 else ''}:"]
    out += [f"   ┆ {ln}" for ln in lines[:PRINTED_LINES]]
    if len(lines) > PRINTED_LINES:
        out.append(f"   ┆ … {len(lines) - PRINTED_LINES:,} more lines: see --json")
    if isinstance(dropped, int) and dropped > 0:
        out.append(f"   ┆ … and {dropped:,} bytes more, printed but not kept (a row keeps its first 1 MiB)")
    return out


def occupancy_cell(extra: dict[str, Any]) -> str:
    """``50% registers``: the theoretical occupancy of the row's kernel and the limit that binds; '–' without."""
    v = extra.get("occupancy")
    if not isinstance(v, (int, float)):
        return "–"
    return f"{v:.3g}% {extra.get('occupancy_limiter', '')}".strip()


#: (key in Result.extra, header) of the telemetry columns, in table order.
TELEMETRY_COLUMNS: tuple[tuple[str, str], ...] = (
    ("sm_mhz", "SM MHz"), ("mem_mhz", "mem MHz"), ("power_w", "W"), ("temp_c", "°C"),
    ("sustained_w", "W busy"), ("energy_mj_per_launch", "mJ/launch"), ("gb_per_j", "GB/J"), ("gflop_per_j", "GFLOP/J"), ("throttle", "throttle"),
    ("throttled", "throttled"),
)


#: The columns ``--energy`` adds: shown in the default view too (a column the user asked for is never hidden).
ENERGY_KEYS = ("sustained_w", "energy_mj_per_launch", "gb_per_j", "gflop_per_j")


def telemetry_cell(key: str, extra: dict[str, Any]) -> str:
    """One telemetry table cell; '–' when the row has no such value."""
    v = extra.get(key)
    if v is None or v == "":
        return "–"
    if key in ("sm_mhz", "mem_mhz"):
        low = extra.get(f"{key}_min")
        # The minimum only when it is well below the median: a clock that dipped during the samples.
        return f"{v} (min {low})" if low is not None and low < 0.97 * v else str(v)
    if key == "throttled":
        return f"{v} dropped" if extra.get("throttled_dropped") else str(v)
    if key == "energy_mj_per_launch":
        return f"{v:.3g}"
    if key == "power_w" and extra.get("power_avg_1s"):
        return f"{v:,.0f} avg"
    if isinstance(v, float):
        return f"{v:,.0f}" if v >= 100 else f"{v:.1f}"
    return str(v)


def telemetry_columns(results: Sequence[Result]) -> list[tuple[str, str]]:
    """The telemetry columns some row has a value for (none without NVML; ``throttled`` once a row counts one)."""
    # throttled: shown once a sample was (a column of zeros says nothing the header does not)
    return [(k, h) for k, h in TELEMETRY_COLUMNS
            if any(r.extra.get(k) not in ((None, "", 0) if k == "throttled" else (None, "")) for r in results)]


RATE_HEADER = {"bandwidth": "GB/s", "flops": "GFLOP/s", "rate": "G items/s"}
