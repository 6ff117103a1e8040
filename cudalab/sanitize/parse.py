"""Pure parser for compute-sanitizer's text output (memcheck, racecheck, synccheck, initcheck)."""

from __future__ import annotations

import re
from dataclasses import dataclass

_PREFIX = re.compile(r"^=+ ?")
_ERROR_SUMMARY = re.compile(r"ERROR SUMMARY:\s*(\d+) errors?")
_RACE_SUMMARY = re.compile(
    r"RACECHECK SUMMARY:\s*(\d+) hazards? displayed\s*\((\d+) errors?,\s*(\d+) warnings?\)")
#: Sanitizer lines that frame the report rather than describe a finding.
_NOT_A_REPORT = re.compile(
    r"^(COMPUTE-SANITIZER|ERROR SUMMARY|RACECHECK SUMMARY|LEAK SUMMARY|Process ID|"
    r"Target application returned an error|This application|Note:|$)")


@dataclass(frozen=True)
class Parsed:
    """What one compute-sanitizer output says.

    Attributes:
        errors: the summary's error count (racecheck: its ``errors``); None when no summary was
            printed (the tool did not finish: crash, timeout, refused device).
        warnings: racecheck's warnings (hazards it judges possibly benign); 0 for the other tools.
        reports: the first line of each report, in order (``Invalid __global__ write of size 4
            bytes``, ``Error: Race reported between Write access at ...``).
        locations: for each report, its first ``at ...`` line (kernel, file and line when known).
    """

    errors: int | None
    warnings: int = 0
    reports: tuple[str, ...] = ()
    locations: tuple[str, ...] = ()

    @property
    def first(self) -> str:
        """The first report line with its location, or ''."""
        if not self.reports:
            return ""
        where = self.locations[0] if self.locations else ""
        return self.reports[0] + (f" ({where})" if where else "")


def parse_output(text: str, tool: str) -> Parsed:
    """Parse compute-sanitizer's text output for ``tool``.

    Report headlines are the sanitizer-prefixed lines that are not indented; the indented lines
    after them (``at ...``, ``by thread ...``, ``and Read access at ...``) are their details, and
    the first ``at ...`` detail is the headline's location. The application's own output (lines
    without the prefix) is ignored.
    """
    errors: int | None = None
    warnings = 0
    reports: list[str] = []
    locations: list[str] = []
    for raw in text.splitlines():
        line = raw.rstrip()
        if not line.startswith("========="):
            continue
        body = _PREFIX.sub("", line, count=1)
        m = _RACE_SUMMARY.search(body)
        if m:
            errors, warnings = int(m.group(2)), int(m.group(3))
            continue
        m = _ERROR_SUMMARY.search(body)
        if m:
            if tool != "racecheck" or errors is None:  # racecheck's own summary is the finer one
                errors = int(m.group(1))
            continue
        if body[:1] in (" ", "\t"):
            detail = body.strip()
            if reports and not locations[-1] and detail.startswith("at "):
                locations[-1] = _short_location(detail)
            continue
        if _NOT_A_REPORT.match(body):
            continue
        reports.append(body.strip())
        locations.append("")
    return Parsed(errors=errors, warnings=warnings, reports=tuple(reports), locations=tuple(locations))


def _short_location(detail: str) -> str:
    """Keep the useful part of an ``at 0x70 in /long/path/file.cu:5:kernel(int*)`` line."""
    m = re.search(r" in (?:\S*/)?(\S+:\d+\S*)", detail)
    return m.group(1) if m else detail[3:].strip()
