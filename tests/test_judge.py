"""cudalab judge on the CPU: the real command, session, worker loop, executor and second look, on a fake GPU
whose kernels are NumPy (test_runcore's device, fake_watch's worker threads).

What a candidate does is read from its text: ``HONEST`` copies; ``WRONG`` drops the last element; ``MEMO_PTR``
copies the answer it remembered for its input's buffer; ``REPEAT_FAST`` copies, but takes 0.1 ms on input it
has seen and 1 ms on new input; ``TOO_FAST`` copies in 0.001 ms; ``TRAP`` breaks the context; ``CHILD``
launches a child grid (nvcc's PTX is read for it: the file is real CUDA).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import fake_watch
from cudalab.errors import GpuError
from cudalab.judging import schema as JS
from cudalab.judging import verdict as V
from cudalab.records.results import FAILED, INCORRECT, PASSED, TIMEOUT, Result
from cudalab.bench import summarize
from fake_watch import WatchGpu

KERNEL = 'extern "C" __global__ void cand(float *out, const float *in, int rows, int cols, int pitch) {{\n' \
         '    // {marker}\n    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;\n' \
         '    if (x < cols && y < rows) out[(size_t)y * pitch + x] = in[(size_t)y * pitch + x];\n}}\n'
CHILD = ('extern "C" __global__ void kid(float *out, const float *in, int n) {{ }}\n'
         'extern "C" __global__ void cand(float *out, const float *in, int rows, int cols, int pitch) {{\n'
         '    // {marker}\n    if (threadIdx.x == 0) kid<<<1, 1>>>(out, in, rows * cols);\n}}\n')


class Kernel:
    """A launch always does its work (fake_watch's kernels skip it on timed launches)."""

    def __init__(self, dev, fn, ms):
        self.dev, self.fn, self.ms, self.num_regs = dev, fn, ms, 16

    def launch(self, grid, block, args, shared=0):
        self.dev.last_ms = self.ms
        self.fn(*args)


def behaviour(dev, text):
    seen = {}

    def honest(out, src, *rest):
        out.data[...] = src.data

    def wrong(out, src, *rest):
        out.data.reshape(-1)[:-1] = src.data.reshape(-1)[:-1]

    def memo_ptr(out, src, *rest):
        if id(src) not in seen:
            seen[id(src)] = src.data.copy()
        out.data[...] = seen[id(src)]

    def repeat_fast(out, src, *rest):
        key = src.data.tobytes()
        dev.last_ms = 0.1 if seen.get("last") == key else 1.0
        seen["last"] = key
        out.data[...] = src.data

    def trap(*args):
        raise GpuError("the GPU reported an error: an illegal instruction was encountered (a __trap())")

    for word, fn, ms in (("WRONG", wrong, 1.0), ("MEMO_PTR", memo_ptr, 1.0), ("REPEAT_FAST", repeat_fast, 1.0),
                         ("TOO_FAST", honest, 0.001), ("TRAP", trap, 1.0)):
        if word in text:
            return fn, ms
    return honest, 1.0


class JudgeGpu(WatchGpu):
    def compile(self, source, defines, names, **kw):
        path, text = fake_watch.user_text(source)
        mine = path != Path(source)
        if mine and "<<<" in text:  # as nvcc without -rdc: a child launch does not compile
            from cudalab.errors import CompileError
            raise CompileError(f"nvcc could not compile {path}", "error: calling a __global__ function from a "
                               "__global__ function is only allowed ... with -rdc=true")
        out = {}
        for name in names:
            fn, ms = behaviour(self, text) if mine else (lambda o, s, *r: o.data.__setitem__(Ellipsis, s.data), 1.0)
            out[name] = Kernel(self, fn, ms)
        return out


@pytest.fixture
def fake_gpu(monkeypatch, inline_worker, tmp_path):
    fake_watch.install(monkeypatch.setattr)
    from cudalab.judging import kept
    from cudalab.worker import gpu
    monkeypatch.setattr(gpu, "Device", JudgeGpu)
    (tmp_path / "kept").mkdir(mode=0o700)
    monkeypatch.setattr(kept, "folder", lambda: tmp_path / "kept")  # rivals kept by one test never serve another
    monkeypatch.chdir(tmp_path)
    return tmp_path


def judged(invoke, folder, marker, text=KERNEL, *more):
    (folder / "cand.cu").write_text(text.format(marker=marker))
    res = invoke("judge", "copy", "--n", "64", "--add", "cand.cu:cand@block=32x8", *more)
    return res, res.stdout


def test_an_honest_kernel_is_correct_exit_0_one_json_object_on_stdout(fake_gpu, invoke):
    res, out = judged(invoke, fake_gpu, "HONEST")
    assert res.exit_code == 0, res.output
    assert out.count("\n") == 1  # one object, one line: nothing else on stdout
    obj = json.loads(out)
    assert obj["verdict"] == "correct" and obj["correct"] is True and obj["flags"] == []
    assert obj["reference"]["variant"] == "memcpy_dtod" and obj["best"]["variant"] == "block"
    assert obj["checks"]["second_look"]["second_set"] == "ran"
    assert obj["checks"]["scan"]["ptx"] is True  # nvcc read its PTX (relocatable)
    assert obj["code"]["sha256"] and obj["code"]["defines"]["BLOCK_X"] == "32"
    assert "cudalab judge: +cand correct" in res.stderr


def test_every_field_the_schema_names_is_produced_and_the_object_validates(fake_gpu, invoke):
    schema = json.loads(JS.schema_path().read_text())
    for marker in ("HONEST", "WRONG", "TOO_FAST"):
        res, out = judged(invoke, fake_gpu, marker)
        obj = json.loads(out)
        assert JS.problems(obj, schema) == [], marker
        for path in JS.named_fields(schema):
            node = obj
            for part in path.split("."):
                if node is None:
                    break
                assert part in node, f"{path} missing ({marker})"
                node = node[part]
        try:
            import jsonschema
        except ImportError:
            continue
        jsonschema.validate(obj, schema)


def test_the_small_validator_catches_what_the_schema_forbids():
    schema = json.loads(JS.schema_path().read_text())
    assert any("missing 'flags'" in p for p in JS.problems({"schema_version": 1}, schema))
    assert JS.problems({"flags": ["made_up"]}, {"properties": schema["properties"]})  # an unknown flag
    assert JS.problems({"exit_code": 2}, {"properties": schema["properties"]})  # 2 never comes with JSON


@pytest.mark.parametrize("marker,flag,code", [("WRONG", "wrong_answer", 1), ("MEMO_PTR", "memo", 1),
                                              ("REPEAT_FAST", "memo", 5), ("TOO_FAST", "suspect", 5)])
def test_each_door_is_named_with_its_flag_and_exit_code(fake_gpu, invoke, marker, flag, code):
    res, out = judged(invoke, fake_gpu, marker)
    obj = json.loads(out)
    assert flag in obj["flags"], obj["flags"]
    assert res.exit_code == code == obj["exit_code"]
    assert flag in obj["flag_details"]
    assert obj["reference"]["verdict"] != "faster"  # never faster beside a door
    if marker == "REPEAT_FAST":  # its time alternates two input sets: what it takes on new input, never its repeats'
        assert obj["time"]["median_ms"] == 1.0 and obj["reference"]["verdict"] == "same"
        assert obj["flag_details"]["memo"]["ratio"] == pytest.approx(10.0)


def test_an_impossible_speed_is_never_faster(fake_gpu, invoke):
    res, out = judged(invoke, fake_gpu, "TOO_FAST")
    obj = json.loads(out)
    assert obj["flag_details"]["suspect"]["pct"] > obj["flag_details"]["suspect"]["limit_pct"]
    assert obj["reference"]["verdict"] == "suspect" and obj["best"]["verdict"] == "suspect"


def test_a_wrong_answer_names_the_first_wrong_element(fake_gpu, invoke):
    res, out = judged(invoke, fake_gpu, "WRONG")
    obj = json.loads(out)
    assert obj["verdict"] == "incorrect" and obj["correct"] is False
    assert obj["first_wrong"] and "first at" in obj["first_wrong"]
    assert obj["reference"]["verdict"] == "–" and obj["reference"]["speedup"] is None  # no speed for a wrong answer


def test_a_crash_is_failed_exit_3_and_the_other_rows_stand(fake_gpu, invoke):
    res, out = judged(invoke, fake_gpu, "TRAP")
    obj = json.loads(out)
    assert res.exit_code == 3 and obj["verdict"] == "failed" and obj["correct"] is None
    assert obj["reference"]["status"] == "passed" and obj["best"]["status"] == "passed"


def test_a_child_grid_is_named_from_the_code(fake_gpu, invoke):
    res, out = judged(invoke, fake_gpu, "CHILD", CHILD)
    obj = json.loads(out)
    assert "child_grids" in obj["flags"] and res.exit_code == 3
    assert any("LaunchDevice" in x for x in obj["checks"]["scan"]["child_grids"])


@pytest.mark.parametrize("args,fragment", [
    (["--n", "64,128"], "one point"), (["--against", "nope"], "no such variant"),
    (["--option", "x"], "NAME=VALUE"), (["--n", "64", "--option", "tile=3"], "no option"),
    (["--n", "64", "--timeout", "-1"], "--timeout"), (["--n", "64", "--device", "-2"], "--device"),
    (["--n", "64", "--budget", "0"], "--budget")])
def test_refused_input_is_one_line_exit_2_and_no_json(fake_gpu, invoke, one_line_exit_2, args, fragment):
    (fake_gpu / "cand.cu").write_text(KERNEL.format(marker="HONEST"))
    res = invoke("judge", "copy", "--add", "cand.cu:cand@block=32x8", *args)
    one_line_exit_2(res, fragment)


def test_the_python_api_returns_the_same_object_and_keeps_its_worker(fake_gpu, monkeypatch):
    import cudalab
    from cudalab.execute.local import process as W

    spawned = []
    real = W.spawn
    monkeypatch.setattr(W, "spawn", lambda *a, **k: spawned.append(1) or real(*a, **k))
    (fake_gpu / "cand.cu").write_text(KERNEL.format(marker="HONEST"))
    with cudalab.Judge() as j:
        a = j.judge("copy", "cand.cu:cand@block=32x8", n=64)
        b = j.judge("copy", "cand.cu:cand@block=32x8", n=64)
    assert a["verdict"] == b["verdict"] == "correct"
    assert len(spawned) == 1  # one worker for both calls
    c = cudalab.judge("copy", "cand.cu:cand@block=32x8", n=64)
    assert c["verdict"] == "correct" and set(c) == set(a)


def _row(status, ms=1.0, extra=None, gbs=None):
    stats = summarize([ms] * 20) if status in (PASSED, INCORRECT) else None
    return Result(variant="+k", kind="kernel", status=status, stats=stats, gbs=gbs, extra=extra or {})


@pytest.mark.parametrize("status,code", [(PASSED, 0), (INCORRECT, 1), (FAILED, 3), (TIMEOUT, 4)])
def test_exit_codes_follow_the_status(status, code):
    obj = V.verdict(_row(status), None, None, metric="bandwidth", roofline=None, ceiling=None, floor=0.02, scan={})
    assert obj["exit_code"] == code == V.EXIT[obj["verdict"]]


def test_busy_after_stop_and_the_ceiling_for_flop_rows():
    fig = {"second_set": "ran", "answers_differ": True, "wrong": None, "fresh_ms": [1.0] * 4, "repeat_ms": [1.0] * 8,
           "idle_after_stop_ms": [0.9] * 12}
    obj = V.verdict(_row(PASSED, extra={"judge": fig}), None, None, metric="bandwidth", roofline=None, ceiling=None,
                    floor=0.02, scan={})
    assert obj["flags"] == ["busy_after_stop"] and obj["exit_code"] == 5
    fig["idle_after_stop_ms"] = [0.01] * 12
    row = Result(variant="+k", kind="kernel", status=PASSED, stats=summarize([1.0] * 20), gflops=2000.0,
                 extra={"judge": fig})
    obj = V.verdict(row, None, None, metric="flops", roofline=None, ceiling=1000.0, floor=0.02, scan={})
    assert obj["flags"] == ["suspect"] and obj["checks"]["speed"]["basis"] == "compute ceiling"
    obj = V.verdict(row, None, None, metric="flops", roofline=None, ceiling=5000.0, floor=0.02, scan={})
    assert obj["flags"] == [] and obj["exit_code"] == 0


def test_json_dash_writes_the_whole_record_alone_on_stdout(fake_workers, invoke):
    fake_workers({"naive": "incorrect"})
    res = invoke("copy", "--n", "64", "--variant", "naive,vec4", "--json", "-")
    assert res.exit_code == 1, res.output  # an incorrect row: exit 1, the record still written
    rec = json.loads(res.stdout)  # stdout is the record and nothing else
    assert [r["variant"] for r in rec["points"][0]["results"]] == ["naive", "vec4"]
    assert "vec4" in res.stderr and "incorrect" in res.stderr  # the table went to stderr
    ok = invoke("copy", "--n", "64", "--variant", "vec4", "--json", "-")
    assert ok.exit_code == 0 and json.loads(ok.stdout)["points"][0]["results"][0]["status"] == "passed"


def test_a_batched_row_is_judged_at_its_one_launch_time():
    """Launches 2..N of a batch find a warm L2: the speed check uses the row's flushed one-launch probes."""
    from cudalab.records.results import Roofline
    roof = Roofline(gbs=1000.0, source="memcpy_dtod", dtod_gbs=1000.0)
    row = Result(variant="+k", kind="kernel", status=PASSED, stats=summarize([0.005] * 20), gbs=1500.0,
                 extra={"batch": 40, "single_launch_ms": 0.010})
    obj = V.verdict(row, None, None, metric="bandwidth", roofline=roof, ceiling=None, floor=0.02, scan={})
    assert "suspect" not in obj["flags"] and obj["checks"]["speed"]["pct"] == pytest.approx(75.0)
    row = Result(variant="+k", kind="kernel", status=PASSED, stats=summarize([0.005] * 20), gbs=1500.0)
    obj = V.verdict(row, None, None, metric="bandwidth", roofline=roof, ceiling=None, floor=0.02, scan={})
    assert "suspect" in obj["flags"]


def test_a_hang_is_timeout_exit_4_and_the_json_still_comes(fake_workers, invoke, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "cand.cu").write_text(KERNEL.format(marker="HONEST"))
    fake_workers({"+cand": "hang"})
    res = invoke("judge", "copy", "--n", "64", "--add", "cand.cu:cand@block=32x8", "--timeout", "1")
    obj = json.loads(res.stdout)
    assert res.exit_code == 4 and obj["verdict"] == "timeout" and obj["status"] == "timeout", res.output
    assert obj["reference"]["status"] == "passed"  # the rows before it stand


def test_the_help_names_the_exit_codes(invoke):
    res = invoke("judge", "--help")
    assert res.exit_code == 0 and "4 timed out" in res.output and "2 refused input" in res.output


def test_a_judge_reuses_its_recent_reference_and_best_rows(fake_gpu, monkeypatch):
    import cudalab
    from cudalab.execute.local import drive

    sent = []
    real = drive.Session.run
    monkeypatch.setattr(drive.Session, "run", lambda self, plans, total=0: sent.append(
        [v.name for v in plans[0].variants]) or real(self, plans, total))
    (fake_gpu / "cand.cu").write_text(KERNEL.format(marker="HONEST"))
    with cudalab.Judge() as j:
        a = j.judge("copy", "cand.cu:cand@block=32x8", n=64)
        b = j.judge("copy", "cand.cu:cand@block=32x8", n=64)
    assert sent == [["memcpy_dtod", "block", "+cand"], ["+cand"]]
    assert a["reference"]["age_s"] == 0 and b["reference"]["age_s"] > 0 and b["reference"]["verdict"] == a["reference"]["verdict"]
    with cudalab.Judge(reuse_s=0) as j:
        j.judge("copy", "cand.cu:cand@block=32x8", n=64)
        j.judge("copy", "cand.cu:cand@block=32x8", n=64)
    assert sent[2:] == [["memcpy_dtod", "block", "+cand"]] * 2


def test_the_object_is_strict_json_whatever_the_figures():
    from cudalab.judging.core import _plain

    obj = _plain({"a": float("nan"), "b": (1, np.float32(2.5), np.int64(3)), "c": {"d": float("inf")}, "e": True})
    assert obj == {"a": None, "b": [1, 2.5, 3], "c": {"d": None}, "e": True}
    json.dumps(obj, allow_nan=False)


def test_pct_roofline_is_the_run_tables_column():
    from cudalab.records.results import Roofline
    row = Result(variant="+k", kind="kernel", status=PASSED, stats=summarize([1.0] * 20), gbs=500.0, gflops=800.0)
    lib = Result(variant="cublas", kind="library", status=PASSED, stats=summarize([1.0] * 20), gflops=1000.0)
    roof = Roofline(gbs=1000.0, source="memcpy_dtod", dtod_gbs=1000.0)
    bw = V.verdict(row, None, None, metric="bandwidth", roofline=roof, ceiling=None, floor=0.02, scan={})
    fl = V.verdict(row, lib, None, metric="flops", roofline=None, ceiling=None, floor=0.02, scan={})
    assert bw["pct_roofline"] == pytest.approx(50.0) and fl["pct_roofline"] == pytest.approx(80.0)


def test_the_command_reuses_the_rivals_and_roofline_an_earlier_command_measured(fake_gpu, invoke, monkeypatch):
    """Each command is a new process (here a new Judge): what the first measured, kept on disk, serves the second
    within KEEP_S; the candidate is still measured every time."""
    from cudalab.execute.local import drive

    sent = []
    real = drive.Session.run
    monkeypatch.setattr(drive.Session, "run", lambda self, plans, total=0: sent.append(
        ([v.name for v in plans[0].variants], plans[0].request.roofline)) or real(self, plans, total))
    _, out1 = judged(invoke, fake_gpu, "HONEST")
    _, out2 = judged(invoke, fake_gpu, "HONEST")
    a, b = json.loads(out1), json.loads(out2)
    assert sent == [(["memcpy_dtod", "block", "+cand"], True), (["+cand"], False)]
    assert b["roofline"] == a["roofline"] and b["roofline"] is not None and "before this candidate" in b["roofline_note"]
    assert b["reference"]["time"] == a["reference"]["time"] and b["reference"]["age_s"] > 0
    assert b["pct_roofline"] == a["pct_roofline"] and b["verdict"] == "correct"


def test_kept_rivals_expire_and_a_change_to_the_family_code_or_gpu_misses(tmp_path, monkeypatch):
    from cudalab.judging import kept as K
    from cudalab.records.results import Roofline

    monkeypatch.setattr(K, "folder", lambda: tmp_path)
    (tmp_path / "fam").mkdir()
    (tmp_path / "fam" / "k.cu").write_text("a")
    gpu = {"name": "G", "index": 0}
    code = K.code_digest(tmp_path / "fam", None)
    k = K.key(gpu, "req", ("ref",), code)
    row = _row(PASSED)
    K.save(k, K.Kept({"ref": row}, Roofline(gbs=1.0, source="memcpy_dtod", dtod_gbs=1.0), "", __import__("time").time()))
    got = K.load(k)
    assert got is not None and got.rows["ref"].stats.median == row.stats.median and got.roofline.gbs == 1.0
    assert K.load(k, keep_s=0) is None
    monkeypatch.setattr(K.time, "time", lambda: got.measured + K.KEEP_S + 1)
    assert K.load(k) is None  # too old
    (tmp_path / "fam" / "k.cu").write_text("b")
    assert K.key(gpu, "req", ("ref",), K.code_digest(tmp_path / "fam", None)) != k
    assert K.key(dict(gpu, index=1), "req", ("ref",), code) != k
    assert K.key(gpu, "req2", ("ref",), code) != k
    (tmp_path / f"{K.PREFIX}{k}.json").write_text("{not json")
    assert K.load(k) is None


def test_the_kept_rivals_key_hashes_the_familys_kernels_and_python_module(fake_gpu, invoke, monkeypatch):
    from cudalab.judging import kept as K

    seen = []
    real = K.code_digest
    monkeypatch.setattr(K, "code_digest", lambda d, f: seen.append((d, f)) or real(d, f))
    judged(invoke, fake_gpu, "HONEST")
    (directory, module), = seen
    assert Path(directory).name == "copy" and Path(module).as_posix().endswith("cudalab/families/copy.py")
    (fake_gpu / "fam").mkdir()
    (fake_gpu / "fam.py").write_text("a")
    a = real(fake_gpu / "fam", fake_gpu / "fam.py")
    (fake_gpu / "fam.py").write_text("b")
    assert real(fake_gpu / "fam", fake_gpu / "fam.py") != a
