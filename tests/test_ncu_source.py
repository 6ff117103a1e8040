"""ncu's source page and advice without a GPU or ncu: the parser on pages captured from real ncu runs
(tests/data/ncu-source: an H100, ncu 2025.3.1, `bash tests/data/ncu-source/capture.sh`), the per-variant
lines of the ladders, the rules, ``--source``/``--advice`` through click on the committed exports, the
live flow with a fake ncu, saved runs, and that -lineinfo leaves the kernels' instructions alone."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from fake_tools import FakeRun, planned_rows

from cudalab import ncu
from cudalab.ncu.parse import Rule, parse_csv
from cudalab.ncu.source import PAGE_MARKER, SourceLine, assign_blocks, parse_source, split_pages, split_row
from cudalab.report.source import hot, render_source
from cudalab.records.results import PASSED
from cudalab.plan import RunRequest

DATA = Path(__file__).parent / "data" / "ncu-source"
SQUARE, TRANSPOSE, REDUCE = DATA / "smem-square.csv", DATA / "transpose.csv", DATA / "reduce.csv"
RECT = DATA / "smem-rect.csv"  # cudalab ncu smem-rect --source --variant row-col,col-col,row-col-pad --export, H100


def pages(path: Path) -> tuple[str, str]:
    details, source = split_pages(path.read_text())
    assert source is not None
    return details, source


def line(rep_row, no: int) -> SourceLine:
    return next(ln for ln in rep_row.lines if ln.line == no)


# --- the parser --------------------------------------------------------------------------------------

def test_split_row_takes_unescaped_quotes_and_separators_in_the_text():
    assert split_row('"37","extern "C" __global__ void f(int *a)","-","5"', 4, 1) == \
        ["37", 'extern "C" __global__ void f(int *a)', "-", "5"]
    assert split_row('"9","printf("a","b");","-","1"', 4, 1) == ["9", 'printf("a","b");', "-", "1"]
    assert split_row('"1","2",', 2, 1) == ["1", "2"]  # a trailing separator
    assert split_row('"1","2', 2, 1) is None  # cut off


def test_source_page_blocks_follow_the_launches():
    _, page = pages(TRANSPOSE)
    blocks = parse_source(page)
    assert [b.function for b in blocks] == ["transpose_block", "transpose_block", "my_transpose"]
    assert blocks[0].file.endswith("cuda_src/transpose/transpose.cu")
    assert blocks[2].file.endswith("docs/examples/my_transpose.cu")
    per = assign_blocks(blocks, [(0, "transpose_block"), (1, "transpose_block"), (2, "my_transpose")])
    assert per[0] == (blocks[0],) and per[1] == (blocks[1],) and per[2] == (blocks[2],)


def test_transpose_tile_column_read_32_way_in_block_1_way_in_bankopt():
    _, page = pages(TRANSPOSE)
    block, bankopt, mine = parse_source(page)
    b55, o55 = next(ln for ln in block.lines if ln.line == 55), next(ln for ln in bankopt.lines if ln.line == 55)
    assert "tile[threadIdx.x][threadIdx.y]" in b55.text and b55.text == o55.text
    assert b55.shared_requests == 524288 and b55.shared_wavefronts == 16777216
    assert b55.wavefronts_per_request == 32 and b55.nway == 32
    assert o55.wavefronts_per_request == 1 and o55.nway == 1
    assert b55.sectors_per_request == 4 and b55.global_requests == 524288  # the coalesced store of the same line
    assert b55.stalls[0][0] == "short_sb"  # waiting on shared memory
    m14 = next(ln for ln in mine.lines if ln.line == 14)
    assert m14.wavefronts_per_request == 1 and m14.stalls[0][0] == "long_sb"


def test_smem_square_row_and_column_reads():
    _, page = pages(SQUARE)
    by = {b.function: {ln.line: ln for ln in b.lines} for b in parse_source(page)}
    assert by["setRowReadRow"][33].wavefronts_per_request == 1  # out[...] = tile[y][x]
    assert by["setRowReadCol"][52].wavefronts_per_request == 1  # tile[y][x] = ...: the row store
    assert by["setRowReadCol"][54].wavefronts_per_request == 32  # out[...] = tile[x][y]: the column read
    assert by["setColReadCol"][42].wavefronts_per_request == 32 and by["setColReadCol"][44].wavefronts_per_request == 32
    assert by["setRowReadColPad"][77].wavefronts_per_request == 1
    assert by["setRowReadColDyn"][66].shared_requests == 32 and by["setRowReadColDyn"][66].shared_wavefronts == 1024


def test_smem_rect_column_reads_16_way_and_padding_removes_it():
    _, page = pages(RECT)
    by = {b.function: {ln.line: ln for ln in b.lines} for b in parse_source(page)}
    assert by["setRowReadCol"][55].wavefronts_per_request == 1  # tile[y][x] = ...: the row store
    assert by["setRowReadCol"][57].wavefronts_per_request == 16  # out[...] = tile[icol][irow]: the column read
    assert by["setColReadCol"][43].wavefronts_per_request == 16 and by["setColReadCol"][45].wavefronts_per_request == 16
    assert by["setRowReadColPad"][82].wavefronts_per_request == 1  # the same read with IPAD=2


def test_reduce_neighbored_divergent_branch():
    _, page = pages(REDUCE)
    nb, il = parse_source(page)
    n46, n47 = ({ln.line: ln for ln in nb.lines}[k] for k in (46, 47))
    assert "tid % (2 * stride)" in n46.text and n46.divergent == 3112960
    assert n47.threads_per_inst == pytest.approx(9.49, abs=0.01)  # the add: under a third of the warp active
    i85 = {ln.line: ln for ln in il.lines}[85]
    assert i85.threads_per_inst == pytest.approx(28.5, abs=0.1)
    assert sum(ln.divergent or 0 for ln in il.lines) == 163840


def test_source_only_page_gives_text_without_figures():
    text = '"File Name","/k.cu"\n"Line No","Source"\n"1","// hi"\n"2","int x;"\n'
    (b,) = parse_source(text)
    assert b.file == "/k.cu" and [(ln.line, ln.text, ln.insts) for ln in b.lines] == [(1, "// hi", None), (2, "int x;", None)]


def test_details_page_with_the_full_set_reads_metrics_and_rules_whole():
    details, _ = pages(TRANSPOSE)
    p = parse_csv(details)
    assert not p.truncated and [ln.kernel for ln in p.launches] == ["transpose_block", "transpose_block", "my_transpose"]
    assert p.launches[0].value(ncu.SMEM_LD_WF) == 16862507
    conflicts = [r for r in p.rules if r.name == "SharedMemoryConflicts"]
    assert [r.launch_id for r in conflicts] == [0]  # block only
    r = conflicts[0]
    assert r.kind == "OPT" and r.speedup == pytest.approx(58.15) and r.scope == "global" and "32.2 - way" in r.description
    assert Rule.from_dict(r.to_dict(), 0) == r


# --- reports, import, render ------------------------------------------------------------------------

def test_import_of_committed_exports_gives_lines_and_rules():
    rep = ncu.load_import(TRANSPOSE, RunRequest(family="transpose"))
    assert rep.has_source and rep.has_rules and not rep.incomplete
    by = {r.variant: r for r in rep.rows}
    assert set(by) == {"block", "bankopt", "+my_transpose"}
    assert line(by["block"], 55).wavefronts_per_request == 32 and line(by["bankopt"], 55).wavefronts_per_request == 1
    assert any(r.name == "SharedMemoryConflicts" for r in by["block"].rules)
    assert not any(r.name == "SharedMemoryConflicts" for r in by["bankopt"].rules)
    assert line(by["+my_transpose"], 20).file.endswith("my_transpose.cu")


def test_hot_lines_by_samples_and_by_excess_when_too_short_to_sample():
    rep = ncu.load_import(TRANSPOSE, RunRequest(family="transpose"))
    block = next(r for r in rep.rows if r.variant == "block")
    assert [f["line"] for f in hot(block.lines, 3)] == [55, 50, 56]
    sq = ncu.load_import(SQUARE, RunRequest(family="smem-square"))
    rowcol = next(r for r in sq.rows if r.variant == "row-col")
    assert [f["line"] for f in hot(rowcol.lines, 2)] == [54, 52]  # 1 sample: the 32-way read first
    # a flagged line outside the top n replaces the coolest unflagged one
    lines = [SourceLine("k.cu", i, f"l{i}", samples=100 - i, insts=10) for i in range(10)]
    lines.append(SourceLine("k.cu", 99, "bad", samples=1, insts=1, shared_excess=5))
    assert 99 in [f["line"] for f in hot(lines, 3)]


def test_cli_source_and_advice_on_the_committed_export(invoke):
    res = invoke("ncu", "transpose", "--import", str(TRANSPOSE), "--source", "--lines", "3")
    assert res.exit_code == 0, res.output
    out = res.output
    assert "block (transpose_block, " in out and "bankopt (transpose_block, " in out and "+my_transpose" in out
    row55 = [ln for ln in out.splitlines() if ln.strip().startswith("55 ") and "tile[threadIdx.x]" in ln]
    assert len(row55) == 2  # block and bankopt
    assert "SharedMemoryConflicts" in out and "advice ~58%" in out
    assert "wf/req" in out and "-lineinfo" in out
    res = invoke("ncu", "transpose", "--import", str(TRANSPOSE), "--advice")
    assert res.exit_code == 0 and "advice ~" in res.output and "smem req" not in res.output
    res = invoke("ncu", "transpose", "--import", str(TRANSPOSE), "--source", "--no-advice")
    assert "advice ~" not in res.output and "smem req" in res.output


def test_cli_source_on_a_file_without_a_source_page_says_so(invoke):
    res = invoke("ncu", "transpose", "--import", str(Path(__file__).parent / "data" / "ncu_derived_thousands.csv"),
                 "--source")
    assert res.exit_code == 0 and "no per-line figures" in res.output and "no advice" in res.output


def test_render_fits_the_width():
    rep = ncu.load_import(REDUCE, RunRequest(family="reduce"))
    text = render_source(rep.rows, 4, width=100)
    body = [t for t in text if t.startswith("  ")]
    assert body and all(len(t) <= 100 for t in body)
    assert any("46" in t and "3.11M" in t for t in body)  # neighbored's divergent branch


# --- the live flow with a fake ncu -------------------------------------------------------------------

class SourceRun(FakeRun):
    """A fake ncu whose report reads back as the captured transpose pages."""

    def __init__(self, **kw):
        details, self.page = pages(TRANSPOSE)
        details = "\n".join(ln for ln in details.splitlines() if not ln.startswith(ncu.MARKER))  # ncu's own text
        super().__init__(csv=details, **kw)

    def __call__(self, argv, **kw):
        if "--page" in argv and argv[argv.index("--page") + 1] == "source":
            self.calls.append((list(argv), kw))
            return subprocess.CompletedProcess(argv, 0, self.page, "")
        return super().__call__(argv, **kw)


REQ = RunRequest(family="transpose", n="4096", variants="block,bankopt")


def test_profile_with_source_collects_the_full_set_and_reads_the_source_page(tmp_path):
    run = SourceRun(rows=lambda req: planned_rows(req))
    export = tmp_path / "t.csv"
    rep = ncu.profile(REQ, ncu="/opt/ncu", run=run, source=True, export=export)
    argv = run.calls[0][0]
    assert argv[argv.index("--set") + 1] == "full" and argv[argv.index("--import-source") + 1] == "yes"
    assert any(c[0][c[0].index("--print-source") + 1] == "cuda,sass" for c in run.calls if "--print-source" in c[0])
    by = {r.variant: r for r in rep.rows}
    assert line(by["block"], 55).nway == 32 and line(by["bankopt"], 55).nway == 1 and rep.has_source
    assert PAGE_MARKER in export.read_text()
    again = ncu.load_import(export, RunRequest(family="transpose"))
    assert [(r.variant, len(r.lines), len(r.rules)) for r in again.rows] == \
        [(r.variant, len(r.lines), len(r.rules)) for r in rep.rows]
    plain = SourceRun(rows=lambda req: planned_rows(req))
    ncu.profile(REQ, ncu="/opt/ncu", run=plain)
    assert "--set" not in plain.calls[0][0] and not any("--print-source" in c[0] for c in plain.calls)


# --- -lineinfo ---------------------------------------------------------------------------------------

def _sections(path: Path) -> dict[str, bytes]:
    """An ELF64 file's sections by name (enough of ELF to compare cubins)."""
    d = path.read_bytes()
    (shoff,) = struct.unpack_from("<Q", d, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", d, 0x3A)
    hdr = [struct.unpack_from("<IIQQQQIIQQ", d, shoff + i * shentsize) for i in range(shnum)]
    so = hdr[shstrndx][4]
    return {d[so + h[0]:d.index(b"\0", so + h[0])].decode(): d[h[4]:h[4] + h[5]] for h in hdr}


@pytest.mark.nvcc
@pytest.mark.parametrize("src", ["cuda_src/transpose/transpose.cu", "cuda_src/reduce/reduce.cu",
                                 "cuda_src/smem-square/smem_square.cu"])
def test_lineinfo_adds_line_tables_not_instructions(src, tmp_path):
    """Every cudalab build has -lineinfo (build.FLAGS, part of the cache key): the SASS is the same bytes
    as nvcc's without it."""
    from cudalab import build

    assert "-lineinfo" in build.FLAGS
    root = Path(__file__).parent.parent
    path = root / src
    with_cubin = tmp_path / "with.cubin"  # cudalab's own build: the session's, usually already made
    with_cubin.write_bytes(build.build(path, {}, "sm_90").cubin)
    without = tmp_path / "without.cubin"
    subprocess.run([build.find_nvcc(), "-cubin", "-arch=sm_90", "-I", str(path.parent), "-o", str(without), str(path)],
                   check=True, capture_output=True)
    out = {"with": _sections(with_cubin), "without": _sections(without)}
    texts = [k for k in out["with"] if k.startswith(".text.")]
    assert texts and all(out["with"][k] == out["without"][k] for k in texts)
    assert ".debug_line" in out["with"] and ".debug_line" not in out["without"]


def test_import_of_an_ncu_rep_reads_its_source_page_when_asked(tmp_path):
    rep_path = tmp_path / "t.ncu-rep"
    rep_path.write_bytes(b"NCU")
    run = SourceRun()
    rep = ncu.load_import(rep_path, RunRequest(family="transpose", variants="block,bankopt"), ncu="/opt/ncu",
                          run=run, source=True)
    assert rep.has_source and line(rep.rows[0], 55).nway == 32
    assert run.calls[-1][0][1:5] == ["--import", str(rep_path), "--page", "source"]
    plain = SourceRun()
    assert not ncu.load_import(rep_path, RunRequest(family="transpose", variants="block,bankopt"), ncu="/opt/ncu",
                               run=plain).has_source and len(plain.calls) == 1


def _real_ncu() -> str | None:
    try:
        return ncu.find_ncu()
    except Exception:  # noqa: BLE001
        return None


@pytest.mark.skipif(_real_ncu() is None, reason="ncu is not installed")
def test_import_of_the_committed_ncu_rep_with_real_ncu(invoke):
    """reduce.ncu-rep (+ its .cudalab launch log), profiled on an H100: the same views as the CSV export."""
    res = invoke("ncu", "reduce", "--import", str(DATA / "reduce.ncu-rep"), "--source", "--lines", "3")
    assert res.exit_code == 0, res.output
    assert "neighbored (reduce_neighbored" in res.output and "3.11M" in res.output


# --- saved runs ----------------------------------------------------------------------------------------

def test_json_record_keeps_lines_and_rules_and_report_renders_them(invoke, tmp_path):
    out = tmp_path / "ncu.json"
    res = invoke("ncu", "reduce", "--import", str(REDUCE), "--source", "--json", str(out))
    assert res.exit_code == 0, res.output
    saved = json.loads(out.read_text())
    row = saved["points"][0]["results"][0]
    assert row["variant"] == "neighbored" and row["extra"]["ncu_kernel"] == "reduce_neighbored"
    l46 = next(ln for ln in row["extra"]["ncu_lines"] if ln["line"] == 46)
    assert l46["divergent"] == 3112960 and SourceLine.from_dict(l46).divergent == 3112960
    assert any(r["name"] == "UncoalescedGlobalAccess" for r in row["extra"]["ncu_rules"])
    rep = invoke("report", str(out))
    assert rep.exit_code == 0, rep.output
    assert "neighbored (reduce_neighbored" in rep.output and "3.11M" in rep.output
    assert "UncoalescedGlobalAccess" in rep.output
    lines = [ln for ln in rep.output.splitlines() if ln.strip().startswith("46 ")]
    assert lines and "tid % (2 * stride)" in lines[0]


def test_add_ncu_with_source_puts_lines_and_rules_in_the_rows():
    from cudalab.records.results import Result, RunPoint

    point = RunPoint(family="transpose", metric="bandwidth", problem={},
                     results=(Result("block", "kernel", PASSED), Result("bankopt", "kernel", PASSED)))
    out = ncu.add_ncu(point, REQ, ncu="/opt/ncu", run=SourceRun(rows=lambda req: planned_rows(req)), source=True)
    block = out.results[0].extra
    assert next(ln for ln in block["ncu_lines"] if ln["line"] == 55)["nway"] == 32 and block["ncu_rules"]
    assert "ncu_ld_wpr" in block


def test_report_package_renders_saved_views_without_importing_ncu():
    code = ("import sys, cudalab.report; from cudalab.report.source import saved_view; "
            "print(sorted(m for m in sys.modules if m.startswith('cudalab.ncu')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).parent.parent).stdout
    assert out.strip() == "[]"


def test_a_launch_spanning_a_header_names_the_header_lines():
    """Two blocks of one launch (its .cu and an included header), then the next launch of the same kernel."""
    def blk(file, nums, wf):
        rows = "".join(f'"{n}","x = tile[{n}];","-","-","{10 * n}","{n}"\n' for n in nums)
        return (f'"File Path","{file}"\n"Function Name","k"\n'
                '"Line No","Source","Address","Source","Warp Stall Sampling (All Samples)","L1 Wavefronts Shared"\n'
                + rows)
    page = blk("/s/k.cu", [5, 6], 1) + blk("/s/inc/util.cuh", [40], 1) + blk("/s/k.cu", [5, 6], 1)
    blocks = parse_source(page)
    assert [b.file for b in blocks] == ["/s/k.cu", "/s/inc/util.cuh", "/s/k.cu"]
    per = assign_blocks(blocks, [(0, "k"), (1, "k")])
    assert [b.file for b in per[0]] == ["/s/k.cu", "/s/inc/util.cuh"] and [b.file for b in per[1]] == ["/s/k.cu"]
    from cudalab.ncu.source import merge_lines

    text = render_source([{"variant": "v", "kernel": "k", "lines": merge_lines([b.lines for b in per[0]])}],
                         8, advice=False, width=120)
    assert any(t.strip().startswith("util.cuh:40 ") for t in text)
    assert "v (k, /s/k.cu)" in text[1]


def test_views_are_registered_by_the_keys_they_own():
    from cudalab.report import instruments
    from cudalab.records.results import Result

    rows = [Result("a", "kernel", PASSED, extra={"ncu_rules": [{"name": "R", "kind": "OPT", "speedup": 12.0,
                                                               "description": "Do this. Then that."}]}),
            Result("b", "kernel", PASSED)]
    assert [v.name for v in instruments.views_of(rows)] == ["ncu-source"]
    text = instruments.render_views(rows, 100)
    assert any("advice ~12%" in t and "R: Do this." in t and "that" not in t for t in text)
    assert instruments.views_of([Result("b", "kernel", PASSED)]) == []


def test_a_kernel_path_captured_in_another_checkout_reads_from_its_kernel_folder(tmp_path, monkeypatch):
    from cudalab.report import source as view

    monkeypatch.chdir(tmp_path)
    assert view._short("/elsewhere/checkout/cuda_src/transpose/transpose.cu") == "cuda_src/transpose/transpose.cu"
    assert view._short("/usr/lib/python3/site-packages/cudalab/kernels/reduce/reduce.cu") == "kernels/reduce/reduce.cu"
    assert view._short(str(tmp_path / "mine.cu")) == "mine.cu"
    assert view._short("/opt/my/kernel.cu") == "/opt/my/kernel.cu"
