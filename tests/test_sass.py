"""The SASS view: parsing nvdisasm's listing, the instruction-class histogram, the renaming-blind diff
(on listings committed under tests/data/sass/, made by nvdisasm -c -g from cudalab's sm_90 builds),
and ``cudalab sass`` itself (nvcc and nvdisasm)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cudalab.inspect import sass

DATA = Path(__file__).parent / "data" / "sass"


def kernel(name: str, symbol: str) -> tuple[sass.Instruction, ...]:
    return sass.parse((DATA / f"{name}.sass").read_text())[symbol]


def listing(*lines: str) -> str:
    """A tiny nvdisasm-shaped listing of one kernel ``k`` (one instruction per line, all on line 7)."""
    body = "\n".join(f"        /*{16 * i:04x}*/                   {text} ;" for i, text in enumerate(lines))
    return ('\t.section\t.text.k,"ax",@progbits\nk:\n\t//## File "/x/k.cu", line 7\n' + body + "\n")


#: One opcode of each class, as nvdisasm prints it, and the class it must land in.
ONE_OF_EACH = {
    "FFMA R1, R2, R3, R1": "FFMA", "HMMA.16816.F32 R4, R8, R12, R4": "HMMA",
    "HGMMA.64x128x16.F32 R24, gdesc[UR4], R24, gsb0": "GMMA", "LDG.E.128 R4, desc[UR6][R2.64]": "LDG",
    "STG.E desc[UR6][R4.64], R7": "STG", "LDS.128 R8, [R0]": "LDS", "LDSM.16.M88.4 R4, [R2]": "LDS",
    "STS [R7], R4": "STS", "LDGSTS.E.BYPASS.128 [R3], desc[UR8][R4.64]": "LDGSTS", "LDGDEPBAR": "LDGSTS",
    "UTMALDG.2D [UR8], [UR4]": "TMA", "STL [R1], R2": "LDL/STL", "LDL R2, [R1]": "LDL/STL",
    "BAR.SYNC.DEFER_BLOCKING 0x0": "BAR", "BRA `(.L_x_3)": "branch", "BSSY B0, `(.L_x_4)": "branch",
    "BSYNC B0": "branch", "EXIT": "branch", "F2F.F16.F32 R1, R2": "convert", "I2F R3, R4": "convert",
    "F2I.TRUNC.NTZ R5, R6": "convert", "IMAD R2, R9, 0x20, R6": "other", "S2R R9, SR_CTAID.X": "other",
}


def test_every_class_is_counted_once_per_instruction():
    insns = sass.parse(listing(*ONE_OF_EACH, "NOP"))["k"]
    assert [i.klass for i in insns] == list(ONE_OF_EACH.values())  # NOP (padding) left out
    want = {c: list(ONE_OF_EACH.values()).count(c) for c in sass.CLASSES}
    assert sass.histogram(insns) == want


def test_the_transpose_block_histogram():
    """Counted by hand from tests/data/sass/transpose-block.sass: one global load, one store, one
    shared store and load around one barrier; branches EXIT, EXIT, BRA."""
    got = sass.histogram(kernel("transpose-block", "transpose_block"))
    assert got == {**dict.fromkeys(sass.CLASSES, 0), "LDG": 1, "STG": 1, "LDS": 1, "STS": 1, "BAR": 1,
                   "branch": 3, "other": 37}


@pytest.mark.parametrize("name, symbol", [("matmul-tiled", "matmul_tiled"), ("matmul-regblock", "matmul_regblock"),
                                          ("transpose-bankopt", "transpose_block")])
def test_histograms_match_an_independent_count_of_the_text(name, symbol):
    """Each class against a plain regex count of the opcode words in the file (a different reading)."""
    text = (DATA / f"{name}.sass").read_text()
    got = sass.histogram(kernel(name, symbol))

    def count(*ops: str) -> int:
        return sum(len(re.findall(rf"\*/\s+(?:@!?U?P\w+\s+)?{op}[ .;]", text)) for op in ops)

    assert got["FFMA"] == count("FFMA")
    assert got["LDG"] == count("LDG") and got["STG"] == count("STG")
    assert got["LDS"] == count("LDS", "LDSM") and got["STS"] == count("STS")
    assert got["BAR"] == count("BAR")
    assert got["branch"] == count("BRA", "BSSY", "BSYNC", "EXIT", "CALL", "RET", "BREAK", "WARPSYNC")
    assert sum(got.values()) == count(r"[A-Z][A-Z0-9_]*") - count("NOP")


def test_regblock_is_512_ffma_with_shared_loads():
    got = sass.histogram(kernel("matmul-regblock", "matmul_regblock"))
    assert got["FFMA"] == 512 and got["LDS"] == 32 and got["STG"] == 128


def test_line_info_is_read():
    insns = kernel("transpose-block", "transpose_block")
    assert all(i.file.endswith("transpose.cu") and i.line > 0 for i in insns)
    at55 = sass.at_line(insns, 55)
    assert {i.opcode for i in at55} >= {"LDS", "STG"} and all(i.line == 55 for i in at55)
    assert sass.at_line(insns, 55, "transpose.cu") == at55
    assert sass.at_line(insns, 55, "other.cuh") == ()


def test_renamed_registers_are_no_difference():
    text = (DATA / "transpose-block.sass").read_text()
    renamed = re.sub(r"\bR(\d+)\b", lambda m: f"R{int(m.group(1)) + 20}", text)
    renamed = re.sub(r"\bUR(\d+)\b", lambda m: f"UR{int(m.group(1)) + 8}", renamed)
    renamed = re.sub(r"\bP([0-6])\b", lambda m: f"P{6 - int(m.group(1))}", renamed)
    a = sass.parse(text)["transpose_block"]
    b = sass.parse(renamed)["transpose_block"]
    assert [i.text for i in a] != [i.text for i in b]
    assert sass.listing_diff(a, b) == []
    assert sass.histogram(a) == sass.histogram(b)


def test_the_padded_tile_differs_in_its_stride():
    """block vs bankopt: same classes, but the row stride 0x80 (32 floats) became 0x84 (33)."""
    a = kernel("transpose-block", "transpose_block")
    b = kernel("transpose-bankopt", "transpose_block")
    assert sass.histogram(a) == sass.histogram(b)
    diff = sass.listing_diff(a, b)
    assert any(d.startswith("-") and "0x80" in d for d in diff)
    assert any(d.startswith("+") and "0x84" in d for d in diff)


# --- the command (nvcc builds; nvdisasm disassembles) --------------------------------------------------------

def _nvdisasm_reason() -> str:
    from cudalab.errors import ToolMissingError

    try:
        sass.find_nvdisasm()
    except ToolMissingError as exc:
        return str(exc)
    return ""


@pytest.mark.nvcc
@pytest.mark.skipif(bool(_nvdisasm_reason()), reason="no nvdisasm")
def test_sass_command_compares_two_variants(invoke):
    res = invoke("sass", "transpose", "--variant", "block,bankopt", "--arch", "sm_90")
    assert res.exit_code == 0, res.output
    out = res.output
    assert "── block: transpose_block (TILE=32 PAD=0), sm_90" in out and "── bankopt:" in out
    assert "transpose.cu:55" in out and "LDS R" in out  # the CUDA line above its instructions
    row = next(line for line in out.splitlines() if line.strip().startswith("static smem B"))
    assert row.split()[-3:] == ["4096", "4224", "+128"]
    occ = next(line for line in out.splitlines() if line.strip().startswith("occupancy %"))
    assert occ.split()[-2:] == ["100", "100"]
    assert "lines differ" in out


@pytest.mark.nvcc
@pytest.mark.skipif(bool(_nvdisasm_reason()), reason="no nvdisasm")
def test_sass_source_line_and_run_times(invoke):
    run = Path(__file__).parent / "data" / "runs" / "nvidia-h100-80gb-hbm3-transpose.json"
    res = invoke("sass", "transpose", "--variant", "block,bankopt", "--arch", "sm_90", "--source-line", "55",
                 "--run", str(run))
    assert res.exit_code == 0, res.output
    body = [line for line in res.output.splitlines() if line.startswith("    0")]
    assert body and all("LDS" in line or "STG" in line or "LDG" not in line for line in body)
    assert "instructions of line 55" in res.output
    from cudalab.records.results import load_record

    rec = load_record(run)
    block = next(r for p in rec.points for r in p.results if r.variant == "block")
    timed = next(line for line in res.output.splitlines() if "median ms (--run)" in line)
    assert f"{block.median_ms:.4f}" in timed


@pytest.mark.nvcc
def test_a_variant_that_does_not_build_shows_nvccs_log(invoke):
    res = invoke("sass", "transpose", "--variant", "bankopt", "-D", "PAD=nosuch_name")
    assert res.exit_code == 2
    assert "nvcc could not compile" in res.output and "nosuch_name" in res.output and "Traceback" not in res.output
