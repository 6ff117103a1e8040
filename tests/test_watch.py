"""``cudalab watch`` on the CPU: a fake GPU (tests/fake_watch.py: the real worker loop in a thread, NumPy
kernels whose behaviour follows the kernel file's text) and fake file events (each wait makes the next
edit), so the whole loop runs as on a GPU: only the edited row re-runs, its verdict is the one
``compare`` gives, a wrong kernel, an nvcc error, a hang and a signature that does not fit are shown and
watching goes on, Ctrl-C ends cleanly, and ``--json`` keeps every version."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest

import fake_watch
from cudalab import plan as planning
from cudalab.records.results import load_record
from cudalab.watch import core, events, sources

RUN = Path(__file__).parent / "data" / "runs" / "nvidia-h200-transpose.json"

KERNEL = """// my transpose{note}
extern "C" __global__ void my_transpose(float *out, const float *in, int rows, int cols, int pin, int pout)
{{
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < cols && y < rows) out[(size_t)x * pout + y] = in[(size_t)y * pin + x];
}}
"""


def kernel(note: str = "") -> str:
    return KERNEL.format(note=note)


class Edits:
    """File events that make the edits: each wait performs the next one (then reports the files as
    possibly changed); with none left, Ctrl-C."""

    name = "fake events"

    def __init__(self, *steps):
        self.steps = list(steps)
        self.waits = 0

    def wait(self, paths, timeout=None):
        self.waits += 1
        if not self.steps:
            raise KeyboardInterrupt
        self.steps.pop(0)()
        return set(paths)


@pytest.fixture
def gpu(monkeypatch, inline_worker, tmp_path):
    """The fake GPU, its workers threads of this process; the test's folder is the working folder."""
    fake_watch.install(monkeypatch.setattr)
    from cudalab.execute.local import process as W

    monkeypatch.setattr(W, "spawn", lambda device, energy=False: _track(inline_worker, device, energy))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _track(started, device, energy):
    from fake_workers import ThreadWorker

    w = ThreadWorker(device, energy)
    started.append(w)
    return w


def watch(invoke, monkeypatch, edits, *args):
    monkeypatch.setattr(events, "best", lambda poll=False, interval=0.25: edits)
    return invoke("watch", *args)


def write(path: Path, text: str) -> None:
    """Save as an editor does: a new file renamed over the old one."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def versions(out: str) -> list[str]:
    """The output of each version (a pipe: each starts with its 'cudalab watch · vN' line)."""
    parts = out.split("cudalab watch · v")[1:]
    return ["v" + p for p in parts]


def row(text: str, name: str) -> str:
    return next(ln for ln in text.splitlines() if ln.strip().startswith(name + " "))


def test_an_edit_reruns_only_its_row_with_a_verdict_and_a_wrong_kernel_or_nvcc_error_is_shown(gpu, invoke,
                                                                                               monkeypatch):
    k = gpu / "mine.cu"
    k.write_text(kernel())
    session = gpu / "session.json"
    edits = Edits(lambda: write(k, kernel(", tiled through __shared__ memory")),  # faster
                  lambda: write(k, kernel(", tiled through __shared__ memory, with a bug")),  # wrong
                  lambda: write(k, kernel(", a typo")),  # does not compile
                  lambda: write(k, kernel()))  # back to the first: slower than the last that passed
    res = watch(invoke, monkeypatch, edits, "transpose", "--n", "64", "--variant", "naive",
                "--add", "mine.cu:my_transpose", "--json", session)
    assert res.exit_code == 0, res.output
    v = versions(res.output)
    assert len(v) == 5, res.output
    assert "first run" in v[0] and "vs last" not in v[0]
    assert "mine.cu changed → re-ran +my_transpose (1 of 2 rows" in v[1]
    assert "kept v1" in row(v[1], "naive") and "faster 0.40× vs v1" in row(v[1], "+my_transpose")
    assert "+my_transpose: faster than v1 — 0.400× the time (95% CI 0.400–0.400; p " in v[1]
    assert "incorrect" in row(v[2], "+my_transpose") and "kept v1" in row(v[2], "naive")
    assert "failed: nvcc could not compile" in row(v[3], "+my_transpose")
    assert 'mine.cu(1): error: expected a ";"' in v[3]  # nvcc's log, in place
    assert "slower 2.50× vs v2" in row(v[4], "+my_transpose")  # judged against the last version that passed
    assert "watch ended after 5 versions" in res.output
    saved = json.loads(session.read_text())
    assert [x["version"] for x in saved["watch"]["versions"]] == [1, 2, 3, 4, 5]
    assert [x["verdict"] for x in saved["watch"]["versions"][1]["verdicts"]] == ["faster"]
    assert saved["watch"]["versions"][4]["verdicts"][0]["against"] == 2
    rec = load_record(session)  # the latest table is a run record: report and compare read the file
    assert {r.variant: r.status.value for r in rec.points[0].results} == {"naive": "passed", "+my_transpose": "passed"}
    rep = invoke("report", str(session))
    assert rep.exit_code == 0 and "+my_transpose" in rep.output


def test_a_save_of_the_same_text_runs_nothing(gpu, invoke, monkeypatch):
    k = gpu / "mine.cu"
    k.write_text(kernel())
    edits = Edits(lambda: write(k, kernel()), lambda: k.touch())
    res = watch(invoke, monkeypatch, edits, "transpose", "--n", "64", "--variant", "naive", "--add",
                "mine.cu:my_transpose")
    assert res.exit_code == 0 and len(versions(res.output)) == 1, res.output
    assert edits.waits == 3


def test_a_header_the_kernel_includes_is_watched(gpu, invoke, monkeypatch):
    (gpu / "common.cuh").write_text("#define SCALE 1\n")
    k = gpu / "mine.cu"
    k.write_text('#include "common.cuh"\n' + kernel())
    edits = Edits(lambda: write(gpu / "common.cuh", "#define SCALE 1  // __shared__ now\n"))
    res = watch(invoke, monkeypatch, edits, "transpose", "--n", "64", "--variant", "naive", "--add",
                "mine.cu:my_transpose")
    v = versions(res.output)
    assert len(v) == 2 and "common.cuh changed → re-ran +my_transpose" in v[1], res.output
    assert "common.cuh" in res.output.split("watching")[1]


def test_all_reruns_every_row_and_an_unchanged_kernel_is_the_same(gpu, invoke, monkeypatch):
    k = gpu / "mine.cu"
    k.write_text(kernel())
    edits = Edits(lambda: write(k, kernel(" (renamed nothing)")))
    res = watch(invoke, monkeypatch, edits, "transpose", "--n", "64", "--variant", "naive", "--add",
                "mine.cu:my_transpose", "--all")
    v = versions(res.output)
    assert len(v) == 2 and "re-ran +my_transpose, naive (2 of 2 rows)" in v[1], res.output
    assert "same 1.00× vs v1" in row(v[1], "naive") and "same 1.00× vs v1" in row(v[1], "+my_transpose")


def test_a_family_file_reruns_every_row_and_its_kernel_file_only_its_rows(gpu, invoke, monkeypatch, family_tree):
    root = family_tree("transpose")
    toml, cu = root / "transpose" / "family.toml", root / "transpose" / "transpose.cu"
    k = gpu / "mine.cu"
    k.write_text(kernel())
    edits = Edits(lambda: write(cu, cu.read_text() + "\n// an edit\n"),
                  lambda: write(toml, toml.read_text() + "\n# an edit\n"))
    res = watch(invoke, monkeypatch, edits, "transpose", "--n", "64", "--variant", "naive,bankopt", "--add",
                "mine.cu:my_transpose", "--no-roofline")
    v = versions(res.output)
    assert len(v) == 3, res.output
    assert "transpose.cu changed → re-ran bankopt, naive (2 of 3 rows" in v[1]
    assert "kept v1" in row(v[1], "+my_transpose")
    assert "family.toml changed → re-ran +my_transpose, bankopt, naive (3 of 3 rows)" in v[2]


def test_a_kernel_that_no_longer_fits_is_shown_and_the_next_save_runs_it(gpu, invoke, monkeypatch):
    k = gpu / "mine.cu"
    k.write_text(kernel())
    edits = Edits(lambda: write(k, kernel().replace("my_transpose", "my_transpose2")),
                  lambda: write(k, kernel(", __shared__")))
    res = watch(invoke, monkeypatch, edits, "transpose", "--n", "64", "--variant", "none", "--add",
                "mine.cu:my_transpose")
    v = versions(res.output)
    assert len(v) == 3, res.output
    assert "cudalab: --add 'mine.cu:my_transpose':" in v[1] and "has no kernel my_transpose (its kernels: my_transpose2)" in v[1]
    assert "the table is the last one that ran" in v[1]
    assert "faster 0.40× vs v1" in row(v[2], "+my_transpose")


def test_without_a_gpu_watch_says_so_in_one_line_ends_and_keeps_the_saved_run(fake_workers, invoke, monkeypatch,
                                                                              one_line_exit_2, tmp_path):
    fake_workers({"_open": "error"})
    monkeypatch.chdir(tmp_path)
    saved = tmp_path / "old-run.json"
    saved.write_bytes(RUN.read_bytes())
    edits = Edits(lambda: None, lambda: None)  # saves that would run it again, were it still watching
    res = watch(invoke, monkeypatch, edits, "transpose", "--n", "64", "--variant", "naive", "--json", str(saved))
    one_line_exit_2(res, "no CUDA GPU found (fake)")
    assert edits.waits == 0
    assert saved.read_bytes() == RUN.read_bytes()


def test_a_session_that_measured_nothing_never_replaces_a_saved_run(gpu, invoke, monkeypatch):
    k = gpu / "mine.cu"
    k.write_text(kernel().replace("my_transpose", "not_yet"))
    saved = gpu / "old-run.json"
    saved.write_bytes(RUN.read_bytes())
    res = watch(invoke, monkeypatch, Edits(), "transpose", "--n", "64", "--variant", "none", "--add",
                "mine.cu:my_transpose", "--json", str(saved))
    assert res.exit_code == 0 and "has no kernel my_transpose" in res.output, res.output
    assert saved.read_bytes() == RUN.read_bytes()


def test_bad_options_are_refused_in_one_line_before_watching(gpu, invoke, monkeypatch, one_line_exit_2):
    edits = Edits()
    one_line_exit_2(watch(invoke, monkeypatch, edits, "transpose", "--n", "lots"), "--n")
    one_line_exit_2(watch(invoke, monkeypatch, edits, "nosuch"), "no family 'nosuch'")
    one_line_exit_2(watch(invoke, monkeypatch, edits, "transpose", "--ncu"), "watch does not take --ncu")
    one_line_exit_2(watch(invoke, monkeypatch, edits, "transpose", "--add", "gone.cu:k"), "no such file")
    assert edits.waits == 0


def test_ctrl_c_while_waiting_ends_cleanly_and_ends_the_warm_workers(gpu, invoke, monkeypatch, inline_worker):
    k = gpu / "mine.cu"
    k.write_text(kernel())
    res = watch(invoke, monkeypatch, Edits(), "transpose", "--n", "64", "--variant", "none", "--add",
                "mine.cu:my_transpose")
    assert res.exit_code == 0 and "watch ended after 1 version" in res.output, res.output
    assert len(inline_worker) == 2  # the first run's worker, and the next version's, started while waiting
    assert not any(w.thread.is_alive() for w in inline_worker)


def test_a_hanging_kernel_is_a_row_and_watching_goes_on(fake_workers, invoke, monkeypatch, family_tree, tmp_path):
    root = family_tree("transpose")
    cu = root / "transpose" / "transpose.cu"
    use = fake_workers({})
    # the fake workers act on the environment they start with: none may start before the edit sets it
    monkeypatch.setattr(core.Watcher, "warm", lambda self: None)

    def hang():
        use({"naive": "hang"})
        write(cu, cu.read_text() + "\n// an edit that hangs\n")

    def crash():
        use({"naive": "die"})
        write(cu, cu.read_text() + "\n// an edit that crashes\n")

    def fixed():
        use({})
        write(cu, cu.read_text() + "\n// fixed\n")

    res = watch(invoke, monkeypatch, Edits(hang, crash, fixed), "transpose", "--n", "64", "--variant", "naive",
                "--timeout", "1", "--no-roofline")
    v = versions(res.output)
    assert len(v) == 4, res.output
    assert "timeout: no result within 1 s" in row(v[1], "naive")
    assert "failed: the GPU worker died" in row(v[2], "naive")
    assert "passed" in row(v[3], "naive") and "vs v1" in row(v[3], "naive")  # 3 fake samples: unsure


# --- the pieces ------------------------------------------------------------------------------------------

def test_selected_rows_and_their_sources(tmp_path):
    from cudalab import catalog
    from cudalab.worker import executor as runner
    from cudalab.catalog import user

    spec = catalog.family("transpose")
    k = tmp_path / "mine.cu"
    (tmp_path / "h.cuh").write_text("")
    k.write_text('#include "h.cuh"\n' + kernel())
    req = planning.RunRequest(family="transpose", variants="naive,host", add=user.parse_adds([f"{k}:my_transpose"]))
    rows = sources.selected(spec, req)
    assert [v.name for v in rows] == ["naive", "host", "+my_transpose"]
    assert sources.row_sources(spec, rows[0]) == [spec.directory / "transpose.cu"]
    assert sources.row_sources(spec, rows[1]) == []
    assert sources.row_sources(spec, rows[2]) == [k, (tmp_path / "h.cuh").resolve()]
    files = sources.family_files(spec)
    assert files[0].name == "family.toml" and files[1].name == "transpose.py"
    only = sources.selected(spec, planning.RunRequest(family="transpose", variants="none", add=req.add))
    assert [v.name for v in only] == ["+my_transpose"]


@pytest.mark.parametrize("kind", ["polling", "watchfiles"])
def test_file_events_see_a_save_by_rename_and_time_out_without_one(tmp_path, kind):
    if kind == "watchfiles":
        pytest.importorskip("watchfiles")
        source = events.WatchfilesEvents()
    else:
        source = events.PollEvents(0.02)
    f = tmp_path / "k.cu"
    f.write_text("a")
    t0 = time.monotonic()
    assert source.wait([f], timeout=0.3) == set()
    assert time.monotonic() - t0 >= 0.25
    threading.Timer(0.3, lambda: write(f, "b")).start()
    assert source.wait([f], timeout=10) == {f}


def test_watchfiles_that_fails_falls_back_to_polling(tmp_path):
    pytest.importorskip("watchfiles")
    source = events.WatchfilesEvents()

    def broken(*a, **k):
        raise OSError(28, "inotify watch limit reached")

    source._watch = broken
    f = tmp_path / "k.cu"
    f.write_text("a")
    assert source.wait([f], timeout=0.1) == {f}  # look now
    assert source.name.startswith("polling: watchfiles failed (OSError")
    threading.Timer(0.2, lambda: write(f, "b")).start()
    assert source.wait([f], timeout=5) == {f}


def test_best_falls_back_to_polling_without_watchfiles(monkeypatch):
    import builtins

    real = builtins.__import__

    def no_watchfiles(name, *a, **k):
        if name == "watchfiles":
            raise ImportError(name)
        return real(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_watchfiles)
    assert events.best().name == "polling"
    assert events.best(poll=True).name == "polling"


def test_an_outside_familys_module_is_watched_and_a_broken_one_is_shown(gpu, invoke, monkeypatch):
    from test_problem import make_family

    folder = make_family(gpu / "families")
    monkeypatch.setenv("CUDALAB_PATH", str(gpu / "families"))
    module = folder / "dbl.py"
    text = module.read_text()
    edits = Edits(lambda: write(module, text + "\n# an edit\n"),
                  lambda: write(module, text + "\nthis is not python\n"),
                  lambda: write(module, text))
    res = watch(invoke, monkeypatch, edits, "dbl", "--n", "64", "--no-roofline")
    v = versions(res.output)
    assert len(v) == 4, res.output
    assert "dbl.py changed → re-ran bad, good (2 of 2 rows)" in v[1]
    assert "cudalab: " in v[2] and "dbl.py:18: importing it raised NameError" in v[2]
    assert "re-ran bad, good (2 of 2 rows)" in v[3]
    assert "k.cu" in res.output.split("watching")[-1]


def test_an_edited_family_toml_is_read_again(gpu, invoke, monkeypatch, family_tree):
    """The command holds its catalog (one read a command); each watched version reads it again, so a
    changed block in family.toml is what the next version runs."""
    root = family_tree("transpose")
    toml = root / "transpose" / "family.toml"
    text = toml.read_text()
    assert text.count('block = "32x32"\ndescription = "global memory only') == 1
    edits = Edits(lambda: write(toml, text.replace('block = "32x32"\ndescription = "global memory only',
                                                   'block = "16x16"\ndescription = "global memory only')))
    res = watch(invoke, monkeypatch, edits, "transpose", "--n", "64", "--variant", "naive", "--no-roofline")
    v = versions(res.output)
    assert len(v) == 2, res.output
    assert " 32x32 " in row(v[0], "naive") and " 16x16 " in row(v[1], "naive"), res.output


@pytest.mark.parametrize("where", ["before", "after"])
def test_poll_is_taken_before_or_after_the_family(gpu, invoke, monkeypatch, where):
    asked = []

    def best(poll=False, interval=0.25):
        asked.append(poll)
        return Edits()

    monkeypatch.setattr(events, "best", best)
    args = ["--poll", "transpose", "--n", "64", "--variant", "naive"] if where == "before" else [
        "transpose", "--poll", "--n", "64", "--variant", "naive"]
    res = invoke("watch", *args)
    assert res.exit_code == 0, res.output
    assert asked == [True]
