"""One benchmark record from two GPUs at once (scripts/benchmark.py --merge A --merge B, --sections none;
scripts/bench_merge.py): benchmark.main with its GPU work faked, as gpu-check.sh's bench-lanes calls it."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import pytest

from test_bench_record import _fake_calls

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"
BUS = {"0": "0000:19:00.0", "1": "0000:3B:00.0"}
H200 = "nvidia-h200.json"


@pytest.fixture()
def bench(monkeypatch):
    """scripts/benchmark.py as a module (its imports need no GPU)."""
    monkeypatch.syspath_prepend(str(SCRIPTS))
    return importlib.import_module("benchmark")


def _lanes(monkeypatch, bench, names=("NVIDIA H200", "NVIDIA H200")):
    """The fakes of test_bench_record, each call on the GPU its CUDA_VISIBLE_DEVICES names (GPU i a GPU of
    model ``names[i]``); a job's seconds say which GPU ran it; the saved section leaves its runs.tar.gz."""
    ran, calls = _fake_calls(monkeypatch, bench)
    fake = bench.run_jobs

    def on_its_gpu(jobs, budget):
        lane = bench.os.environ["CUDA_VISIBLE_DEVICES"]
        runs, info = fake(jobs, budget)
        for job, fam, _ in jobs:   # the jobs the fake has no figures for: failed, as a job that raised
            runs.setdefault(job, {"family": fam, "request": {}, "error": "RuntimeError: fake", "trace": ""})
            runs[job]["seconds"] = 10.0 + int(lane)
        return runs, {**info, "name": names[int(lane)], "pci_bus_id": BUS[lane], "cupy": "14.2.0"}

    monkeypatch.setattr(bench, "run_jobs", on_its_gpu)
    monkeypatch.setattr(bench.S, "saved_runs", lambda slug, out: (out / "runs.tar.gz").write_bytes(b"lane 1")
                        and [f"{slug}-copy.json"])
    return ran, calls


def _call(monkeypatch, bench, *argv, gpu=None):
    if gpu is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", gpu)
    monkeypatch.setattr(sys, "argv", ["benchmark.py", *map(str, argv)])
    return bench.main()


def _two_lanes(monkeypatch, bench, tmp_path, **kw):
    ran, calls = _lanes(monkeypatch, bench, **kw)
    b0, b1 = tmp_path / "b0", tmp_path / "b1"
    assert _call(monkeypatch, bench, "--out", b0, "--sections", "jobs,large", "--only", "transpose,hgemm", gpu="0") == 0
    assert _call(monkeypatch, bench, "--out", b1, "--sections", "jobs,wall,saved,ncu,energy,truth,table36,ceiling",
                 "--only", "transpose", gpu="1") == 0
    return ran, calls, b0, b1


def test_two_gpus_at_once_make_one_record_that_says_which_gpu_ran_what(monkeypatch, bench, tmp_path):
    ran, calls, b0, b1 = _two_lanes(monkeypatch, bench, tmp_path)
    (b0 / "runs.tar.gz").write_bytes(b"stale")      # a tar beside a record that saved no runs is not its own
    assert calls[-2:] == [("truth", ["transpose 16384²"]), "ceiling"]  # lane 1's sections read its own job
    out = tmp_path / "bench"
    # lane 1 first: the tar comes with the record that lists the saved runs, not with the last record
    assert _call(monkeypatch, bench, "--sections", "none", "--merge", f"{b1},{b0}", "--out", out) == 0
    assert len(ran) == 2                              # the merge opened no GPU
    assert (out / "runs.tar.gz").read_bytes() == b"lane 1"
    assert _call(monkeypatch, bench, "--sections", "none", "--merge", b0, "--merge", b1, "--out", out) == 0
    rec = json.loads((out / H200).read_text())
    lane0 = ("CUDA_VISIBLE_DEVICES=0 python3 scripts/benchmark.py --out docs/benchmarks --only transpose,hgemm "
             "--sections jobs,large")
    lane1 = ("CUDA_VISIBLE_DEVICES=1 python3 scripts/benchmark.py --out docs/benchmarks --only transpose --sections "
             "jobs,wall,saved,ncu,energy,truth,table36,ceiling")
    merge = "python3 scripts/benchmark.py --out docs/benchmarks --sections none --merge EARLIER1 --merge EARLIER2"
    assert rec["command"] == f"{lane0}; {lane1}, then {merge}"
    c0, c1, c2 = rec["calls"]
    assert (c0["command"], c0["cuda_visible_devices"], c0["pci_bus_id"], c0["sections"]) == \
        (lane0, "0", BUS["0"], ["jobs", "large"])
    assert (c1["command"], c1["cuda_visible_devices"], c1["pci_bus_id"], c1["jobs"], c1["not_started"]) == \
        (lane1, "1", BUS["1"], ["transpose 16384²"], ["table36"])
    assert c1["sections"] == ["jobs", "wall", "saved", "ncu", "energy", "truth", "ceiling"]
    assert (c2["command"], c2["gpu"], c2["sections"]) == (merge, None, [])
    assert c0["host"] == c1["host"] and c0["started"] <= c0["ended"]
    # every section from the lane that ran it; a job run by both lanes: the later --merge's (the one its sections read)
    assert {"large", "time_to_table", "energy", "timing_truth", "ceiling"} <= set(rec)
    assert rec["table36"]["skipped"].startswith("not started: it reads the job reduce 2^24 int32")
    assert {job: run["seconds"] for job, run in rec["runs"].items()} == {
        "transpose 16384²": 11.0, "hgemm 8192³ bf16": 10.0, "hgemm 8192³ fp16": 10.0, "hgemm 4096³ bf16": 10.0,
        "hgemm 4096³ fp16": 10.0}
    assert rec["device"]["pci_bus_id"] == BUS["0"]   # the telemetry of the GPU whose jobs are most of the record
    assert (out / "runs.tar.gz").read_bytes() == b"lane 1"
    md = (out / "nvidia-h200.md").read_text()
    assert rec["cupy"] == "14.2.0" and "CuPy 14.2.0." in md   # the GPU calls' CuPy, not the merging process's
    made = next(ln for ln in md.splitlines() if ln.startswith("Made by"))
    assert made.startswith(f"Made by 3 calls on 2 GPUs of one host ({c0['host']})")
    assert (f"GPU {BUS['0']} (CUDA_VISIBLE_DEVICES=0) ran jobs, large (the figures of 4 jobs below: hgemm 8192³ bf16, "
            "hgemm 8192³ fp16, hgemm 4096³ bf16, hgemm 4096³ fp16)") in made
    assert (f"GPU {BUS['1']} (CUDA_VISIBLE_DEVICES=1) ran jobs, wall, saved, ncu, energy, truth, ceiling "
            "(the figures of 1 job below: transpose 16384²) (table36 not started: see the targets)") in made
    assert f"`{lane0}`" in made and f"`{lane1}`" in made and made.endswith(
        f"merged by `{merge}`. The clocks and telemetry below are GPU {BUS['0']}'s (the merged record holding most of "
        "the jobs' figures).")


def test_merging_two_gpu_models_is_refused_in_one_line(monkeypatch, bench, tmp_path, capsys):
    _, _, b0, b1 = _two_lanes(monkeypatch, bench, tmp_path, names=("NVIDIA H200", "NVIDIA H100 80GB HBM3"))
    capsys.readouterr()
    out = tmp_path / "bench"
    with pytest.raises(SystemExit) as exc:
        _call(monkeypatch, bench, "--sections", "none", "--merge", b0, "--merge", b1, "--out", out)
    assert exc.value.code == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line == (f"benchmark.py: --merge {b1 / 'nvidia-h100-80gb-hbm3.json'}: a record of 'NVIDIA H100 80GB HBM3', "
                    f"{b0 / H200} is of 'NVIDIA H200'; one record is of one GPU model")
    assert not out.exists()


def test_a_merge_without_records_or_with_an_unclear_folder_is_refused(monkeypatch, bench, tmp_path, capsys):
    _lanes(monkeypatch, bench)
    with pytest.raises(SystemExit) as exc:
        _call(monkeypatch, bench, "--sections", "none", "--out", tmp_path)
    assert exc.value.code == 2
    assert capsys.readouterr().err == ("benchmark.py: --sections none runs nothing: name the records to merge "
                                       "(--merge A --merge B)\n")
    two = tmp_path / "two"
    two.mkdir()
    for name in ("a.json", "b.json"):
        (two / name).write_text("{}")
    with pytest.raises(SystemExit) as exc:
        _call(monkeypatch, bench, "--sections", "none", "--merge", two, "--out", tmp_path / "o")
    assert exc.value.code == 2
    assert capsys.readouterr().err.endswith("a folder with 2 .json files; name the record's .json\n")


def test_a_later_record_replaces_sections_but_never_figures_with_not_run(bench):
    M = bench.M
    skipped = {"skipped": "not started: ...", "section": "large"}
    walls, profile = [{"command": "cudalab list"}], [{"command": "cudalab list", "why": "slowest"}]
    got = M.merge_extra({"large": [{"n": 1}], "time_to_table": [{"old": 1}], "time_profile": [{"old": 1}]},
                        {"large": skipped, "time_to_table": walls, "ncu_walls": skipped})
    assert got == {"large": [{"n": 1}], "time_to_table": walls, "ncu_walls": skipped}   # the old profile went too
    assert M.merge_extra({"large": skipped}, {"large": [{"n": 2}]}) == {"large": [{"n": 2}]}
    assert M.merge_extra({}, {"time_to_table": walls, "time_profile": profile})["time_profile"] == profile


def _c(bus, start, end, host="h", sections=("jobs",), jobs=("a",)):
    return {"command": f"c{bus}", "host": host, "gpu": "G", "pci_bus_id": bus, "cuda_visible_devices": None,
            "started": f"2026-12-01T10:{start}:00+00:00", "ended": f"2026-12-01T10:{end}:00+00:00",
            "sections": list(sections), "jobs": list(jobs)}


def test_the_record_says_whether_its_calls_ran_at_the_same_time_and_where(bench):
    describe = bench.M.describe
    runs, info = {"a": {}}, {"pci_bus_id": "B"}
    assert describe([_c("A", "00", "09")], runs, info) is None            # one call: the header says it all
    assert describe([_c("A", "00", "09"), _c("B", "01", "08")], runs, info).startswith(
        "Made by 2 calls on 2 GPUs of one host (h), at the same time: GPU A ran jobs (none of its jobs' figures are "
        "below: a later call ran them again), 10:00-10:09 UTC: `cA`; GPU B ran jobs (the figures of 1 job below: a)")
    assert ", one after another:" in describe([_c("A", "00", "09"), _c("A", "10", "19")], runs, info)
    assert describe([_c("A", "00", "09"), _c("A", "10", "19")], runs, info).startswith("Made by 2 calls on one GPU of h")
    assert describe([_c("A", "00", "09"), _c("A", "10", "19", host="g")], runs, info).startswith(
        "Made by 2 calls on 2 GPUs of 2 hosts, one after another: GPU A of h ran")
    three = [_c("A", "00", "09"), _c("B", "05", "12"), _c("C", "10", "19")]
    assert ", partly at the same time:" in describe(three, runs, info)
