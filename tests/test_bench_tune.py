"""scripts/bench_tune.py on the CPU: its figures (replay summary, trust verdict, winner changes), the
record it writes (whole or not at all), its bad arguments, and a small run end to end on fake workers
(ground truth, replay and trust of the reduce space; kernel_tuner skipped, saying so)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("bench_tune", ROOT / "scripts" / "bench_tune.py")
B = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(B)


def test_budget_is_a_tenth_of_the_measured_configurations():
    assert B.budget_of(282) == 29 and B.budget_of(200) == 20 and B.budget_of(3) == 1


def test_replay_summary_counts_the_seeds_at_95_percent_of_the_best():
    curves = [[0.5, 0.96, 1.0]] * 18 + [[0.5, 0.9, 0.94]] * 2  # 18 of 20 reach 95% by the second evaluation
    got = B.replay_summary(curves, 2)
    assert got == {"budget": 2, "median": 0.96, "hits": 18, "seeds": 20, "met": True}
    worse = B.replay_summary([[0.5, 0.96]] * 17 + [[0.5, 0.9]] * 3, 2)
    assert worse["hits"] == 17 and not worse["met"]
    assert B.replay_summary([[0.2, 0.4], [0.6, 0.8]], 1)["median"] == pytest.approx(0.4)  # even count: the mean of the middle two


def test_trust_same_winner_or_same_tie_set():
    assert B.trust_verdict([("a", [])] * 10)["stable"]
    tied = B.trust_verdict([("a", ["b"]), ("b", ["a"])] * 5)  # a tie named either way round is one answer
    assert tied["stable"] and tied["answer"] == ["a", "b"]
    split = B.trust_verdict([("a", [])] * 9 + [("b", [])])
    assert not split["stable"] and split["agree"] == 9 and split["distinct"] == 2
    assert not B.trust_verdict([("a", ["b"])] * 9 + [("a", [])])["stable"]  # a tie set that shrinks is another answer


def test_winner_changes_and_slugs():
    assert B.winner_changes(["x", "y", "x"]) == {"campaigns": 3, "distinct": 2, "counts": {"x": 2, "y": 1}}
    assert B.gpu_slug("NVIDIA H100 80GB HBM3") == "nvidia-h100-80gb-hbm3"


def test_a_record_is_written_whole_or_not_at_all(tmp_path):
    rec = {"device": "GPU", "commands": {"trust": "c"}, "trust": {"space": "s", "agree": 10, "campaigns": 10, "distinct": 1}}
    js, md = B.write_record(rec, tmp_path, "gpu")
    assert json.loads(js.read_text())["trust"]["agree"] == 10 and "| trust | s | 10/10 campaigns agree" in md.read_text()
    with pytest.raises(TypeError):
        B.write_record({**rec, "bad": object()}, tmp_path, "gpu")
    assert json.loads(js.read_text())["trust"]["agree"] == 10  # the last good record is untouched
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gpu-tune.json", "gpu-tune.md"]  # no temporary left


@pytest.mark.parametrize("args", [["--parts", "ground,nope"], ["--spaces", "copy"], ["--trials", "0"], ["--share", "0"]])
def test_bad_arguments_exit_2_in_one_line(args, tmp_path, capsys):
    assert B.main([*args, "--out", str(tmp_path), "--gpu", "x"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "bench_tune:" in err


def test_small_run_end_to_end_on_fake_workers(fake_workers, tmp_path, capsys):
    pytest.importorskip("optuna")
    fake_workers({"_ms": "1 + abs(UNROLL - 5) / 10 + abs(threads - 256) / 1000"})  # best: UNROLL=5, block 256
    argv = ["--parts", "ground,replay,trust,kt", "--spaces", "reduce-modern", "--trials", "40", "--seeds", "3",
            "--repeats", "2", "--trust-trials", "16", "--share", "0.5", "--build-ahead", "0", "--gpu", "Fake GPU", "--out", str(tmp_path)]
    assert B.main(argv) == 0
    rec = json.loads((tmp_path / "fake-gpu-tune.json").read_text())
    g = rec["ground"]["reduce-modern"]
    assert g["measured"] == g["passed"] == 40 and (tmp_path / "tune" / "fake-gpu" / "reduce-modern.db").is_file()
    assert set(rec["replay"]["reduce-modern"]) == {"tpe", "gp", "random"}
    assert rec["replay"]["reduce-modern"]["random"]["budget"] == 20
    assert rec["trust"]["stable"] and rec["trust"]["campaigns"] == 2, rec["trust"]
    assert "no --kernel-tuner" in rec["kt"]["skipped"]
    out = capsys.readouterr().out
    assert out.rstrip().splitlines()[-1].startswith("kt") and "40 measured" in out
    # the replay again, on the CPU, from the saved campaign: the GPU parts' figures stay in the record
    assert B.main(["--parts", "replay", "--spaces", "reduce-modern", "--seeds", "2", "--strategies", "random",
                   "--gpu", "Fake GPU", "--out", str(tmp_path)]) == 0
    again = json.loads((tmp_path / "fake-gpu-tune.json").read_text())
    assert again["ground"] == rec["ground"] and again["trust"] == rec["trust"]
    assert set(again["replay"]["reduce-modern"]) == {"random"}
    assert set(again["commands"]) == {"ground reduce-modern", "replay reduce-modern", "trust", "kt"}
    assert again["commands"]["replay reduce-modern"].endswith("--strategies random --gpu Fake GPU --out " + str(tmp_path))


def test_a_run_stopped_after_a_part_keeps_that_part(fake_workers, tmp_path, monkeypatch):
    """A GPU call's time limit stops the script mid-run: every part finished before is in the record,
    with its command; the stopped part has neither. A later call's space adds to the earlier ones."""
    pytest.importorskip("optuna")
    fake_workers({"_ms": "1 + abs(UNROLL - 5) / 10"})

    def stopped(*a, **k):
        raise KeyboardInterrupt  # what the stage's kill looks like from the record's side: no return

    monkeypatch.setattr(B, "trust", stopped)
    argv = ["--parts", "ground,trust", "--spaces", "reduce-modern", "--trials", "8", "--build-ahead", "0",
            "--gpu", "Fake GPU", "--out", str(tmp_path)]
    with pytest.raises(KeyboardInterrupt):
        B.main(argv)
    rec = json.loads((tmp_path / "fake-gpu-tune.json").read_text())
    assert rec["ground"]["reduce-modern"]["measured"] == 8 and "trust" not in rec
    assert set(rec["commands"]) == {"ground reduce-modern"}
    assert "- trust:" not in (tmp_path / "fake-gpu-tune.md").read_text()
    fake_workers({"_ms": "1 + abs(threads - 256) / 1000"})
    assert B.main(["--parts", "ground", "--spaces", "transpose-tiled", "--trials", "4", "--build-ahead", "0",
                   "--gpu", "Fake GPU", "--out", str(tmp_path)]) == 0
    again = json.loads((tmp_path / "fake-gpu-tune.json").read_text())
    assert set(again["ground"]) == {"reduce-modern", "transpose-tiled"}
    # each ground truth keeps the command that measured it, not the last call's
    assert "--trials 8" in again["commands"]["ground reduce-modern"]
    assert "--trials 4" in again["commands"]["ground transpose-tiled"]


def test_the_kernel_tuner_part_keeps_each_campaign_as_it_ends(fake_workers, tmp_path, monkeypatch):
    """kernel_tuner (a fake here) beside cudalab: cudalab's cold and warm campaigns first, then each kernel_tuner
    campaign written into the record as it ends, so a call's time limit keeps the finished ones; the first
    campaign is reported as the cold one."""
    pytest.importorskip("optuna")
    fake_workers({"_ms": "1 + abs(threads - 256) / 1000"})
    kt = tmp_path / "kt" / "kernel_tuner"
    kt.mkdir(parents=True)
    (kt / "__init__.py").write_text("__version__ = '1.5'\n")
    walls = iter([30.0, 10.0, 12.0, 11.0])
    monkeypatch.setattr(B, "_transpose_kt", lambda kt, n: ("block=64x8 STREAM=0 TS_LDHINT=0", next(walls)))
    real = B.write_record
    seen = []

    def spy(record, out, gpu):
        seen.append(json.loads(json.dumps(record.get("kt", {}))))
        return real(record, out, gpu)

    monkeypatch.setattr(B, "write_record", spy)
    monkeypatch.setattr(B, "TUNE_KW", {**B.TUNE_KW, "trials": 6})
    assert B.main(["--parts", "kt", "--kernel-tuner", str(tmp_path / "kt"), "--repeats", "4", "--build-ahead", "0",
                   "--gpu", "Fake GPU", "--out", str(tmp_path)]) == 0
    rec = json.loads((tmp_path / "fake-gpu-tune.json").read_text())["kt"]
    assert rec["winners"] == {"campaigns": 4, "distinct": 1, "counts": {"block=64x8 STREAM=0 TS_LDHINT=0": 4}}
    assert rec["kt_cold_s"] == 30.0 and rec["kt_warm_s"] == 11.0 and rec["cudalab_cold_s"] > 0
    # written after cudalab's campaigns and after each kernel_tuner campaign
    assert [len(k.get("walls_s", [])) for k in seen[:5]] == [0, 1, 2, 3, 4]
    md = (tmp_path / "fake-gpu-tune.md").read_text()
    assert "1 winners in 4 campaigns (of 4), first (cold) 30 s, warm 11 s" in md


def test_records_of_two_calls_at_once_merge_part_by_part_with_their_commands(tmp_path, capsys):
    """Trust on one GPU and kernel_tuner on the other, each call writing its own record: --merge adds both to
    the GPU's record with each part's command; a record of another GPU is refused in one line, nothing written."""
    base = {"device": "NVIDIA H200", "ground": {"a": {"measured": 2, "passed": 2, "best_ms": 1.0, "wall_s": 3}},
            "commands": {"ground a": "cmd-a"}}
    B.write_record(base, tmp_path, "nvidia-h200")
    trust = {"device": "NVIDIA H200", "command": "cmd-trust", "commands": {"trust": "cmd-trust"},
             "trust": {"space": "s", "agree": 10, "campaigns": 10, "distinct": 1}}
    kt = {"device": "NVIDIA H200", "command": "cmd-kt", "commands": {"kt": "cmd-kt"},
          "kt": {"skipped": "x"}, "ground": {"b": {"measured": 1, "passed": 1, "best_ms": 2.0, "wall_s": 1}}}
    files = []
    for i, r in enumerate((trust, kt)):
        files.append(tmp_path / f"r{i}.json")
        files[-1].write_text(json.dumps(r))
    assert B.main(["--parts", "none", "--merge", str(files[0]), "--merge", str(files[1]), "--gpu", "NVIDIA H200",
                   "--out", str(tmp_path)]) == 0
    rec = json.loads((tmp_path / "nvidia-h200-tune.json").read_text())
    assert set(rec["ground"]) == {"a", "b"} and rec["trust"]["agree"] == 10 and rec["kt"] == {"skipped": "x"}
    assert rec["commands"] == {"ground a": "cmd-a", "ground b": "cmd-kt", "trust": "cmd-trust", "kt": "cmd-kt"}
    other = tmp_path / "h100.json"
    other.write_text(json.dumps({**trust, "device": "NVIDIA H100"}))
    before = (tmp_path / "nvidia-h200-tune.json").read_text()
    capsys.readouterr()
    assert B.main(["--parts", "none", "--merge", str(other), "--gpu", "NVIDIA H200", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "H100" in err
    assert (tmp_path / "nvidia-h200-tune.json").read_text() == before


def test_the_code_revision_names_a_checkout_that_differs_from_head(tmp_path, monkeypatch):
    """A GPU machine's checkout is a session's working tree over its first commit: the record must not name
    that commit alone as the code that ran."""
    import subprocess

    from cudalab.records import machine

    def git(*a):
        subprocess.run(["git", "-C", str(tmp_path), *a], check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / "cudalab").mkdir()
    (tmp_path / "cudalab" / "x.py").write_text("a = 1\n")
    (tmp_path / "notes.md").write_text("n\n")
    git("add", "-A")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "c")
    clean = machine.code_revision(tmp_path)
    assert len(clean) == 12 and "+" not in clean
    (tmp_path / "notes.md").write_text("changed\n")   # not code: still clean
    assert machine.code_revision(tmp_path) == clean
    (tmp_path / "cudalab" / "new.py").write_text("b = 1\n")   # a module not committed yet travels too
    assert machine.code_revision(tmp_path) == clean + "+dirty"
    (tmp_path / "cudalab" / "new.py").unlink()
    (tmp_path / "cudalab" / "x.py").write_text("a = 2\n")
    assert machine.code_revision(tmp_path) == clean + "+dirty"
    assert machine.code_revision(tmp_path / "nowhere") == ""
    monkeypatch.setenv("CUDALAB_CODE", "3fec7d1")   # the GPU call's command names the committed tree it sent
    assert machine.code_revision(tmp_path) == "3fec7d1"


def test_kernel_tuner_campaigns_of_several_calls_join_into_one_count():
    """10 campaigns made 2 at a time: --merge joins the kt parts (winners counted over all, each call kept, the
    same call merged twice counted once), not the last call's part alone."""
    def call(walls, winners, cudalab):
        return {"version": "1.5.0", "asked": len(walls), "walls_s": walls, "wall_s": sum(walls) / len(walls),
                "kt_cold_s": walls[0], "kt_warm_s": walls[1], "cudalab_cold_s": cudalab, "cudalab_warm_s": cudalab / 2,
                "winners": B.winner_changes(winners)}
    first = call([238.0, 174.0], ["a", "b"], 35.0)
    second = call([240.0, 170.0], ["a", "a"], 37.0)
    third = call([236.0, 180.0], ["c", "a"], 33.0)
    rec = {"device": "NVIDIA H200", "kt": first}
    for other in (second, third, second):
        assert B.merge_into(rec, {"device": "NVIDIA H200", "kt": other}) == ["kt"]
    k = rec["kt"]
    assert k["winners"] == {"campaigns": 6, "distinct": 3, "counts": {"a": 4, "b": 1, "c": 1}}
    assert len(k["calls"]) == 3 and "asked" not in k
    assert k["kt_cold_s"] == 238.0 and k["kt_warm_s"] == 174.0 and k["cudalab_cold_s"] == 35.0
    [(_, _, line)] = [r for r in B.summary_rows(rec) if r[1] == "kernel_tuner"]
    assert line == ("3 winners in 6 campaigns in 3 calls, cold (each call's first, median) 238 s, "
                    "warm (median) 174 s; won: a 4, b 1, c 1")
    skipped = {"device": "NVIDIA H200", "kt": {"skipped": "no kernel_tuner"}}
    B.merge_into(rec, skipped)
    assert rec["kt"]["winners"]["campaigns"] == 6   # a call that did not run adds nothing


def test_kt_alone_runs_kernel_tuner_without_cudalabs_campaigns(tmp_path, monkeypatch):
    """--kt-alone: more kernel_tuner campaigns for the winner count, no cudalab campaign (no worker is started:
    without fake workers one would fail)."""
    kt = tmp_path / "kt" / "kernel_tuner"
    kt.mkdir(parents=True)
    (kt / "__init__.py").write_text("__version__ = '1.5'\n")
    walls = iter([30.0, 10.0])
    monkeypatch.setattr(B, "_transpose_kt", lambda kt, n: ("block=64x8 STREAM=0 TS_LDHINT=0", next(walls)))
    import cudalab

    monkeypatch.setattr(cudalab, "tune", lambda *a, **k: pytest.fail("cudalab's campaign ran"))
    assert B.main(["--parts", "kt", "--kt-alone", "--kernel-tuner", str(tmp_path / "kt"), "--kt-repeats", "2",
                   "--gpu", "Fake GPU", "--out", str(tmp_path)]) == 0
    rec = json.loads((tmp_path / "fake-gpu-tune.json").read_text())["kt"]
    assert rec["walls_s"] == [30.0, 10.0] and "cudalab_cold_s" not in rec
