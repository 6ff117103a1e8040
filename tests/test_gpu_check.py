"""scripts/gpu-check.sh's lanes and its bench-lanes stage, run for real with stand-ins for ``python3`` and
``nvidia-smi`` first on PATH (no GPU, nothing installed): each stand-in writes what it was asked, under which
CUDA_VISIBLE_DEVICES, into a log. Stages that meet (``FAKE_MEET``) wait until every lane has started one: lanes
run one after another would never meet, and the stage fails."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "gpu-check.sh"

PYTHON3 = r"""#!/bin/sh
# python3 as gpu-check.sh calls it: says what it was asked, where, when it started and ended
log() { echo "$1 $$ CVD=${CUDA_VISIBLE_DEVICES-unset} ORDER=${CUDA_DEVICE_ORDER-unset} python3 $ARGS" >> "$FAKE_LOG"; }
ARGS="$*"
case "$ARGS" in
    "-c import pycuda, cudalab") exit "${FAKE_IMPORT_RC:-0}" ;;
    "-m cudalab.worker.busid 0") echo "0000:1${CUDA_VISIBLE_DEVICES-x}:00.0"; exit 0 ;;
esac
log start
[ -n "${FAKE_WHERE:-}" ] && echo "$ARGS @ $PWD PYTHONPATH=${PYTHONPATH:-}" >> "$FAKE_WHERE"
if [ -n "${FAKE_MEET:-}" ]; then   # wait (5 s at most) until every lane has started a stage
    touch "$FAKE_MEET/${CUDA_VISIBLE_DEVICES-unset}"
    i=0
    while [ "$(ls "$FAKE_MEET" | wc -l)" -lt "$FAKE_MEET_N" ]; do
        sleep 0.05; i=$((i + 1)); [ $i -gt 100 ] && { echo "met no other lane"; log end; exit 9; }
    done
fi
out=""; prev=""
for a in "$@"; do [ "$prev" = --out ] && out=$a; prev=$a; done
case "$ARGS" in *scripts/benchmark.py*--sections\ none*) ;;
                *scripts/benchmark.py*) mkdir -p "$out"; echo '{}' > "$out/record.json" ;; esac
sleep "${FAKE_SLEEP:-0}"
echo "ran on GPU ${CUDA_VISIBLE_DEVICES-unset}"
log end
"""

NVIDIA_SMI = r"""#!/bin/sh
# nvidia-smi: FAKE_GPUS GPUs (default 2); -i N: GPU N's bus id
case "$*" in
    -L) i=0; while [ $i -lt "${FAKE_GPUS:-2}" ]; do echo "GPU $i: NVIDIA H200 (UUID: GPU-$i)"; i=$((i + 1)); done ;;
    "-i "*) echo "00000000:1$2:00.0" ;;
    *) echo "NVIDIA H200, 580.00" ;;
esac
"""


@pytest.fixture()
def check(tmp_path):
    """Run gpu-check.sh with the stand-ins; returns (process, the stand-ins' log lines, $OUT)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (("python3", PYTHON3), ("nvidia-smi", NVIDIA_SMI)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    out, log = tmp_path / "out", tmp_path / "calls.log"

    def run(*stages, meet=0, **env):
        meet_dir = tmp_path / "meet"
        meet_dir.mkdir(exist_ok=True)
        full = {k: v for k, v in os.environ.items() if k not in ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER")}
        full |= {"PATH": f"{bin_dir}:{os.environ['PATH']}", "OUT": str(out), "FAKE_LOG": str(log),
                 **({"FAKE_MEET": str(meet_dir), "FAKE_MEET_N": str(meet)} if meet else {}), **env}
        proc = subprocess.run(["bash", str(SCRIPT), *stages], capture_output=True, text=True, env=full, cwd=ROOT,
                              timeout=60)
        return proc, log.read_text().splitlines() if log.exists() else [], out

    return run


def _summary(stdout: str) -> list[str]:
    return stdout.split("=== gpu-check summary\n", 1)[1].splitlines()


def _calls(lines, what, edge="start"):
    return [ln for ln in lines if ln.startswith(edge + " ") and what in ln]


def test_lanes_run_at_the_same_time_each_on_its_own_gpu(check):
    proc, lines, out = check("info", "tests", "/", "ncu", "sanitizer", meet=2)
    assert proc.returncode == 0, proc.stderr
    assert "met no other lane" not in (out / "tests.log").read_text() + (out / "ncu.log").read_text()
    # each stage's log is $OUT/<stage>.log, its processes on its lane's GPU in PCI order
    assert (out / "tests.log").read_text().endswith("ran on GPU 0\n")
    assert (out / "ncu.log").read_text().endswith("ran on GPU 1\n")
    assert (out / "sanitizer.log").read_text().endswith("ran on GPU 1\n")
    [tests] = _calls(lines, "-m pytest -m gpu")
    [ncu] = _calls(lines, "-m pytest -m ncu")
    assert "CVD=0 ORDER=PCI_BUS_ID" in tests and "CVD=1 ORDER=PCI_BUS_ID" in ncu
    # in a lane, one stage after the other: sanitizer starts after ncu ended
    order = [ln.split()[0] + " " + ln.split("-m pytest -m ")[1].split()[0] for ln in lines if "-m pytest -m" in ln]
    assert order.index("start sanitizer") > order.index("end ncu")
    # one summary, every stage in its lane's order, with its GPU
    summary = _summary(proc.stdout)
    assert [s.split()[0] for s in summary] == ["info", "tests", "ncu", "sanitizer"]
    assert [re.search(r"GPU (\d)", s).group(1) for s in summary] == ["0", "0", "1", "1"]
    assert all(re.match(r"\S+ +rc=0 +\d+s  GPU \d  ", s) for s in summary), summary
    lane1 = (out / "lane1.log").read_text()
    assert "CUDA_VISIBLE_DEVICES=1, CUDA device 0 is 0000:11:00.0: the GPU nvidia-smi numbers 1" in lane1


def test_without_lanes_nothing_changes(check):
    proc, lines, out = check("tests", "ncu")
    assert proc.returncode == 0
    assert all("CVD=unset ORDER=unset" in ln for ln in lines)
    assert [re.fullmatch(r"(\S+) +rc=0 +\d+s  ran on GPU unset", s).group(1) for s in _summary(proc.stdout)] \
        == ["tests", "ncu"]
    assert not list(out.glob("lane*.log"))


def test_a_lane_without_its_gpu_is_not_run_and_says_so(check):
    proc, lines, out = check("tests", "/", "ncu", "sanitizer", FAKE_GPUS="1")
    assert proc.returncode == 0
    [line] = [ln for ln in proc.stdout.splitlines() if ln.startswith("gpu-check:")]
    assert line == "gpu-check: lane 1 wants GPU 1, nvidia-smi lists 1 GPU(s): not running ncu sanitizer"
    assert not (out / "ncu.log").exists() and not _calls(lines, "-m ncu")
    summary = _summary(proc.stdout)
    assert re.match(r"tests +rc=0 .*GPU 0  ran on GPU 0", summary[0])
    assert summary[1:] == [f"{s:<10} rc=-       0s  GPU 1  not run: no GPU 1 on this machine" for s in ("ncu", "sanitizer")]


def test_the_install_runs_once_before_the_lanes(check):
    proc, lines, _ = check("tests", "/", "ncu", FAKE_IMPORT_RC="1")
    assert proc.returncode == 0
    pips = [i for i, ln in enumerate(lines) if "-m pip install" in ln and ln.startswith("start")]
    stages = [i for i, ln in enumerate(lines) if "-m pytest" in ln]
    assert len(pips) == 2 and "CVD=unset" in lines[pips[0]] and max(pips) < min(stages)


def test_a_stage_past_its_limit_is_killed_in_its_lane(check):
    proc, _, _ = check("tests", "/", "ncu", STAGE_TIMEOUT="1", FAKE_SLEEP="20")
    assert [s.split()[:2] for s in _summary(proc.stdout)] == [["tests", "rc=137"], ["ncu", "rc=137"]]


def test_tune_and_truth_may_run_in_several_lanes_each_with_its_own_log_record_and_arguments(check):
    proc, lines, out = check("tune", "truth", "/", "tune", "/", "truth", FAKE_GPUS="3", meet=3,
                             KERNEL_TUNER="/kt", TUNE_ARGS="--parts kt --kt-repeats 2", TRUTH_ARGS_GPU2="--parts calibrate --calibrate-n 8k")
    assert proc.returncode == 0, proc.stdout
    for stage, gpu in (("tune", 0), ("tune", 1), ("truth", 0), ("truth", 2)):
        assert (out / f"{stage}-gpu{gpu}.log").read_text().endswith(f"ran on GPU {gpu}\n")
    assert not (out / "tune.log").exists() and not (out / "truth.log").exists()
    tunes = _calls(lines, "scripts/bench_tune.py")
    assert sorted(re.search(r"CVD=(\d)", ln).group(1) + ln.split("--out ")[1] for ln in tunes) == [
        f"0{out}/tune-docs-gpu0 --kernel-tuner /kt --parts kt --kt-repeats 2",
        f"1{out}/tune-docs-gpu1 --kernel-tuner /kt --parts kt --kt-repeats 2"]
    truths = {re.search(r"CVD=(\d)", ln).group(1): ln.split("--out ")[1] for ln in _calls(lines, "bench_truth.py")}
    assert truths["2"] == f"{out}/truth-docs-gpu2 --parts calibrate --calibrate-n 8k"
    assert truths["0"].startswith(f"{out}/truth-docs-gpu0 --parts truth --truth-deadline 200")   # the default
    assert [s.split()[0] for s in _summary(proc.stdout)] == ["tune", "truth", "tune", "truth"]


def test_a_single_tune_lane_keeps_its_record_in_docs(check):
    proc, lines, out = check("info", "/", "tune", KERNEL_TUNER="/kt", TUNE_ARGS="--parts kt")
    assert proc.returncode == 0
    [tune] = _calls(lines, "scripts/bench_tune.py")
    assert "CVD=1" in tune and tune.endswith("--out docs/benchmarks --kernel-tuner /kt --parts kt")
    assert (out / "tune.log").exists()


def test_ab_runs_the_older_tree_and_this_one_alternately_then_judges_them(check, tmp_path):
    old = tmp_path / "old-tree"
    (old / "scripts").mkdir(parents=True)
    (old / "scripts" / "benchmark.py").write_text("")
    where = tmp_path / "where.log"
    proc, lines, out = check("ab", AB_OLD=str(old), AB_ROUNDS="2", FAKE_WHERE=str(where))
    assert proc.returncode == 0, (out / "ab.log").read_text()
    bench = [ln for ln in where.read_text().splitlines() if "scripts/benchmark.py" in ln]
    assert [ln.split("--out ")[1].split()[0].rsplit("/", 1)[1] for ln in bench] == ["old-1", "new-1", "old-2", "new-2"]
    for ln in bench:   # each side runs from its own tree, its cudalab first on the path
        tree = str(old) if "/old-" in ln else str(ROOT)
        assert ln.endswith(f"@ {tree} PYTHONPATH={tree}") and "--sections jobs --only reduce," in ln
    [judge] = [ln for ln in where.read_text().splitlines() if "bench_agree.py" in ln]
    assert f"{out}/ab/old-1/ {out}/ab/old-2/ --vs {out}/ab/new-1/ {out}/ab/new-2/ --out {out}/ab" in judge
    log = (out / "ab.log").read_text()
    assert "old round 2: exit 0" in log and "new round 1: exit 0" in log


def test_ab_without_an_older_tree_says_so(check, tmp_path):
    proc, lines, out = check("ab", AB_OLD=str(tmp_path / "none"))
    assert (out / "ab.log").read_text().startswith(f"ab: no older tree at {tmp_path / 'none'}")
    assert re.match(r"ab +rc=2 ", _summary(proc.stdout)[0]) and not _calls(lines, "benchmark.py")


@pytest.mark.parametrize("stages, says", [
    (("tests", "/", "tests"), "gpu-check: tests in two lanes (one log each: $OUT/tests.log)"),
    (("tests", "/", "cluster"), "gpu-check: cluster uses every GPU itself: run it without lanes (no /)"),
    (("bench-lanes", "/", "ncu"), "gpu-check: bench-lanes uses every GPU itself: run it without lanes (no /)")])
def test_lanes_that_cannot_work_are_refused_before_anything_runs(check, stages, says):
    proc, lines, _ = check(*stages)
    assert (proc.returncode, proc.stdout.strip(), lines) == (2, says, [])


def test_bench_lanes_runs_both_benchmark_calls_at_once_then_merges(check):
    proc, lines, out = check("bench-lanes", meet=2, STAGE_TIMEOUT="100")
    assert proc.returncode == 0, (out / "bench-lanes.log").read_text()
    lane0, lane1 = (_calls(lines, f"CVD={i} ORDER=PCI_BUS_ID python3 scripts/benchmark.py") for i in (0, 1))
    assert lane0 == [ln for ln in lane0 if ln.endswith(f"--out {out}/bench-gpu0 --deadline 70 --sections jobs,large")]
    assert len(lane0) == 1 and len(lane1) == 1
    assert lane1[0].endswith(f"--out {out}/bench-gpu1 --deadline 70 --only copy,transpose,reduce "
                             "--sections jobs,wall,saved,ncu,energy,truth,table36,ceiling")
    [merge] = _calls(lines, "--sections none")
    assert merge.endswith(f"--sections none --merge {out}/bench-gpu0 --merge {out}/bench-gpu1 --out {out}/bench")
    assert "CVD=unset" in merge
    assert lines.index(merge) > max(lines.index(ln) for ln in _calls(lines, "--deadline 70", "end"))
    log = (out / "bench-lanes.log").read_text()
    assert "GPU 0: exit 0: ran on GPU 0" in log and "GPU 1: exit 0: ran on GPU 1" in log
    assert "met no other lane" not in (out / "bench-lanes-gpu0.log").read_text()


def test_bench_lanes_on_one_gpu_is_not_run(check):
    proc, lines, out = check("bench-lanes", FAKE_GPUS="1")
    assert (out / "bench-lanes.log").read_text() == "bench-lanes: 2 lanes need 2 GPUs, nvidia-smi lists 1: not run\n"
    assert re.match(r"bench-lanes rc=2 ", _summary(proc.stdout)[0]) and not _calls(lines, "benchmark.py")


def test_bench_lanes_default_runs_every_section_once(monkeypatch):
    """Every section in one lane (the jobs in both: the second lane's sections read them), the second lane's
    --only holding every job its sections read, and each lane inside its --deadline by EXPECTED_S (the jobs
    300 s as benchmark.py's docstring has them; the second lane's few jobs 60 s; ceiling runs only when the
    transpose misses its target, and then may be left to a third call)."""
    import importlib

    monkeypatch.syspath_prepend(str(ROOT / "scripts"))
    bench = importlib.import_module("benchmark")
    default = re.search(r'^BENCH_LANES_DEFAULT="([^"]+)"', SCRIPT.read_text(), re.M).group(1)
    lanes = [re.search(r"--sections (\S+)", g).group(1).split(",") for g in default.split("/")]
    assert sorted(s for lane in lanes for s in lane) == sorted([*bench.SECTIONS, "jobs"])
    only = set(re.search(r"--only (\S+)", default.split("/")[1]).group(1).split(","))
    families = {job: fam for job, fam, _ in bench.JOBS}
    assert {families[j] for s in lanes[1] for j in bench.SECTION_JOBS.get(s, ())} <= only
    deadline = 540 - 30   # the header's STAGE_TIMEOUT=540
    assert 300 + sum(bench.EXPECTED_S[s] for s in lanes[0] if s != "jobs") <= deadline
    assert 60 + sum(bench.EXPECTED_S[s] for s in lanes[1] if s not in ("jobs", "ceiling")) <= deadline


#: A child given one GPU: the bus id CUDA reports for its device 0, and the bus id of the NVML handle the parent
#: side's telemetry opens for it (the benchmark's path: the local engine's open_telemetry; a worker opens it by the same bus id).
_WHICH_GPU = """
import pynvml
from cudalab.plan import RunRequest
from cudalab.execute.local.engine import open_telemetry
from cudalab.worker.gpu import pci_bus_id
tele = open_telemetry(RunRequest(family="copy")).telemetry
bus = pynvml.nvmlDeviceGetPciInfo(tele.handle).busId
print(pci_bus_id(0), bus.decode() if isinstance(bus, bytes) else bus)
"""


@pytest.mark.gpu
def test_a_process_given_another_gpu_reads_that_gpus_telemetry():
    """What a lane relies on: under CUDA_VISIBLE_DEVICES=N cudalab's telemetry is the GPU the process computes on
    (found in NVML by the bus id CUDA reports), not NVML's GPU 0. Needs two GPUs (NVML sees every GPU whatever
    CUDA_VISIBLE_DEVICES says, so this runs in any lane)."""
    import sys

    pynvml = pytest.importorskip("pynvml")
    pynvml.nvmlInit()
    try:
        count = pynvml.nvmlDeviceGetCount()
    finally:
        pynvml.nvmlShutdown()
    if count < 2:
        pytest.skip(f"NVML sees {count} GPU: no other GPU to mistake it for")
    seen = set()
    for n in range(count):
        env = {**os.environ, "CUDA_VISIBLE_DEVICES": str(n), "PYTHONPATH": str(ROOT)}
        proc = subprocess.run([sys.executable, "-c", _WHICH_GPU], env=env, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        cuda, nvml = proc.stdout.split()
        assert cuda.lower()[-12:] == nvml.lower()[-12:], (n, cuda, nvml)
        seen.add(cuda.lower())
    assert len(seen) == count   # each CUDA_VISIBLE_DEVICES a different GPU: the check above compared them all
