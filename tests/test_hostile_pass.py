"""What the hostile pass of issue 57 (``scripts/hostile_pass.py``) found, by the rule that fixes it (CPU only):
kernel_tuner caches are read by cudalab's JSON rule and hold no time that is not positive; a replay asks no more
than it can answer and writes no file; Ctrl-C while cudalab starts up is one line; the Python API's wrong
types are one UsageError."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import cudalab
from cudalab.errors import UsageError
from cudalab.tuning import interchange as KT

CACHE = Path(__file__).parent / "data" / "kt" / "axpy-cache.json"


def _kt(tmp_path: Path, mutate) -> Path:
    data = json.loads(CACHE.read_text().rstrip().rstrip(",") + "}}")
    mutate(data)
    out = tmp_path / "cache.json"
    out.write_text(json.dumps(data))
    return out


@pytest.mark.parametrize("value", [-1, 0, -0.5])
def test_a_kernel_tuner_time_that_is_not_positive_is_no_measurement(tmp_path, value):
    path = _kt(tmp_path, lambda d: [e.update(time=value) for e in d["cache"].values()])
    assert all(v is None for v in KT.load_kt_cache(path)[1].values())


def test_a_kernel_tuner_cache_nested_too_deep_is_one_usage_error(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text("[" * 100000 + "]" * 100000)
    with pytest.raises(UsageError, match="nested"):
        KT.load_kt_cache(path)


def test_a_replay_asks_no_more_trials_than_configurations_measured(tmp_path, invoke):
    path = _kt(tmp_path, lambda d: None)
    res = invoke("tune", "--replay", str(path), "--seeds", "1", "--trials", "10000000000", "--strategy", "random")
    assert res.exit_code == 0, res.output
    assert "N=15" in res.output and "N=10000000000" not in res.output


def test_replay_seeds_past_the_limit_are_one_line(tmp_path, invoke):
    res = invoke("tune", "--replay", str(_kt(tmp_path, lambda d: None)), "--seeds", "1000000000")
    assert res.exit_code == 2 and "--seeds" in res.output and len(res.output.strip().splitlines()) == 1


@pytest.mark.parametrize("flag", ["--json", "--plot", "--header"])
def test_a_replay_refuses_an_output_it_would_not_write(tmp_path, invoke, flag):
    path = _kt(tmp_path, lambda d: None)
    out = tmp_path / ("x.svg" if flag == "--plot" else "x.h" if flag == "--header" else "x.json")
    res = invoke("tune", "--replay", str(path), "--seeds", "1", "--trials", "2", flag, str(out))
    assert res.exit_code == 2 and flag in res.output, res.output
    assert not out.exists()


@pytest.mark.parametrize("call", [
    lambda: cudalab.run(None), lambda: cudalab.run(5), lambda: cudalab.run("copy", budget="x"),
    lambda: cudalab.run("copy", devices=5), lambda: cudalab.run("copy", defines=[1]),
    lambda: cudalab.run("copy", variants=3), lambda: cudalab.run("copy", seed="1"),
    lambda: cudalab.run("copy", min_samples=2.5), lambda: cudalab.run("copy", timeout="1"),
    lambda: cudalab.tune_kernel("axpy", "k.cu", 1024, [], {"block_size_x": [32]}, restrictions=5),
])
def test_a_wrong_type_to_the_api_is_one_usage_error(call):
    with pytest.raises(UsageError) as got:
        call()
    assert "\n" not in str(got.value)


def test_ctrl_c_while_cudalab_starts_is_one_line(monkeypatch, capsys):
    from cudalab import main as entry
    from cudalab.execute.local import process

    def interrupted(argv):
        raise KeyboardInterrupt

    monkeypatch.setattr(process, "prestart", interrupted)
    monkeypatch.setattr("sys.argv", ["cudalab", "list"])
    with pytest.raises(SystemExit) as got:
        entry.main()
    err = capsys.readouterr().err
    assert got.value.code == 130 and err.count("\n") == 1 and "interrupted" in err


def test_a_local_cluster_interrupted_while_it_starts_is_not_left_to_dasks_exit_hook(monkeypatch):
    distributed = pytest.importorskip("distributed")
    import weakref

    from cudalab.execute.dask import localcluster as C

    class Half:
        _instances: weakref.WeakSet = weakref.WeakSet()
        closed = False

        def __init__(self, **kw):
            Half._instances.add(self)
            Half.made = self
            raise KeyboardInterrupt

        def close(self, timeout=None):
            self.closed = True

    monkeypatch.setattr(distributed, "SpecCluster", Half)
    with pytest.raises(KeyboardInterrupt):
        C.local_cluster([0])
    assert Half.made.closed and Half.made not in Half._instances


@pytest.mark.parametrize("argv", [["report", "{run}", "--plot", "{tmp}/r.png/"],
                                  ["roofline", "{run}", "-o", "{tmp}/r.svg/"],
                                  ["compare", "{run}", "{run}", "--plot", "{tmp}/r.png/"]])
def test_an_output_named_with_a_trailing_slash_is_refused(tmp_path, invoke, argv):
    run = Path(__file__).parent / "data" / "runs" / "nvidia-h200-transpose.json"
    res = invoke([a.format(run=run, tmp=tmp_path) for a in argv])
    assert res.exit_code == 2 and "ends in '/'" in res.output, res.output
    assert list(tmp_path.iterdir()) == []
