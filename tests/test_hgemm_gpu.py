"""hgemm on a real GPU: every rung verified for bf16 and fp16 at sizes that are and are not
multiples of the tiles (whole 16-byte rows or not), on fresh inputs with the output poisoned by the
runner; a kernel broken on purpose (the last K slice dropped) comes out incorrect beside its
correct control; and every rung is clean under the four compute-sanitizer tools."""

from __future__ import annotations

import shutil

import pytest
from gpu_util import run_rows
from mutants import SRC, use_tree

from cudalab import plan as planning
from cudalab.worker import executor as runner
from cudalab import sanitize as S


def tma_rows(size: dict) -> bool:
    """Whether K and N are multiples of 8 (the wgmma rung's TMA rule)."""
    dims = [int(size["n"])] * 3 if "n" in size else [int(d) for d in size["shape"].split("x")]
    return dims[1] % 8 == 0 and dims[2] % 8 == 0


def assert_rows(rows, size):
    for name, row in rows.items():
        if name == "wgmma" and not tma_rows(size):
            assert row.status == runner.SKIPPED and "multiples of 8" in row.reason, f"{name}: {row.status} {row.reason}"
        elif row.status == runner.SKIPPED:
            # the host row above its limit, the library row without CuPy
            assert row.kind in ("host", "library"), f"{name}: skipped: {row.reason}"
        else:
            assert row.status == runner.PASSED, f"{name}: {row.status} {row.reason}"


SIZES = [
    {"n": "256"},                  # a multiple of every tile
    {"n": "512"},
    {"n": "257"},                  # rows of 257 elements: not whole 16-byte chunks
    {"shape": "136x72x200"},       # whole chunks, partial tiles in M, N and K
    {"shape": "128x4096x256"},     # one tile, a long K
    {"shape": "129x7x131"},
    {"shape": "1x1x1"},
    {"shape": "1000x1000x1000"},
]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("size", SIZES, ids=lambda s: next(iter(s.values())))
def test_every_rung_is_verified(device, dtype, size):
    rows = run_rows(device, "hgemm", dtype=dtype, seed=11, **size)
    assert {"wmma", "mma", "wgmma"} <= set(rows)
    assert_rows(rows, size)


@pytest.mark.gpu
@pytest.mark.parametrize("defines", [(("HG_BK", "32"), ("HG_STAGES", "4")), (("HG_BK", "64"), ("HG_STAGES", "3")),
                                     (("HG_STAGES", "2"),)], ids=["bk32", "stages3", "stages2"])
@pytest.mark.parametrize("size", [{"n": "512"}, {"shape": "136x72x200"}, {"shape": "129x7x131"}], ids=lambda s: next(iter(s.values())))
def test_mma_other_slices_and_depths_are_verified(device, defines, size):
    rows = run_rows(device, "hgemm", variants="mma", seed=3, defines=defines, **size)
    assert rows["mma"].status == runner.PASSED, rows["mma"].reason


@pytest.mark.gpu
@pytest.mark.parametrize("variant", ["wmma", "mma", "wgmma"])
def test_the_mutant_that_drops_the_last_k_slice_is_incorrect(device, tmp_path, monkeypatch, variant):
    dest = tmp_path / "hgemm"
    shutil.copytree(SRC / "hgemm", dest)
    text = (dest / "family.toml").read_text()
    block = text[text.index(f'name = "{variant}"'):]
    block = block[:block.index("[[variant]]")] if "[[variant]]" in block else block
    for mutation in (0, 1):
        body = block.replace(f'name = "{variant}"', f'name = "mutant-{mutation}"')
        if "defines = {" in body:
            body = body.replace("defines = { ", f'defines = {{ HG_MUTATION = "{mutation}", ')
        else:
            body = body.replace('fixed_block = true\n', f'fixed_block = true\ndefines = {{ HG_MUTATION = "{mutation}" }}\n')
        text += "\n[[variant]]\n" + body
    (dest / "family.toml").write_text(text)
    use_tree(monkeypatch, tmp_path)
    for size in ({"n": "512"}, {"shape": "200x304x136"}):
        rows = run_rows(device, "hgemm", variants="mutant-0,mutant-1", seed=5, **size)
        assert rows["mutant-0"].status == runner.PASSED, rows["mutant-0"].reason
        assert rows["mutant-1"].status == runner.INCORRECT, rows["mutant-1"].reason


@pytest.mark.sanitizer
def test_every_rung_is_clean_under_every_tool(tmp_path):
    rows = S.sanitize(planning.RunRequest(family="hgemm"), tools=S.TOOLS, log_dir=tmp_path / "logs", timeout_s=300)
    bad = [f"{r.variant} {r.tool} {r.size}: {r.status} {r.findings} {r.first or r.reason} [{r.log}]"
           for r in S.failing(rows)]
    assert not bad, "\n".join(bad)
    assert not S.never_ran(rows)
    assert {r.tool for r in rows} == set(S.TOOLS) and len({r.size for r in rows}) == 2
