"""One benchmark record from several calls (benchmark.py ``--merge``): earlier calls' records read back, checked to
be of one GPU model, their jobs and sections combined, and the record's account of which call ran what on which GPU
of which host. Pure: no GPU.

A record lists its calls (``calls``: each one's command, host, GPU bus id, ``CUDA_VISIBLE_DEVICES``, start and end,
sections and jobs). Merged records are combined in the order given: a later record's job or section replaces an
earlier one's of the same name (never with a section it skipped: figures win over "not run"), so the calls are
listed in that order too and a job's figures are those of the last call that ran it.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import socket
import sys
from pathlib import Path
from typing import NoReturn

from cudalab.records import machine
from cudalab.records.results import Result, Roofline

#: Every section, in the order it runs ("jobs" first: the others read its figures).
SECTIONS = ("jobs", "large", "wall", "saved", "ncu", "energy", "truth", "table36", "ceiling")
#: The record's key of each section (jobs: the record's runs).
SECTION_KEY = {"large": "large", "wall": "time_to_table", "saved": "saved_runs", "ncu": "ncu_walls",
               "energy": "energy", "truth": "timing_truth", "table36": "table36", "ceiling": "ceiling"}
#: Keys of the JSON record that sections wrote (read back by --merge).
EXTRA_KEYS = (*SECTION_KEY.values(), "time_profile")


def refuse(message: str) -> NoReturn:
    """Refuse as cudalab refuses bad input: one line on stderr, exit 2.

    Raises:
        SystemExit: always, with code 2.
    """
    print(f"benchmark.py: {message}", file=sys.stderr)
    raise SystemExit(2)


def slug_of(name: str) -> str:
    """A GPU's name as the record's file name (``NVIDIA H100 80GB HBM3`` -> ``nvidia-h100-80gb-hbm3``)."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def merge_paths(values: list[str] | None) -> list[Path]:
    """``--merge A --merge B,C`` as [A, B, C], in that order."""
    return [Path(p) for v in values or () for p in v.split(",") if p]


def has_figures(val) -> bool:
    """A section's value holds figures (not empty, not a "skipped" note)."""
    return isinstance(val, (list, dict)) and bool(val) and "skipped" not in val


def now() -> str:
    """The time now, UTC, to the second (a call's start and end)."""
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def record_file(path: Path, name: str | None) -> Path:
    """The record a ``--merge`` value names: a file, or in a folder ``<slug of name>.json``, else the folder's only
    .json (whose GPU model :func:`load_earlier` then checks).

    Raises:
        SystemExit: (exit 2, one line) a folder without that record and not one .json.
    """
    if not path.is_dir():
        return path
    if name is not None and (path / f"{slug_of(name)}.json").is_file():
        return path / f"{slug_of(name)}.json"
    found = sorted(path.glob("*.json"))
    if len(found) != 1:
        refuse(f"--merge {path}: a folder with {len(found)} .json files"
               + (f", none of them {slug_of(name)}.json" if name is not None else "") + "; name the record's .json")
    return found[0]


def load_earlier(path: Path, name: str | None = None, whose: str = "this GPU is") -> dict:
    """An earlier call's JSON record as benchmark.py holds a record: runs with Result and Roofline rows again, the
    sections' figures, its command, device and calls.

    Args:
        path: the record's .json, or the folder holding it.
        name: the GPU model the record must be of (None: any).
        whose: what ``name`` is, for the refusal ("this GPU is", "the records before it are of").

    Raises:
        SystemExit: (exit 2, one line) no such record, or one of another GPU model than ``name``.
    """
    path = record_file(path, name)
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        refuse(f"--merge {path}: {exc}")
    dev = data.get("device") or {}
    dev.setdefault("cupy", data.get("cupy"))   # records before the device named it: the record's own
    if name is not None and dev.get("name") != name:
        refuse(f"--merge {path}: a record of {dev.get('name')!r}, {whose} {name!r}; one record is of one GPU model")
    runs = {}
    for job, run in (data.get("runs") or {}).items():
        req = dict(run.get("request") or {})
        if "options" in req:
            req["options"] = tuple(tuple(o) for o in req["options"])
        got = {"family": run["family"], "request": req, "seconds": run.get("seconds")}
        if run.get("error"):
            got |= {"error": run["error"], "trace": run.get("trace", "")}
        else:
            got |= {"rows": [Result.from_dict(r) for r in run.get("rows") or ()],
                    "roofline": Roofline.from_dict(run.get("roofline")), "problem": run.get("problem")}
        runs[job] = got
    extra = {k: data[k] for k in EXTRA_KEYS if k in data}
    # a record written before records listed their calls: one call, of unknown host and time
    calls = data.get("calls") or [{
        "command": data.get("command", "?"), "host": None, "gpu": dev.get("name"), "pci_bus_id": dev.get("pci_bus_id"),
        "cuda_visible_devices": None, "started": None, "ended": None, "jobs": list(runs),
        "sections": (["jobs"] if runs else []) + [s for s, k in SECTION_KEY.items() if k in extra]}]
    return {"path": str(path), "command": data.get("command", "?"), "device": dev, "runs": runs, "extra": extra,
            "calls": calls}


def load_all(paths: list[Path], name: str | None) -> list[dict]:
    """Every ``--merge`` record, all of one GPU model: ``name`` (this call's GPU) or, with no GPU in this call, the
    first record's.

    Raises:
        SystemExit: (exit 2, one line) a record missing, or of another GPU model.
    """
    out = []
    whose = "this GPU is"
    for p in paths:
        rec = load_earlier(p, name, whose)
        if name is None:
            name, whose = rec["device"].get("name"), f"{rec['path']} is of"
        out.append(rec)
    return out


def merge_extra(base: dict, new: dict) -> dict:
    """``base``'s sections with ``new``'s over them, except a section ``new`` skipped where ``base`` has figures."""
    out = dict(base)
    for key, val in new.items():
        if has_figures(out.get(key)) and not has_figures(val):
            continue
        out[key] = val
        if key == "time_to_table":  # the profile belongs to the walls it profiled
            out.pop("time_profile", None)
            if "time_profile" in new:
                out["time_profile"] = new["time_profile"]
    return out


def combine(earlier: list[dict]) -> tuple[dict, dict, list[dict]]:
    """The runs, sections and calls of records merged in order (a later one's replace an earlier one's)."""
    runs: dict = {}
    extra: dict = {}
    calls: list[dict] = []
    for rec in earlier:
        runs |= rec["runs"]          # a job keeps its first place in the record, takes the later figures
        extra = merge_extra(extra, rec["extra"])
        calls += rec["calls"]
    return runs, extra, calls


def job_owners(calls: list[dict], runs: dict) -> dict[str, int]:
    """For each job of ``runs``, the index of the call whose figures it holds (the last call that ran it)."""
    owner: dict[str, int] = {}
    for i, call in enumerate(calls):
        for job in call.get("jobs") or ():
            if job in runs:
                owner[job] = i
    return owner


def device_of(earlier: list[dict], runs: dict) -> dict:
    """The device (clocks, telemetry) of the record whose jobs' figures are most of ``runs`` (the later on a tie)."""
    owner = {job: i for i, rec in enumerate(earlier) for job in rec["runs"] if job in runs}
    counts = [sum(1 for i in owner.values() if i == k) for k in range(len(earlier))]
    best = max(range(len(earlier)), key=lambda k: (counts[k], k))
    return dict(earlier[best]["device"])


def runs_tar(earlier: list[dict]) -> Path | None:
    """The runs.tar.gz to keep beside the merged record: the one beside the last record whose saved runs it holds
    (the list the merged record names), else beside the last record that has one."""
    with_list = [r for r in earlier if has_figures(r["extra"].get("saved_runs"))]
    for rec in reversed(with_list[-1:] or earlier):
        tar = Path(rec["path"]).with_name("runs.tar.gz")
        if tar.is_file():
            return tar
    return None


def this_call(command: str, gpu: dict | None, sections: list[str], jobs: list[str], started: str) -> dict:
    """This call's entry in the record's ``calls`` (``gpu``: its device, None for a call that only merges;
    ``sections``: those it ran so far, benchmark.py adds each as it ends and the ones it did not start to
    ``not_started``)."""
    return {"command": command, "host": socket.gethostname(), "gpu": gpu.get("name") if gpu else None,
            "pci_bus_id": gpu.get("pci_bus_id") if gpu else None,
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"), "started": started, "ended": now(),
            "sections": list(sections), "not_started": [], "jobs": list(jobs), "code": machine.code_revision()}


def _gpu_label(call: dict, hosts: int) -> str:
    label = f"GPU {call.get('pci_bus_id') or '?'}"
    if call.get("cuda_visible_devices") is not None:
        label += f" (CUDA_VISIBLE_DEVICES={call['cuda_visible_devices']})"
    return label + (f" of {call.get('host') or '?'}" if hosts > 1 else "")


def _overlap(a: dict, b: dict) -> bool | None:
    if not all((a.get("started"), a.get("ended"), b.get("started"), b.get("ended"))):
        return None
    return a["started"] < b["ended"] and b["started"] < a["ended"]


def describe(calls: list[dict], runs: dict, info: dict) -> str | None:
    """Which call ran which sections and whose jobs' figures the record holds, on which GPU of which host, and
    whether the calls ran at the same time; None for a record of one call."""
    if len(calls) < 2:
        return None
    measured = [c for c in calls if c.get("gpu")]
    hosts = {c.get("host") for c in measured}
    gpus = {(c.get("host"), c.get("pci_bus_id")) for c in measured}
    if None in hosts or any(bus is None for _, bus in gpus):
        where = ""
    elif len(hosts) == 1:
        where = (f" on one GPU of {next(iter(hosts))}" if len(gpus) == 1
                 else f" on {len(gpus)} GPUs of one host ({next(iter(hosts))})")
    else:
        where = f" on {len(gpus)} GPUs of {len(hosts)} hosts"
    pairs = [_overlap(a, b) for i, a in enumerate(measured) for b in measured[i + 1:]]
    when = ("" if not pairs or None in pairs else ", at the same time" if all(pairs)
            else ", one after another" if not any(pairs) else ", partly at the same time")
    owner = job_owners(calls, runs)
    parts = []
    for i, call in enumerate(calls):
        if not call.get("gpu"):
            parts.append(f"merged by `{call['command']}`")
            continue
        mine = [job for job, k in owner.items() if k == i]
        jobs = ""
        if "jobs" in (call.get("sections") or ()):
            jobs = (f" (the figures of {len(mine)} job{'s' if len(mine) > 1 else ''} below"
                    + (f": {', '.join(mine)}" if len(mine) <= 6 else "") + ")" if mine
                    else " (none of its jobs' figures are below: a later call ran them again)")
        if call.get("not_started"):
            jobs += f" ({', '.join(call['not_started'])} not started: see the targets)"
        span = (f", {call['started'][11:16]}-{call['ended'][11:16]} UTC" if call.get("started") and call.get("ended")
                else "")
        parts.append(f"{_gpu_label(call, len(hosts))} ran {', '.join(call.get('sections') or ()) or 'no section'}"
                     f"{jobs}{span}: `{call['command']}`")
    text = f"Made by {len(calls)} calls{where}{when}: " + "; ".join(parts) + "."
    if len(gpus) > 1 and info.get("pci_bus_id"):
        text += (f" The clocks and telemetry below are GPU {info['pci_bus_id']}'s (the merged record holding most of "
                 "the jobs' figures).")
    return text
