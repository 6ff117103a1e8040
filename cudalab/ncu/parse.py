"""Pure parser for ncu's CSV (``--csv`` on stdout, or ``--import REPORT --csv``) and cudalab's marker lines.

ncu's details page prints one metric per row: ``"ID",...,"Kernel Name",...,"Block Size","Grid Size",...,
"Metric Name","Metric Unit","Metric Value"``. stdout mixes in the profiled program's own output and
``==PROF==`` lines, so the header row is searched for; columns are read by name. Values are converted
to base units (durations to nanoseconds, sizes to bytes) at full precision: cudalab asks ncu for base
units (``--print-units base``) but also reads files printed with ncu's scaled units (``us``, ``msecond``)
and with thousands separators (``"16,860,216"``).

A file that ends mid-row, or a launch that lacks metrics the others have, is reported as
``truncated`` rather than read as if it were whole.
"""

from __future__ import annotations

import csv
import json
import re
from dataclasses import dataclass, field
from typing import Any

from cudalab.errors import CounterPermissionError, NcuParseError
from cudalab.ncu.metrics import DURATION

#: The details-page section that holds the metrics asked for with ``--metrics`` (with ``--set full`` the
#: page holds every section; only this one is checked for launches lacking metrics).
CLI_SECTION = "Command line profiler metrics"
#: Lines an export writes before ncu's CSV: ``==CUDALAB== request {json}`` and one
#: ``==CUDALAB== variant {json}`` per child row (its status and launch log), so a re-import matches exactly.
MARKER = "==CUDALAB=="
_NEEDED = ("ID", "Kernel Name", "Metric Name", "Metric Value")

#: unit → (factor to the base unit, base unit). ncu's SI prefixes are powers of 1000.
_UNITS: dict[str, tuple[float, str]] = {}
for _names, _f in ((("ns", "nsecond", "nanosecond"), 1.0), (("us", "usecond", "µs", "microsecond"), 1e3),
                   (("ms", "msecond", "millisecond"), 1e6), (("s", "second"), 1e9)):
    _UNITS.update({n: (_f, "ns") for n in _names})
for _p, _f in (("", 1.0), ("K", 1e3), ("M", 1e6), ("G", 1e9), ("T", 1e12)):
    _UNITS[f"{_p}byte"] = (_f, "byte")
    _UNITS[f"{_p}byte/second"] = (_f, "byte/second")
    _UNITS[f"{_p}byte/s"] = (_f, "byte/second")


def parse_number(raw: str) -> float | None:
    """``"1,024"`` → 1024.0, ``"65.82"`` → 65.82; ``n/a`` or empty → None.

    ncu prints thousands separators (',' in the C locale, which cudalab sets so the decimal mark is '.').
    """
    text = raw.strip().replace(",", "").replace("\u202f", "").replace("\xa0", "")
    if not text or text.lower() in ("n/a", "nan", "-"):
        return None
    try:
        return float(text)
    except ValueError:
        return None


@dataclass(frozen=True)
class Metric:
    """One metric of one launch: name, base unit, the string ncu printed and the value in the base unit."""

    name: str
    unit: str
    raw: str
    value: float | None


def metric(name: str, unit: str, raw: str) -> Metric:
    """A Metric with its value converted to the base unit (durations: ns)."""
    value = parse_number(raw)
    factor, base = _UNITS.get(unit.strip(), (1.0, unit.strip()))
    return Metric(name, base, raw, None if value is None else value * factor)


@dataclass(frozen=True)
class KernelLaunch:
    """One profiled launch: ncu's ID, the kernel, its launch shape (``32x32``) and its metrics.

    ``missing``: metrics the other launches of the file have and this one lacks (a cut file).
    """

    launch_id: int
    kernel: str
    block: str = ""
    grid: str = ""
    device: str = ""
    cc: str = ""
    metrics: tuple[Metric, ...] = ()
    missing: tuple[str, ...] = ()

    @property
    def key(self) -> tuple[str, str, str]:
        """(kernel, grid, block): how launches are matched to a child's launch log."""
        return (self.kernel, self.grid, self.block)

    def metric(self, name: str) -> Metric | None:
        """The metric called ``name``, or None."""
        return next((m for m in self.metrics if m.name == name), None)

    def value(self, name: str) -> float | None:
        """A metric's value in its base unit, or None."""
        m = self.metric(name)
        return m.value if m else None

    @property
    def duration_ns(self) -> float | None:
        """``gpu__time_duration.sum`` in nanoseconds."""
        return self.value(DURATION)


@dataclass(frozen=True)
class Rule:
    """One guided-analysis rule that fired for a launch (the details page's rule rows).

    ``kind``: ncu's rule type (``OPT`` a suggestion with an estimated speedup, ``WRN``, ``INF``);
    ``speedup``: ncu's estimated speedup in percent of the launch's time (None: none given);
    ``scope``: ``global`` (the whole kernel) or ``local`` (the section's own part)."""

    launch_id: int
    section: str
    name: str
    kind: str
    description: str
    speedup: float | None = None
    scope: str = ""

    def to_dict(self) -> dict[str, Any]:
        """Plain dict for JSON (saved runs)."""
        return {"section": self.section, "name": self.name, "kind": self.kind, "description": self.description,
                "speedup": self.speedup, "scope": self.scope}

    @classmethod
    def from_dict(cls, d: dict[str, Any], launch_id: int = -1) -> "Rule":
        sp = d.get("speedup")
        return cls(launch_id, str(d.get("section", "")), str(d.get("name", "")), str(d.get("kind", "")),
                   str(d.get("description", "")), None if sp is None else float(sp), str(d.get("scope", "")))


@dataclass(frozen=True)
class ParsedCsv:
    """What one ncu text holds: launches in ID order, cudalab's marker payloads, and whether it is cut off."""

    launches: tuple[KernelLaunch, ...]
    markers: tuple[tuple[str, Any], ...] = ()
    truncated: str = ""
    metric_names: frozenset[str] = field(default_factory=frozenset)
    rules: tuple[Rule, ...] = ()


def dims(text: str) -> str:
    """ncu's ``(32, 8, 1)`` as cudalab writes dims: ``32x8``."""
    parts = re.findall(r"\d+", text)
    while len(parts) > 1 and parts[-1] == "1":
        parts.pop()
    return "x".join(parts) or text


def check_output(text: str) -> None:
    """Raise the error ncu's output reports, if it is one cudalab knows.

    Raises:
        CounterPermissionError: ERR_NVGPUCTRPERM (no access to the performance counters).
    """
    if "ERR_NVGPUCTRPERM" in text:
        lines = [ln for ln in text.splitlines() if "ERR_NVGPUCTRPERM" in ln]
        raise CounterPermissionError(lines[0] if lines else "")


def tail(text: str, lines: int = 15) -> str:
    """The last lines of a tool's output (for error messages)."""
    return "\n".join(text.strip().splitlines()[-lines:])


def _marker(line: str) -> tuple[str, Any]:
    kind, _, payload = line[len(MARKER):].strip().partition(" ")
    try:
        return kind, json.loads(payload) if payload.strip() else None
    except ValueError:
        return kind, payload.strip()


def parse_csv(text: str, source: str = "ncu output") -> ParsedCsv:
    """Parse ncu's CSV details page into launches (ID order), marker payloads and a truncation note.

    Raises:
        CounterPermissionError: the text reports ERR_NVGPUCTRPERM.
        NcuParseError: no header row, or a header without the needed columns.
    """
    check_output(text)
    entries: dict[int, dict[str, Any]] = {}
    markers: list[tuple[str, Any]] = []
    cols: dict[str, int] | None = None
    cut: list[str] = []
    rules: list[Rule] = []
    sections: dict[str, set[str]] = {}
    lines = text.splitlines()
    for n, line in enumerate(lines, 1):
        stripped = line.strip().lstrip("\ufeff")  # a CSV saved by a spreadsheet begins with a byte-order mark
        if stripped.startswith(MARKER):
            markers.append(_marker(stripped))
            continue
        if not stripped.startswith('"'):
            continue  # program output, ==PROF== lines, blank lines
        try:
            row = next(csv.reader([stripped]), [])
        except csv.Error as exc:  # a field over csv's limit (131,072 characters): no ncu field is that long
            raise NcuParseError(f"{source}: line {n} is not ncu CSV ({exc})") from None
        if all(k in row for k in _NEEDED):
            cols = {name: i for i, name in enumerate(row)}
            continue
        if cols is None:
            continue
        # every field quoted and closed; with the rule columns (ncu 2025), metric rows stop after the value
        # with a trailing separator
        body = stripped[:-1] if stripped.endswith('",') else stripped
        whole = body.endswith('"') and body.count('"') % 2 == 0
        short_ok = "Rule Name" in cols and len(row) == cols["Rule Name"] + 1 and not row[-1]
        if (len(row) != len(cols) and not short_ok) or not whole or not row[cols["ID"]].strip().isdigit():
            cut.append(f"line {n}" + (" (the last line)" if n == len(lines) else ""))
            continue

        def col(name: str, _row: list[str] = row) -> str:
            return _row[cols[name]] if name in cols and cols[name] < len(_row) else ""

        lid = int(col("ID"))
        if col("Rule Name") and not col("Metric Name"):
            entries.setdefault(lid, {"kernel": col("Kernel Name"), "block": dims(col("Block Size")),
                                     "grid": dims(col("Grid Size")), "device": col("Device"), "cc": col("CC"),
                                     "metrics": {}})
            scope, sp = col("Estimated Speedup Type").strip(), parse_number(col("Estimated Speedup"))
            rules.append(Rule(lid, col("Section Name"), col("Rule Name"), col("Rule Type"), col("Rule Description"),
                              sp, scope))
            continue
        sections.setdefault(col("Section Name"), set()).add(col("Metric Name"))
        entry = entries.setdefault(lid, {"kernel": col("Kernel Name"), "block": dims(col("Block Size")),
                                         "grid": dims(col("Grid Size")), "device": col("Device"), "cc": col("CC"),
                                         "metrics": {}})
        entry["metrics"][col("Metric Name")] = metric(col("Metric Name"), col("Metric Unit"), col("Metric Value"))
    if cols is None:
        head = "\n".join(text.strip().splitlines()[:5])
        raise NcuParseError(f"{source}: no ncu CSV found (no header row with \"ID\", \"Kernel Name\", "
                            f"\"Metric Name\", \"Metric Value\"); it begins:\n{head}")
    names = frozenset(m for e in entries.values() for m in e["metrics"])
    # --set full: sections differ between kernels; the metrics asked for are the ones every launch must have
    checked = frozenset(sections[CLI_SECTION]) if CLI_SECTION in sections and len(sections) > 1 else names
    launches = []
    short = []
    for lid in sorted(entries):
        e = entries[lid]
        missing = tuple(sorted(checked - set(e["metrics"])))
        if missing:
            short.append(str(lid))
        launches.append(KernelLaunch(lid, e["kernel"], e["block"], e["grid"], e["device"], e["cc"],
                                     tuple(e["metrics"].values()), missing))
    why = []
    if cut:
        why.append(f"cut-off row(s) at {', '.join(cut[:3])}")
    if short:
        why.append(f"launch(es) {', '.join(short)} lack metrics the others have")
    return ParsedCsv(tuple(launches), tuple(markers), "; ".join(why), names, tuple(rules))
