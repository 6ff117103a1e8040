"""One result model: the status vocabulary, a variant's row, the roofline, and the saved run record.

Run, ncu and sanitize rows all use :class:`Status`. A saved file is one :class:`RunRecord`
(``schema_version`` :data:`SCHEMA_VERSION`, documented in ``docs/result-schema.json``): the machine it
ran on and one :class:`RunPoint` per problem (a sweep has several). :func:`load_record` also reads
the files older versions wrote (no ``schema_version``: version 1).
"""

from __future__ import annotations

import gc
import json
import math
from contextlib import contextmanager
import os
from dataclasses import asdict, dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, Callable, Iterator

from cudalab.bench import Stats
from cudalab.records.fields import (saved_device, saved_float, saved_problem, saved_protocol, saved_rate,
                                    saved_started, saved_stats, saved_tables)
from cudalab.errors import UsageError
from cudalab.instruments import Instrument
from cudalab.files import atomic_write, load_json

SCHEMA_VERSION = 2
#: A row's ``extra`` key, set when its % of roofline passed 100 plus the noise floor: that limit (%). The
#: table marks such a row rather than print a plain number (:mod:`cudalab.roofline` sets it).
OVER_ROOFLINE = "over_roofline"


class Status(str, Enum):
    """What became of one row (a variant's run, its ncu profile or one sanitizer run).

    passed: verified (and, for a tool, the tool found nothing); incorrect: the result differs from
    the reference; findings: a tool (compute-sanitizer) reported errors; failed: an error while
    compiling, launching or running a tool; timeout: its kernel did not finish within the run's limit
    (the worker was killed); skipped: a rule the variant cannot meet (reason given); missing: a tool
    saw no launch of the variant.
    """

    PASSED = "passed"
    INCORRECT = "incorrect"
    FINDINGS = "findings"
    FAILED = "failed"
    SKIPPED = "skipped"
    MISSING = "missing"
    TIMEOUT = "timeout"

    def __str__(self) -> str:
        return self.value

    @property
    def bad(self) -> bool:
        """Whether this status fails a command (exit code 1)."""
        return self in (Status.INCORRECT, Status.FINDINGS, Status.FAILED, Status.TIMEOUT)


PASSED, INCORRECT, FINDINGS, FAILED, SKIPPED, MISSING, TIMEOUT = (
    Status.PASSED, Status.INCORRECT, Status.FINDINGS, Status.FAILED, Status.SKIPPED, Status.MISSING, Status.TIMEOUT)


def _finite(x: Any) -> Any:
    """JSON has no inf/nan: write them as strings ("inf", "nan")."""
    return str(x) if isinstance(x, float) and not math.isfinite(x) else x


@dataclass(frozen=True)
class Result:
    """One variant's row: launch, timing statistics, rate, verification and status."""

    variant: str
    kind: str
    status: Status
    reason: str = ""
    block: str = ""
    grid: str = ""
    shared: int = 0
    stats: Stats | None = None
    gbs: float | None = None
    gflops: float | None = None
    pct_roofline: float | None = None
    max_error: float | None = None
    tolerance: float | None = None
    legacy: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def median_ms(self) -> float | None:
        """Median time, or None when not timed."""
        return self.stats.median if self.stats else None

    def to_dict(self) -> dict[str, Any]:
        """Plain dict for JSON, raw samples included."""
        d = asdict(self)
        d["status"] = self.status.value
        d["stats"] = asdict(self.stats) if self.stats else None
        d["extra"] = {k: _finite(v) for k, v in self.extra.items()}
        return {k: _finite(v) for k, v in d.items()}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Result":
        """Read a row written by :meth:`to_dict` (any schema version)."""
        s = d.get("stats")
        stats = saved_stats(s) if s else None
        return cls(
            variant=str(d["variant"]), kind=str(d.get("kind", "kernel")), status=Status(d["status"]),
            reason=str(d.get("reason", "")), block=str(d.get("block", "")), grid=str(d.get("grid", "")),
            shared=int(d.get("shared", 0) or 0), stats=stats, gbs=saved_rate(d.get("gbs"), "gbs"),
            gflops=saved_rate(d.get("gflops"), "gflops"), pct_roofline=saved_rate(d.get("pct_roofline"), "pct_roofline"),
            max_error=saved_float(d.get("max_error")), tolerance=saved_float(d.get("tolerance")),
            legacy=str(d.get("legacy", "")), extra=dict(d.get("extra") or {}),
        )


@dataclass(frozen=True)
class Roofline:
    """The bandwidth every variant is compared with: the faster of the driver copy and the best copy kernel
    (``gbs``, a copy's rate), and the read and write streams measured beside it (None: not measured, as in
    records older than them and a copy run's own rows): a row's roofline is the time its own reads and
    writes take at those rates (:func:`cudalab.roofline.pct_of`).

    Attributes:
        floor: the noise floor (a fraction) of the GPU it was measured on: a row above 100% by more is
            flagged in the table, not shown as a plain number.
    """

    gbs: float
    source: str
    dtod_gbs: float
    kernel_gbs: float | None = None
    read_gbs: float | None = None
    write_gbs: float | None = None
    floor: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """Plain dict for JSON."""
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> "Roofline | None":
        """Read :meth:`to_dict`'s output (None stays None)."""
        if not d:
            return None
        if not isinstance(d, dict):
            raise UsageError(f"not a cudalab run record ('roofline' must be an object, got {type(d).__name__})")
        gbs = saved_rate(d["gbs"], "roofline.gbs")
        if not gbs:  # every % of the roofline divides by it
            raise UsageError("not a cudalab run record ('roofline.gbs' must be above 0; got 0)")
        return cls(gbs=gbs, source=str(d["source"]), dtod_gbs=saved_rate(d["dtod_gbs"], "roofline.dtod_gbs") or 0.0,
                   kernel_gbs=saved_rate(d.get("kernel_gbs"), "roofline.kernel_gbs"),
                   read_gbs=saved_rate(d.get("read_gbs"), "roofline.read_gbs") or None,
                   write_gbs=saved_rate(d.get("write_gbs"), "roofline.write_gbs") or None,
                   floor=saved_rate(d.get("floor"), "roofline.floor"))


@dataclass(frozen=True)
class RunPoint:
    """One family at one problem (size, dtype, options, block): its rows and roofline.

    Attributes:
        family: family name.
        metric: ``bandwidth``, ``flops`` or ``none`` (how rates are reported).
        problem: ``{"dims": [...], "dtype": ..., "options": {...}}``.
        block: the ``--block`` the point ran with ('' for each variant's own).
        protocol: the timing protocol (:class:`cudalab.bench.Protocol` as a dict).
        roofline: the copy roofline measured in the same run (bandwidth families).
        results: one row per variant, in run order.
        defines: ``-D`` overrides of this point.
        device: the index of the GPU that ran the point (None in records older than ``--devices``).
        roofline_note: why the point has no roofline although it wanted one ('' otherwise).
        instruments: the instruments that added figures to the rows (``--ncu``): their columns and legend
            (:mod:`cudalab.instruments`), so a table shows them from the point alone.
    """

    family: str
    metric: str
    problem: dict[str, Any]
    block: str = ""
    protocol: dict[str, Any] = field(default_factory=dict)
    roofline: Roofline | None = None
    results: tuple[Result, ...] = ()
    defines: tuple[tuple[str, str], ...] = ()
    device: int | None = None
    roofline_note: str = ""
    instruments: tuple[Instrument, ...] = ()

    @property
    def label(self) -> str:
        """``16384x16384 float32`` plus options, block and defines: what identifies the point."""
        p = self.problem
        text = "x".join(str(d) for d in p.get("dims", ())) + f" {p.get('dtype', '')}"
        text += "".join(f" {k}={v}" for k, v in sorted((p.get("options") or {}).items()))
        text += f" block={self.block}" if self.block else ""
        text += "".join(f" -D{k}={v}" for k, v in self.defines)
        return text

    def to_dict(self) -> dict[str, Any]:
        """Plain dict for JSON."""
        return {"family": self.family, "metric": self.metric, "problem": self.problem, "block": self.block,
                "defines": [list(d) for d in self.defines], "protocol": self.protocol,
                "roofline": self.roofline.to_dict() if self.roofline else None,
                "roofline_note": self.roofline_note, "device": self.device,
                "results": [r.to_dict() for r in self.results]} | (
            {"instruments": [i.to_dict() for i in self.instruments]} if self.instruments else {})

    @classmethod
    def from_dict(cls, d: dict[str, Any], family: str = "", metric: str = "") -> "RunPoint":
        """Read :meth:`to_dict`'s output, or a version-1 payload (``family``/``metric`` as fallbacks)."""
        return cls(
            family=str(d.get("family") or family), metric=str(d.get("metric") or metric or "bandwidth"),
            problem=saved_problem(d.get("problem") or {}), block=str(d.get("block") or ""),
            protocol=saved_protocol({} if d.get("protocol") is None else d["protocol"]), roofline=Roofline.from_dict(d.get("roofline")),
            results=tuple(Result.from_dict(r) for r in saved_tables(d.get("results", ()), "results")),
            defines=tuple((str(k), str(v)) for k, v in d.get("defines") or ()),
            device=saved_device(d.get("device")), roofline_note=str(d.get("roofline_note") or ""),
            instruments=tuple(Instrument.from_dict(i) for i in saved_tables(d.get("instruments") or (), "instruments")),
        )


#: How a record shows in a notebook, by form (``html``, ``text``): the tables are the report's, so the report
#: registers them as it is imported (:mod:`cudalab.report.notebook`); records render nothing themselves.
DISPLAY: dict[str, Callable[["RunRecord"], str]] = {}


@dataclass(frozen=True)
class RunRecord:
    """A saved run: what ran where, and every point's rows.

    Attributes:
        schema_version: :data:`SCHEMA_VERSION` for files this version writes.
        cudalab: the cudalab version.
        command: the command line.
        started: seconds since the epoch.
        incomplete: the run was interrupted (or a point failed) and holds what was measured.
        device: the GPU (:meth:`cudalab.records.device.DeviceInfo.to_dict`), with measured clocks where known.
        machine: host facts (hostname, Python, NumPy, pycuda, CuPy, kernel tree revision).
        points: one per problem.
    """

    cudalab: str
    command: tuple[str, ...]
    started: float
    device: dict[str, Any]
    points: tuple[RunPoint, ...]
    incomplete: bool = False
    machine: dict[str, Any] = field(default_factory=dict)
    schema_version: int = SCHEMA_VERSION

    @property
    def gpu(self) -> str:
        """The GPU's name ('' when unknown)."""
        return str(self.device.get("name", ""))

    def rows(self) -> list[tuple[RunPoint, Result]]:
        """Every (point, row) pair."""
        return [(p, r) for p in self.points for r in p.results]

    def _repr_html_(self) -> str | None:
        """A notebook shows the tables, coloured as on a terminal (:func:`cudalab.report.notebook.record_html`,
        once the report has registered it in :data:`DISPLAY`; None: IPython falls back to the text form)."""
        html = DISPLAY.get("html")
        return html(self) if html is not None else None

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        """IPython's text form: the tables, not every raw sample (:func:`cudalab.report.notebook.record_text`)."""
        text = DISPLAY.get("text")
        p.text("RunRecord(...)" if cycle or text is None else text(self))

    def to_rows(self) -> list[dict[str, Any]]:
        """One flat dict per (point, variant): the point's size, dtype, options, block and defines, then the
        row's launch, time, rate, check and status (what :meth:`to_pandas` tabulates)."""
        out = []
        for p, r in self.rows():
            prob = p.problem
            s = r.stats
            row: dict[str, Any] = {
                "point": p.label, "family": p.family, "size": "x".join(str(d) for d in prob.get("dims", ())),
                "dtype": prob.get("dtype", ""), **dict(prob.get("options") or {}),
                **{f"-D{k}": v for k, v in p.defines}, "sweep_block": p.block,
                "variant": r.variant, "kind": r.kind, "status": r.status.value, "block": r.block, "grid": r.grid,
                "median_ms": s.median if s else None, "iqr_ms": s.iqr if s else None, "min_ms": s.min if s else None,
                "samples": s.n if s else None, "gbs": r.gbs, "gflops": r.gflops, "pct_roofline": r.pct_roofline,
                "max_error": r.max_error, "reason": r.reason, "legacy": bool(r.legacy),
                "occupancy": r.extra.get("occupancy"), "occupancy_limiter": r.extra.get("occupancy_limiter"),
            }
            out.append(row)
        return out

    def to_pandas(self) -> Any:
        """A pandas DataFrame with one row per (point, variant) (:meth:`to_rows`).

        Raises:
            ImportError: pandas is not installed (one line saying how to get it).
        """
        try:
            import pandas as pd  # noqa: PLC0415
        except ImportError:
            raise ImportError("RunRecord.to_pandas needs pandas: pip install pandas") from None
        return pd.DataFrame(self.to_rows())

    def to_dict(self) -> dict[str, Any]:
        """Plain dict for JSON."""
        return {"schema_version": self.schema_version, "cudalab": self.cudalab, "command": list(self.command),
                "started": self.started, "incomplete": self.incomplete, "device": self.device,
                "machine": self.machine, "points": [p.to_dict() for p in self.points]}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "RunRecord":
        """Read any schema version this cudalab knows.

        Raises:
            UsageError: the data is not a cudalab run record, or is from a newer schema.
        """
        if not isinstance(d, dict):
            raise UsageError("not a cudalab run record (expected a JSON object)")
        version = d.get("schema_version", 1)
        if not isinstance(version, int) or isinstance(version, bool) or version < 1:
            raise UsageError(f"schema_version {version!r} is not a version number (1 to {SCHEMA_VERSION})")
        if version > SCHEMA_VERSION:
            raise UsageError(f"schema_version {version} is newer than this cudalab reads (up to "
                             f"{SCHEMA_VERSION}); upgrade cudalab")
        if version == 1:  # one payload per run, or {"sweep": [payloads]}; no machine block
            payloads = saved_tables(d.get("sweep") or [d], "sweep")
            if not payloads or "results" not in payloads[0]:
                keys = sorted(d)[:6] if isinstance(d, dict) else []
                raise UsageError("not a cudalab run record (no results; " + (
                    f"its keys {', '.join(keys)}: a benchmark or study summary written by a script, not one run; "
                    "report, compare and roofline read what a run's --json wrote)" if keys else "an empty object)"))
            family = str(d.get("family", ""))
            points = tuple(RunPoint.from_dict(p, family, _metric_of(family)) for p in payloads)
        else:
            points = tuple(RunPoint.from_dict(p) for p in saved_tables(d.get("points", ()), "points"))
        command = d.get("command") or ()
        if not isinstance(command, list) or not isinstance(d.get("device") or {}, dict):
            raise UsageError("not a cudalab run record ('command' must be a list, 'device' an object)")
        return cls(cudalab=str(d.get("cudalab", "")), command=tuple(str(c) for c in command),
                   started=saved_started(d.get("started")), device=dict(d.get("device") or {}), points=points,
                   incomplete=bool(d.get("incomplete", False)), machine=dict(d.get("machine") or {}),
                   schema_version=version)


def _metric_of(family: str) -> str:
    """The family's metric from the catalog (version-1 files did not store it); '' if unknown."""
    from cudalab import catalog  # noqa: PLC0415  (only old files need it)

    try:
        return catalog.family(family).metric
    except Exception:  # a family this cudalab no longer has: rates are still read from the rows
        return ""


def save_record(path: str | os.PathLike, record: RunRecord) -> None:
    """Write a record as JSON, atomically: serialised first, then written in one replace."""
    text = json.dumps(record.to_dict(), indent=1, default=str) + "\n"
    atomic_write(path, text)


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cycle collector off while a record is read: JSON makes no cycles, and a record of 100,000 points
    is millions of new objects, each batch of which set the collector walking all those before it (half of the
    reading time)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def load_record(path: str | os.PathLike) -> RunRecord:
    """Read a saved run (through :func:`cudalab.files.load_json`: size and nesting are bounded).

    Raises:
        UsageError: no such file, not a regular file, too large or too deep, not JSON, or not a cudalab
            run record.
    """
    p = Path(path)
    with _collector_paused():
        data = load_json(p)
        try:
            return RunRecord.from_dict(data)
        except UsageError as exc:
            raise UsageError(f"{p}: {exc}") from None
        except (KeyError, TypeError, ValueError, AttributeError, ArithmeticError) as exc:
            raise UsageError(f"{p}: not a cudalab run record ({type(exc).__name__}: {exc})") from None
