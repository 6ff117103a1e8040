"""``--cluster``: tune campaigns and sweeps on a Dask cluster of fake GPU workers (CPU, CI).

Each Dask worker is a real process of a ``LocalCluster``-style cluster (a Nanny's); its cudalab GPU worker
is :mod:`fake_worker_main` (``tests/fake_dask_preload.py`` swaps it in through Dask's own preload setting),
so a trial takes a known time (``_delay``), hangs, or dies on cue. No timing is asserted here:
``scripts/bench_cluster.py`` measures the throughput.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

import cudalab
from cudalab.errors import ClusterError

# Not imported at collection: importing Dask reads every package's entry points, which test_discovery
# checks cudalab does not make happen.
pytestmark = pytest.mark.skipif(importlib.util.find_spec("distributed") is None or importlib.util.find_spec("optuna")
                                is None, reason="needs the cluster and tune extras (dask[distributed], optuna)")

TESTS = str(Path(__file__).parent)
MS = "1 + abs(UNROLL - 5) / 10 + abs(threads - 256) / 1000"  # best: UNROLL=5, block 256
SPACE = dict(n="1k", defines={"UNROLL": "1..8"}, block="64..1024:pow2", require=["threads * UNROLL <= 4096"])


@pytest.fixture
def dask_fake(monkeypatch, tmp_path):
    """``use(behaviour)``: Dask workers started from now on run fake GPU workers acting on ``behaviour``;
    ``use.points()`` counts the points they were sent."""
    import dask
    import distributed  # noqa: F401  (its config defaults, before the preload is set)

    log = tmp_path / "ops.log"
    monkeypatch.setenv("PYTHONPATH", TESTS + os.pathsep + os.environ.get("PYTHONPATH", ""))
    monkeypatch.setenv("FAKE_WORKER_LOG", str(log))

    def use(behaviour=None):
        monkeypatch.setenv("FAKE_WORKER", json.dumps({"_ms": MS, **(behaviour or {})}))
        return use

    use.points = lambda: log.read_text().split().count("point") if log.exists() else 0
    with dask.config.set({"distributed.worker.preload": ["fake_dask_preload"],
                          "distributed.scheduler.worker-ttl": None}):
        yield use


def tune(storage, **kw):
    args = {**SPACE, "seed": 1, "build_ahead": 0, "storage": f"sqlite:///{storage}", "cluster": "local",
            "devices": "0,1,2,3", **kw}
    return cudalab.tune("copy", "vec4", **args)


def once_each(res) -> list:
    """The measured trials, checking that no configuration was recorded twice."""
    done = [m for m in res.trials if m.status != "interrupted"]
    keys = Counter(json.dumps(m.point, sort_keys=True) for m in done)
    assert max(keys.values()) == 1, keys.most_common(3)
    return done


def test_a_grid_campaign_on_four_gpus_records_every_trial_once_on_every_worker(dask_fake, tmp_path):
    dask_fake({"_delay": 0.05})
    flying = []
    res = tune(tmp_path / "c.db", strategy="grid", race=2,
               on_event=lambda what, d: flying.append(d["in_flight"]) if what == "trial" else None)
    assert max(flying) == 2 * 4 - 1  # two trials per GPU worker, no more: one running, one waiting on it
    done = once_each(res)
    passed = [m for m in done if m.status == "passed"]
    assert len(passed) == 36 and res.winner == "UNROLL=5 block=256"
    assert {m.attrs["device"] for m in passed} == {0, 1, 2, 3}  # every GPU worker ran trials
    assert all(m.attrs["gpu"] == "Fake GPU 0" and m.attrs["host"] for m in passed)
    assert res.record.device.get("cluster") == "local" and len(res.record.device["devices"]) == 4


def test_a_worker_killed_mid_campaign_and_every_trial_is_recorded_once(dask_fake, tmp_path, monkeypatch):
    dask_fake({"_delay": 0.3})
    busy = tmp_path / "busy"   # the fake workers' pids while a trial sleeps in them (tests/fake_worker_main.py)
    busy.mkdir()
    monkeypatch.setenv("FAKE_WORKER_BUSY", str(busy))
    killed = []

    def parent(pid: int) -> int:
        return int(Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[1])

    def ours(pid: int) -> bool:
        """Whether ``pid`` descends from this test's process (another test's fake workers run beside it under
        xdist: killing their parent killed a pytest worker once)."""
        while pid > 1:
            if pid == os.getpid():
                return True
            pid = parent(pid)
        return False

    def on_event(what, d):
        if what == "trial" and d["done"] == 4 and not killed:
            # a Dask worker of this test's cluster whose GPU worker is inside a trial now (under load a worker can
            # be between trials at any given moment: killing one then proves nothing about a trial in flight)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                out = subprocess.run(["pgrep", "-f", "fake_worker_main"], capture_output=True, text=True).stdout.split()
                mine = {int(p) for p in out if ours(int(p)) and parent(int(p)) != os.getpid()}
                inside = []
                for f in busy.iterdir():
                    try:
                        if int(f.name) in mine:
                            inside.append((f.stat().st_mtime, int(f.name)))
                    except FileNotFoundError:  # that trial ended while we looked
                        pass
                inside.sort()
                if inside:
                    dask_worker = parent(inside[-1][1])
                    os.kill(dask_worker, signal.SIGKILL)
                    killed.append(dask_worker)
                    return
                time.sleep(0.01)

    res = cudalab.tune("copy", "vec4", **{**SPACE, "seed": 1, "build_ahead": 0, "cluster": "local",
                                          "devices": "0,1", "storage": f"sqlite:///{tmp_path / 'k.db'}",
                                          "strategy": "grid", "race": 0, "on_event": on_event})
    assert killed
    done = once_each(res)
    assert [(m.status, m.reason) for m in done if m.status not in ("passed", "refused")] == []
    assert len([m for m in done if m.status == "passed"]) == 36 and res.exit_code == 0
    assert dask_fake.points() > 36  # the killed worker's trial in flight ran again elsewhere


def test_a_cluster_campaigns_time_account_says_where_its_wall_went(dask_fake, tmp_path):
    """On a cluster the account is the driver's clock too: waiting for the cluster is the trials' time, the rest
    the search's, and the trials' own seconds in the workers are summed beside them (it said 'trials in the
    worker 0.6 s' of 96.8 on an H200: the cluster loop added nothing)."""
    dask_fake({"_delay": 0.2})
    res = tune(tmp_path / "a.db", strategy="grid", race=0, defines={"UNROLL": "1..5"}, block="256", devices="0")
    t = res.time_account
    assert t["in_workers"] >= 5 * 0.2 and t["trials"] >= 4 * 0.2, t  # one GPU: the driver waits on 4 of them at least
    assert t["trials"] + t["builds"] + t["search"] + t["race"] <= t["wall"] + 0.01


def test_a_walks_short_trials_go_several_a_task_and_a_models_one_a_task(dask_fake, tmp_path, monkeypatch):
    """A Dask task costs milliseconds on three processes: a walk's trials of 50 ms go to the cluster several a
    task once the first results say how long one takes (a walk learns nothing from them); a model-based
    strategy's one a task, so it is told each result as it comes."""
    from cudalab.tuning import runs as R

    sizes: list[tuple[str, int]] = []
    real = R.Runs.submit
    monkeypatch.setattr(R.Runs, "submit", lambda self, pts: sizes.append((strategy, len(pts))) or real(self, pts))
    dask_fake({"_delay": 0.05})
    for strategy in ("grid", "tpe"):
        res = tune(tmp_path / f"{strategy}.db", strategy=strategy, race=0, trials=16, devices="0")
        assert len([m for m in once_each(res) if m.status == "passed"]) == 16
    assert max(n for s, n in sizes if s == "grid") > 1 and sum(n for s, n in sizes if s == "grid") == 16
    assert {n for s, n in sizes if s == "tpe"} == {1}


def test_a_hanging_kernel_is_a_timeout_trial(dask_fake, tmp_path):
    dask_fake({"vec4#UNROLL=5": "hang"})
    res = tune(tmp_path / "h.db", strategy="grid", race=0, timeout=1.0, defines={"UNROLL": "3..7"}, block="256",
               devices="0,1")
    status = {m.point["UNROLL"]: (m.status, m.reason) for m in once_each(res)}
    assert status["5"][0] == "timeout" and "did not finish" in status["5"][1]
    assert [status[u][0] for u in "3467"] == ["passed"] * 4


@pytest.mark.parametrize("lib", ["pass", "die"])
def test_a_flops_campaign_on_the_cluster_measures_its_library_row_once(lib, dask_fake, monkeypatch, tmp_path):
    """The "% of cublas" column's row runs on the cluster as a racing round does (one task); one that dies
    leaves the column empty and the campaign's verdict and exit code as they were."""
    monkeypatch.setenv("FAKE_BUILD", "fail")  # no nvcc for matmul's prebuilds (a failed prebuild is only a line)
    monkeypatch.setenv("FAKE_WORKER_ROWS", str(tmp_path / "rows.log"))
    dask_fake({"_ms": "0.5 if variant == 'cublas' else 1 + abs(WT_BK - 16) / 100", "cublas": lib})
    res = cudalab.tune("matmul", "warptile", trials=4, seed=1, build_ahead=0, race=2, cluster="local", devices="0,1",
                       storage=f"sqlite:///{tmp_path / 'm.db'}")
    assert res.exit_code == 0 and res.winner and res.pct_header == "% of cublas"
    assert (tmp_path / "rows.log").read_text().split().count("cublas") == 1
    pcts = [res.pct(m) for m in res.feasible]
    if lib == "pass":
        assert pcts == [pytest.approx(50 / (1 + abs(int(m.point["WT_BK"]) - 16) / 100)) for m in res.feasible]
        assert res.record.points[-1].results[0].variant == "cublas"
    else:
        assert pcts == [None] * len(pcts) and res.reference.reason


def test_a_sweep_on_the_cluster_says_which_gpu_and_host_ran_each_point(dask_fake, invoke, tmp_path):
    dask_fake({"_ms": "1 + threads / 1000"})
    out = tmp_path / "s.json"
    res = invoke("copy", "--variant", "vec4", "--n", "1k", "--block", "64,128,256,512", "--cluster", "local",
                 "--devices", "0,1", "--json", str(out), "--quiet")
    assert res.exit_code == 0, res.output
    from cudalab.records.results import load_record

    rec = load_record(out)
    assert [p.block for p in rec.points] == ["64", "128", "256", "512"]  # the sweep's order, whatever ran first
    rows = [r for p in rec.points for r in p.results]
    assert rows and all(r.status.value == "passed" and r.extra["gpu_name"] == "Fake GPU 0" and r.extra["host"]
                        for r in rows)
    assert {p.device for p in rec.points} == {0, 1} and rec.device["cluster"] == "local"
    assert dask_fake.points() == 4  # each point ran once


def test_bad_clusters_are_refused_before_any_trial(dask_fake, invoke, one_line_exit_2, monkeypatch, tmp_path):
    from cudalab.execute.dask import cluster as CL

    monkeypatch.setattr(CL, "CONNECT_S", 1.0)
    one_line_exit_2(invoke("copy", "--n", "1k", "--cluster", "tcp://127.0.0.1:1"), "no Dask scheduler answers")
    one_line_exit_2(invoke("copy", "--n", "1k", "--cluster", "gpu1:8786"), "not 'local' nor a scheduler address")
    db = tmp_path / "t.db"
    one_line_exit_2(invoke("tune", "copy", "--variant", "vec4", "--n", "1k", "-D", "UNROLL=1..4", "--cluster",
                           "tcp://127.0.0.1:1", "--storage", f"sqlite:///{db}"), "no Dask scheduler answers")
    dask_fake()
    import distributed

    with distributed.LocalCluster(n_workers=1, processes=False, dashboard_address=None) as plain:  # no GPU resource
        with pytest.raises(ClusterError, match="none with a GPU"):
            CL.Cluster.open(plain.scheduler_address)
    with pytest.raises(ClusterError, match="different CUDA versions"):
        CL.Cluster.open("local", [0, 1], env={1: {"FAKE_CUDA": "12.4"}})
    monkeypatch.setattr(CL.CW, "wire_version", lambda: "0.0.1+another")
    with pytest.raises(ClusterError, match="runs cudalab 0.1.0.*this driver 0.0.1"):
        CL.Cluster.open("local", [0])


def test_mixed_gpu_models_a_campaign_refuses_a_sweep_records(dask_fake, tmp_path):
    from cudalab.execute.dask import cluster as CL

    dask_fake()
    c = CL.Cluster.open("local", [0, 1], env={1: {"FAKE_GPU_NAME": "Fake GPU B"}})
    try:
        assert c.models() == Counter({"Fake GPU 0": 1, "Fake GPU B": 1})
        with pytest.raises(ClusterError, match=r"mixes GPU models \(1 x Fake GPU 0, 1 x Fake GPU B\)"):
            c.one_model()
    finally:
        c.close()


def test_a_worker_that_cannot_open_its_gpu_gives_its_work_back(dask_fake, tmp_path):
    from cudalab.execute.dask import cluster as CL
    from cudalab.plan import RunRequest, precheck

    dask_fake()
    c = CL.Cluster.open("local", [0, 1], env={1: {"FAKE_WORKER": json.dumps({"_open": "error"})}})
    try:
        assert [w.visible for w in c.workers] == ["0"] and "no CUDA GPU found" in c.given_back[0][1]
        plans = [precheck(RunRequest(family="copy", variants="vec4", n="1k", block=b)) for b in ("64", "128", "256")]
        futures = {c.submit([p]): p for p in plans}
        got = [res["where"]["visible"] for _, res in c.completed(futures)]
        assert got == ["0", "0", "0"]
    finally:
        c.close()


def test_local_workers_have_build_threads_beside_their_gpu(dask_fake, monkeypatch, tmp_path):
    """``--cluster local``: each Dask worker has 1 + K threads and ``BUILD=K`` (the GPU task on one, prebuilds
    on the others); a prebuild really compiles into the host's build cache, and a failing one is a line, not
    an error."""
    from cudalab.plan import RunRequest, precheck
    from cudalab.execute.dask import cluster as CL

    assert [CL.CW.build_threads(g, c) for g, c in ((2, 32), (8, 128), (1, 2), (4, 2))] == [15, 15, 1, 1]
    import tempfile

    monkeypatch.setenv("CUDALAB_CACHE", str(tmp_path / "cache"))
    tmp = tmp_path / "tmp"  # the temporary folder: --cluster local leaves nothing there (dask-scratch-space stayed)
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    dask_fake()
    k = CL.CW.build_threads(2)
    plan = precheck(RunRequest(family="copy", variants="vec4", n="1k", block="256", defines=(("UNROLL", "3"),)))
    c = CL.Cluster.open("local", [0, 1])
    try:
        workers = c.client.scheduler_info(n_workers=-1)["workers"].values()
        assert sorted((w["nthreads"], w["resources"]["GPU"], w["resources"]["BUILD"]) for w in workers) == [(1 + k, 1, k)] * 2
        assert all(w.builds and w.arch == "sm_90" for w in c.workers)
        assert c.prebuild(plan, c.workers[0]).result(timeout=60) == {"built": 1, "cached": 0, "error": ""}
        assert c.prebuild(plan, c.workers[1]).result(timeout=60) == {"built": 0, "cached": 1, "error": ""}
        assert len(list((tmp_path / "cache" / "build").glob("*.cubin"))) == 1
        assert any(tmp.rglob("dask-scratch-space"))  # while it runs, its scratch is there
    finally:
        c.close()
    assert [p.name for p in tmp.rglob("*") if "dask" in p.name] == []
    monkeypatch.setenv("FAKE_BUILD", "fail")  # nvcc fails on the workers started from now on
    c = CL.Cluster.open("local", [0])
    try:
        other = precheck(RunRequest(family="copy", variants="vec4", n="1k", block="256", defines=(("UNROLL", "4"),)))
        got = c.prebuild(other, c.workers[0]).result(timeout=60)
        assert got == {"built": 0, "cached": 0, "error": "nvcc could not compile (fake)"}
    finally:
        c.close()


def _cubins(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


def test_a_cluster_campaign_finds_its_trials_built_ahead_on_the_workers_host(dask_fake, monkeypatch, tmp_path):
    """The driver asks each trial's prebuild with the trial: while the GPU times one trial, the next one's
    kernel is built, so its GPU task finds the cubin in the host's cache when it begins."""
    monkeypatch.setenv("CUDALAB_CACHE", str(tmp_path / "probe"))
    # Each trial's GPU time must outlast a build of the next: ~0.3 s of nvcc on an idle 2-core machine, several
    # times that under load (the test was flaky there). So the fake GPU's time is four builds as this machine
    # builds now (measured on another define, in another cache), and never under 1.5 s.
    from cudalab import build, catalog

    t = time.monotonic()
    build.build(catalog.family("copy").directory / "copy.cu", {"UNROLL": "7"})
    delay = max(1.5, 4 * (time.monotonic() - t))
    monkeypatch.setenv("CUDALAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("FAKE_WORKER_CUBINS", str(tmp_path / "cubins.log"))
    dask_fake({"_delay": delay})
    res = tune(tmp_path / "b.db", strategy="grid", race=0, defines={"UNROLL": "1..4"}, block="256", devices="0",
               build_ahead=None)
    assert [m.status for m in once_each(res)] == ["passed"] * 4
    seen = _cubins(tmp_path / "cubins.log")
    assert sorted(x.split(":")[0] for x in seen) == [f"UNROLL={u}" for u in "1234"]
    # The first trial starts at once, beside its own prebuild; each later one waited behind the one before.
    assert sum(x.endswith(":cached") for x in seen) >= 2, seen
    assert len(list((tmp_path / "cache" / "build").glob("*.cubin"))) == 4  # every trial's build, made on the host


def test_a_failing_prebuild_does_not_fail_its_trial(dask_fake, monkeypatch, tmp_path):
    monkeypatch.setenv("CUDALAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("FAKE_WORKER_CUBINS", str(tmp_path / "cubins.log"))
    monkeypatch.setenv("FAKE_BUILD", "fail")  # every prebuild fails as nvcc would
    dask_fake({"_delay": 0.5})
    res = tune(tmp_path / "f.db", strategy="grid", race=0, defines={"UNROLL": "1..4"}, block="256", devices="0",
               build_ahead=None)
    assert [(m.status, m.reason) for m in once_each(res)] == [("passed", "")] * 4
    seen = _cubins(tmp_path / "cubins.log")
    assert len(seen) == 4 and all(x.endswith(":missing") for x in seen)  # no build made: the GPU task's to make


def test_build_ahead_0_makes_no_prebuild_on_a_cluster_either(dask_fake, monkeypatch, tmp_path):
    """``--build-ahead 0``: no build ahead on a cluster (it was ignored there: a prebuild a trial regardless)."""
    monkeypatch.setenv("CUDALAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("FAKE_WORKER_CUBINS", str(tmp_path / "cubins.log"))
    dask_fake({"_delay": 0.2})
    res = tune(tmp_path / "n.db", strategy="grid", race=0, defines={"UNROLL": "1..3"}, block="256", devices="0")
    assert [m.status for m in once_each(res)] == ["passed"] * 3
    assert not list((tmp_path / "cache").glob("build/*.cubin"))  # nothing built: the (fake) GPU tasks build nothing


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_cluster(port: int, env: dict[str, str], resources: tuple[str, str] = ("1", "GPU=1")) -> list[subprocess.Popen]:
    """A scheduler and two GPU workers, as a user starts them (``dask scheduler``, ``dask worker``); ``resources``:
    their ``--nthreads`` and ``--resources`` (by default without build threads, as docs/cluster.md's first
    command was)."""
    dask = [sys.executable, "-m", "distributed.cli.dask_scheduler"]
    sched = subprocess.Popen(dask + ["--host", "127.0.0.1", "--port", str(port), "--no-dashboard"], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    worker = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", f"tcp://127.0.0.1:{port}",
                               "--nworkers", "2", "--nthreads", resources[0], "--resources", resources[1], "--no-dashboard",
                               "--preload", "fake_dask_preload", "--death-timeout", "5"], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _wait_for_workers(port, 2)
    return [sched, worker]


def _wait_for_workers(port: int, n: int, timeout: float = 90.0) -> None:
    """Until ``n`` workers have joined the scheduler, as a user sees them join before starting a campaign:
    on a loaded 2-core machine two worker processes take longer than the driver's 10 s wait to import."""
    from distributed import Client

    with Client(f"tcp://127.0.0.1:{port}", timeout=timeout, set_as_default=False) as client:
        client.wait_for_workers(n, timeout=timeout)


def test_the_scheduler_killed_and_the_same_command_resumes_the_campaign(tmp_path):
    db, port = tmp_path / "s.db", _free_port()
    cache = tmp_path / "cache"
    env = dict(os.environ, FAKE_WORKER=json.dumps({"_ms": MS, "_delay": 0.2}), CUDALAB_CACHE=str(cache),
               PYTHONPATH=TESTS + os.pathsep + os.environ.get("PYTHONPATH", ""))
    argv = [sys.executable, "-m", "cudalab", "tune", "copy", "--variant", "vec4", "--n", "1k", "-D", "UNROLL=1..8",
            "--block", "64..1024:pow2", "--require", "threads * UNROLL <= 4096", "--strategy", "grid", "--seed", "1",
            "--race", "0", "--storage", f"sqlite:///{db}", "--cluster", f"tcp://127.0.0.1:{port}", "--quiet"]

    def complete() -> int:
        import sqlite3

        try:
            with sqlite3.connect(db) as con:
                return con.execute("select count(*) from trials where state = 'COMPLETE'").fetchone()[0]
        except sqlite3.Error:
            return 0

    procs = _start_cluster(port, env)
    try:
        first = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 90
        while complete() < 4 and time.monotonic() < deadline and first.poll() is None:
            time.sleep(0.05)
        procs[0].kill()  # the scheduler, SIGKILL
        _, err = first.communicate(timeout=60)
        assert first.returncode == 75, err
        assert "the Dask scheduler went away" in err or "no answer from the Dask scheduler" in err
        before = complete()
        assert 4 <= before < 36
        assert not list(cache.glob("build/*.cubin"))  # workers without BUILD threads: no prebuild (fakes build nothing)
    finally:
        for p in procs:
            p.kill()
            p.wait()
    procs = _start_cluster(port, env, ("2", "GPU=1,BUILD=1"))  # as docs/cluster.md says now: prebuilds beside
    try:
        again = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
        assert again.returncode == 0, again.stderr
        assert list(cache.glob("build/*.cubin"))  # the remote workers' prebuilds, on their host
    finally:
        for p in procs:
            p.kill()
            p.wait()
    from cudalab.tuning import campaign as C

    import optuna

    study = optuna.load_study(study_name="copy-vec4", storage=f"sqlite:///{db}")
    done = [m for m in C.measured(study) if m.status != "interrupted"]
    keys = Counter(json.dumps(m.point, sort_keys=True) for m in done)
    assert max(keys.values()) == 1 and len([m for m in done if m.status == "passed"]) == 36


def _sleep_then(x, s: float = 0.0):
    time.sleep(s)
    return 1 // x


def test_completions_hand_back_results_errors_and_a_lost_scheduler():
    """The driver's queue of finished futures: each result once, as it completes; a task's error as the
    exception; futures cancelled under the driver (what the client does when it loses the scheduler) as
    ClusterLost."""
    import distributed

    from cudalab.errors import ClusterLost
    from cudalab.execute.dask import cluster as CL

    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False, dashboard_address=None) as lc, \
            distributed.Client(lc, set_as_default=False) as client:
        done = CL.Completions(CL.Cluster(client, None, "test"))
        slow, fast, bad = (client.submit(_sleep_then, x, s, pure=False) for x, s in ((1, 0.5), (1, 0.0), (0, 0.0)))
        for f in (slow, fast, bad):
            done.add(f)
        got = [done.next() for _ in range(2)]
        t0 = time.monotonic()
        assert done.next(0.01) is None and time.monotonic() - t0 < 0.2  # the slow one is still running
        got.append(done.next(5.0))
        assert got[-1] == (slow, 1) and (fast, 1) in got  # as they complete, not as they were sent
        assert isinstance(dict(got)[bad], ZeroDivisionError) and not done.pending
        hung = client.submit(_sleep_then, 1, 2.0, pure=False)  # (closing waits for its thread)
        done.add(hung)
        client.cancel([hung])
        with pytest.raises(ClusterLost, match="went away"):
            done.next()


def test_the_gpu_worker_a_dask_worker_starts_has_every_core_for_blas_not_the_nanny_s_one(monkeypatch):
    # a Nanny sets OMP/MKL/OPENBLAS_NUM_THREADS=1 in its worker; the GPU worker process it starts inherits them, and
    # its references (NumPy's float64 matmul) ran on one core: a value set on purpose stays
    from cudalab.execute.dask import cluster_worker as CW

    seen = {}

    class Started:
        def __init__(self, *a, **k):
            pass

        def start(self):
            seen.update({k: os.environ.get(k) for k in CW.NANNY_THREAD_VARS})
            return self

        def count(self):
            return 1

    monkeypatch.setattr(CW, "Session", Started)
    monkeypatch.setattr(CW, "_STATE", {"session": None, "energy": None, "error": None})
    for name, value in zip(CW.NANNY_THREAD_VARS, ("1", "1", "4")):
        monkeypatch.setenv(name, value)
    CW._session(False, None)
    assert seen == dict(zip(CW.NANNY_THREAD_VARS, (None, None, "4")))
