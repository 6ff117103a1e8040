"""Run kernel variants under compute-sanitizer on the child protocol and judge each run (no click, no rich).

Each run is one child (:mod:`cudalab.worker.child`) under the tool, with no shell::

    compute-sanitizer --tool T --error-exitcode 99 --print-limit N python -m cudalab.worker.child PLAN RESULT

The child runs one variant in profile mode (one poisoned, verified launch; nothing timed, no L2 flush,
no roofline), so the sanitizer sees the kernel and little else of cudalab's. Each variant runs at the
family's ``SANITIZE_SIZES`` (request fields: one a multiple of every tile, one not, because
out-of-bounds accesses hide at the first and show at the second) or at the ``--n`` values given.

The tool's verdict comes from its summary; the child's from its result file (never from its printed
text). A variant whose rules refuse a size is *skipped*, found by the same precheck the child runs.
"""

from __future__ import annotations

import concurrent.futures
import queue
import re
import subprocess
import threading
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from cudalab.execute import toolchild as child
from cudalab.plan import Plan, RunRequest, make_problem, precheck
from cudalab.catalog import user
from cudalab.catalog import family as family_spec
from cudalab.errors import LaunchConfigError, ToolFailedError, UsageError
from cudalab.families import load
from cudalab.files import atomic_write
from cudalab.records.results import FAILED, FINDINGS, INCORRECT, PASSED, SKIPPED, Status
from cudalab.sanitize.parse import parse_output
from cudalab.build.toolkit import find_cuda_tool

TOOLS = ("memcheck", "racecheck", "synccheck", "initcheck")
#: Exit status the sanitizer uses when it reports errors: distinct from the child's own codes
#: (0 ran, 2 refused), so "the tool found something" is never confused with "the child failed".
ERROR_EXITCODE = 99
DEFAULT_PRINT_LIMIT = 20
DEFAULT_TIMEOUT_S = 600.0
Runner = Callable[..., subprocess.CompletedProcess]


@dataclass(frozen=True)
class Job:
    """One sanitizer run: a variant's request (its size fields set), a tool; ``skip`` says why it is not run."""

    request: RunRequest
    tool: str
    legacy: str = ""
    skip: str = ""
    plan: Plan | None = field(default=None, compare=False)  # the planned point (None when skipped)

    @property
    def variant(self) -> str:
        """The variant's name (``+KERNEL`` for an --add kernel, which runs alone under --variant none)."""
        if self.request.add and self.request.variants == "none":
            return self.request.add[0].name
        return self.request.variants or ""

    @property
    def size(self) -> str:
        """The size as the table shows it (``64``, ``shape 64x32``, plus options that differ)."""
        r = self.request
        return r.n if r.n is not None and r.shape is None else f"shape {r.shape}" if r.shape else "default"

    @property
    def slug(self) -> str:
        """A file-name-safe id for the log of this run."""
        return re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{self.request.family}-{self.variant}-{self.tool}-{self.size}")


@dataclass(frozen=True)
class Row:
    """The outcome of one job: ``passed`` (clean), ``findings``, ``failed`` (child or tool) or ``skipped``.

    Attributes:
        findings: errors the tool counted (None when it printed no summary).
        warnings: racecheck warnings (not counted as findings).
        first: the first report line, with its location.
        reason: why a row was skipped or failed.
        returncode: the sanitizer's exit status (None when not run).
        log: path of the raw output, when ``log_dir`` was given.
    """

    variant: str
    legacy: str
    tool: str
    size: str
    status: Status
    findings: int | None = None
    warnings: int = 0
    first: str = ""
    reason: str = ""
    returncode: int | None = None
    seconds: float = 0.0
    log: str = ""

    @property
    def counts(self) -> bool:
        """Whether this row fails the run: a finding or failure in a variant that is not legacy."""
        return not self.legacy and self.status in (FINDINGS, FAILED)

    def to_dict(self) -> dict[str, Any]:
        """Plain dict for JSON."""
        return dict(asdict(self), status=str(self.status))


def find_sanitizer() -> str:
    """Path of compute-sanitizer (see :func:`cudalab.build.toolkit.find_cuda_tool`)."""
    return find_cuda_tool("compute-sanitizer", "compute-sanitizer",
                          "it ships with the CUDA toolkit; put its bin folder on PATH or set CUDA_HOME")


def tools_for(choice: str) -> tuple[str, ...]:
    """Expand ``all`` or a comma list into tool names.

    Raises:
        UsageError: an unknown tool.
    """
    if choice.strip() == "all":
        return TOOLS
    tools = tuple(t.strip() for t in choice.split(",") if t.strip())
    bad = [t for t in tools if t not in TOOLS]
    if bad or not tools:
        raise UsageError(f"unknown sanitizer tool {', '.join(bad) or repr(choice)}; valid: {', '.join(TOOLS)}, all")
    return tools


def sizes_for(req: RunRequest) -> tuple[dict[str, str], ...]:
    """The size fields each variant runs with: ``--n`` values (a comma list) or ``--shape`` when given,
    else the family's ``SANITIZE_SIZES``."""
    if req.shape:
        return ({"shape": req.shape},)
    if req.n:
        return tuple({"n": s.strip()} for s in req.n.split(",") if s.strip())
    return tuple(dict(s) for s in load(family_spec(req.family).module).SANITIZE_SIZES)


def plan(req: RunRequest, tools: Iterable[str] = TOOLS) -> list[Job]:
    """Expand a request into jobs: by variant (catalog order), then size, then tool.

    Only kernel variants are run. A size a variant's rules refuse gives jobs with ``skip`` set.

    Raises:
        UsageError: unknown family or variant, a size no variant could take, or no kernel variant selected.
    """
    spec = family_spec(req.family)
    fam = load(spec.module)
    only_added = bool(req.add) and (req.variants or "").strip() == "none"
    built_in = [] if only_added else [v for v in spec.select(req.variants) if v.kind == "kernel"]
    # each job runs one variant: a built-in one by name, an --add kernel alone (--variant none)
    selected = [(v, {"variants": v.name, "add": ()}) for v in built_in]
    selected += [(v, {"variants": "none", "add": (k,)}) for k, v in zip(req.add, user.variants(req.add, spec))]
    if not selected:
        raise UsageError(f"{spec.name}: no kernel variant selected (host, driver and library rows are not sanitized)")
    base = replace(req, n=None, shape=None, profile=True, roofline=False)
    sized = [replace(base, **fields) for fields in sizes_for(req)]
    for r in sized:  # a size no variant could take is a mistake in the command (or the hook), not a skip
        make_problem(spec, fam, r)
    jobs: list[Job] = []
    for v, fields in selected:
        for r in sized:
            one = replace(r, **fields)
            planned, why = None, ""
            try:
                planned = precheck(one)  # planned once: each tool's child runs this plan
            except (UsageError, LaunchConfigError) as exc:
                why = str(exc)
            jobs.extend(Job(one, t, v.legacy, why, planned) for t in tools)
    return jobs


def prefix_argv(sanitizer: str, tool: str, print_limit: int = DEFAULT_PRINT_LIMIT) -> list[str]:
    """The sanitizer's argv prefix before the child (no shell)."""
    return [sanitizer, "--tool", tool, "--error-exitcode", str(ERROR_EXITCODE), "--print-limit", str(print_limit)]


def judge(job: Job, done: child.ChildRun) -> Row:
    """Turn one run into its row: the tool's verdict from its summary, the child's from its result file.

    A summary of 0 errors from a child that crashed is a failure, not a clean run.
    """
    parsed = parse_output(done.output, job.tool)
    base = Row(variant=job.variant, legacy=job.legacy, tool=job.tool, size=job.size, status=FAILED,
               findings=parsed.errors, warnings=parsed.warnings, first=parsed.first, returncode=done.returncode)
    if parsed.errors:
        return replace(base, status=FINDINGS)
    if done.returncode == ERROR_EXITCODE:  # the tool says it found errors but printed no count we read
        return replace(base, status=FINDINGS, reason="the sanitizer exited with its error code")
    res = done.result
    if res is None:
        return replace(base, reason=f"the child wrote no result (exit {done.returncode}): {_tail(done.output)}")
    if res.error:
        return replace(base, reason=res.error)
    row = next((r for r in res.rows if r.variant == job.variant), None)
    if row is None:
        return replace(base, reason="the child ran but has no row for this variant")
    if row.status == SKIPPED:  # refused by a limit only the child knows (the real GPU's shared memory)
        return replace(base, status=SKIPPED, reason=row.reason)
    if row.status == INCORRECT:
        return replace(base, reason=f"the variant's result was incorrect: {row.reason}")
    if row.status != PASSED:
        return replace(base, reason=row.reason or f"the variant {row.status}")
    if parsed.errors is None:
        return replace(base, reason="no sanitizer summary: " + _tail(done.output))
    return replace(base, status=PASSED)


def _tail(output: str, lines: int = 3) -> str:
    return " | ".join(ln.strip() for ln in output.strip().splitlines()[-lines:]) or "no output"


def run_job(job: Job, sanitizer: str, print_limit: int = DEFAULT_PRINT_LIMIT, timeout_s: float = DEFAULT_TIMEOUT_S,
            log_dir: Path | None = None, run: Runner = subprocess.run) -> Row:
    """Run one job under the sanitizer and judge it; the raw output goes to ``log_dir`` if given."""
    prefix = prefix_argv(sanitizer, job.tool, print_limit)
    try:
        done = child.run_child(job.plan, prefix, timeout_s, run=run)
        row, output = replace(judge(job, done), seconds=done.seconds), done.output
    except subprocess.TimeoutExpired as exc:
        out = exc.output
        output = out.decode(errors="replace") if isinstance(out, bytes) else (out or "")
        row = Row(job.variant, job.legacy, job.tool, job.size, FAILED, reason=f"timed out after {timeout_s:g} s")
    except OSError as exc:
        raise ToolFailedError(f"could not start {sanitizer}: {exc}") from None
    if log_dir is not None:
        path = Path(log_dir) / f"{job.slug}.log"
        atomic_write(path, "$ " + " ".join(prefix + ["python -m cudalab.worker.child PLAN RESULT"]) + "\n" + output)
        row = replace(row, log=str(path))
    return row


def sanitize(req: RunRequest, tools: Iterable[str] = TOOLS, log_dir: str | Path | None = None,
             print_limit: int = DEFAULT_PRINT_LIMIT, timeout_s: float = DEFAULT_TIMEOUT_S,
             on_row: Callable[[Row], None] | None = None, run: Runner = subprocess.run,
             sanitizer: str | None = None, devices: Sequence[int] | None = None) -> list[Row]:
    """Run every selected kernel variant of ``req`` under each tool at each size; one row per job.

    With several ``devices`` the jobs are spread over those GPUs, one job per GPU at a time.

    Raises:
        ToolMissingError: compute-sanitizer is not installed.
        UsageError: unknown family, variant or tool.
        ToolFailedError: every run failed for the same reason (no GPU, no pycuda...): one message
            rather than a table of identical failures.
    """
    jobs = plan(req, tools)
    sanitizer = sanitizer or find_sanitizer()
    gpus = list(devices) if devices else [req.device]
    free = queue.Queue()  # the GPUs not running a job now: each job runs alone on its GPU
    for d in gpus:
        free.put(d)
    lock = threading.Lock()

    def one(job: Job) -> Row:
        if job.skip:
            row = Row(job.variant, job.legacy, job.tool, job.size, SKIPPED, reason=job.skip)
        else:
            d = free.get()
            try:
                job_on = replace(job, request=replace(job.request, device=d),
                                 plan=job.plan.with_request(device=d) if job.plan is not None else None)
                row = run_job(job_on, sanitizer, print_limit, timeout_s, Path(log_dir) if log_dir else None, run)
            finally:
                free.put(d)
        if on_row:
            with lock:
                on_row(row)
        return row

    if len(gpus) == 1:
        rows = [one(job) for job in jobs]
    else:  # the jobs are separate processes: one per GPU at a time, rows kept in the plan's order
        with concurrent.futures.ThreadPoolExecutor(max_workers=len(gpus)) as pool:
            rows = list(pool.map(one, jobs))
    ran = [r for r in rows if r.status != SKIPPED]
    refused = [r for r in ran if r.status == FAILED and r.returncode is not None]
    if ran and len(refused) == len(ran) and len({r.reason for r in ran}) == 1:
        raise ToolFailedError(f"every sanitizer run failed: {ran[0].reason}")
    return rows


def failing(rows: Sequence[Row]) -> list[Row]:
    """Rows that fail the run: findings or failures in variants that are not legacy."""
    return [r for r in rows if r.counts]


def never_ran(rows: Sequence[Row]) -> list[str]:
    """Variants skipped at every size: the sanitizer never saw them (the sizes need a hook)."""
    by_variant: dict[str, set[Status]] = {}
    for r in rows:
        by_variant.setdefault(r.variant, set()).add(r.status)
    return [v for v, st in by_variant.items() if st == {SKIPPED}]
