"""Defines that restate a source's defaults share its build (cudalab.build.restated): the rules on small
sources, and on the real ones that the preprocessed device code is indeed the same."""

from __future__ import annotations

from pathlib import Path

import pytest

import build_share
from cudalab import build, catalog
from cudalab.build.restated import drop_restated, source_defaults

DEFAULT = "#ifndef TILE\n#define TILE 32\n#endif\n"
USE = "__global__ void k(float *p) { p[threadIdx.x] = TILE; }\n"


def write(folder: Path, text: str, name: str = "k.cu") -> Path:
    path = folder / name
    path.write_text(text)
    return path


def test_a_restated_default_is_dropped_and_other_values_and_names_kept(tmp_path):
    src = write(tmp_path, DEFAULT + USE)
    assert source_defaults(src) == {"TILE": "32"}
    assert drop_restated(src, {"TILE": "32"}) == {}
    assert drop_restated(src, {"TILE": " 32 "}) == {}  # spaces aside
    assert drop_restated(src, {"TILE": "16"}) == {"TILE": "16"}
    assert drop_restated(src, {"TILE": "32u"}) == {"TILE": "32u"}  # the same value, not the same text


@pytest.mark.parametrize("before", [
    "int first = TILE;\n",                          # used before its default
    "#define TWICE (2 * TILE)\n",                   # named in a macro body before it
    'const char *s = "//"; int t = TILE;\n',        # a "//" in a string hides nothing
    "#if TILE > 16\n#endif\n",                      # tested before it
])
def test_a_name_mentioned_before_its_default_is_kept(tmp_path, before):
    src = write(tmp_path, before + DEFAULT + USE)
    assert "TILE" not in source_defaults(src)
    assert drop_restated(src, {"TILE": "32"}) == {"TILE": "32"}


def test_a_mention_in_a_comment_does_not_count(tmp_path):
    src = write(tmp_path, "// TILE x TILE tiles\n/* TILE\n*/\n" + DEFAULT + USE)
    assert source_defaults(src) == {"TILE": "32"}


@pytest.mark.parametrize("text", [
    "#if USE_BIG\n" + DEFAULT + "#endif\n" + USE,                                 # a conditional default
    "#include <cuda_fp16.h>\n" + DEFAULT + USE,                                  # a toolkit header first
    '#include "missing.cuh"\n' + DEFAULT + USE,                                  # an include nvcc finds elsewhere
    "#ifndef TILE\n#define TILE 32\n#define OTHER 1\n#endif\n" + USE,             # the block defines more
    "#ifndef TILE\n#define TILE 32\n#else\n#define OTHER 1\n#endif\n" + USE,      # the block has an else
    "#ifndef TILE\n#define TILE(x) (x)\n#endif\n" + USE,                          # a function-like macro
])
def test_defaults_that_might_differ_are_kept(tmp_path, text):
    src = write(tmp_path, text)
    assert drop_restated(src, {"TILE": "32"}) == {"TILE": "32"}


def test_a_define_the_source_never_names_is_dropped_unless_a_header_or_pasting_could_name_it(tmp_path):
    src = write(tmp_path, DEFAULT + USE)
    assert drop_restated(src, {"BLOCK_X": "32", "TILE": "16"}) == {"TILE": "16"}
    for text in ("#include <cuda_fp16.h>\n" + DEFAULT + USE,                  # a toolkit header might test it
                 "#define CAT(a, b) a##b\n" + DEFAULT + USE):                  # CAT(BLOCK, _X) names it unwritten
        src = write(tmp_path, text)
        assert drop_restated(src, {"BLOCK_X": "32"}) == {"BLOCK_X": "32"}


def test_local_headers_are_read_where_they_are_included(tmp_path):
    # A default inside a header's include guard counts; a toolkit include after the default does not matter.
    write(tmp_path, "#ifndef K_CUH\n#define K_CUH\n" + DEFAULT + "#endif\n", "k.cuh")
    src = write(tmp_path, '#include "k.cuh"\n#include <cuda_fp16.h>\n' + USE)
    assert source_defaults(src) == {"TILE": "32"}
    # A header that uses the name before the source's default: kept.
    write(tmp_path, "#define TWICE (2 * TILE)\n", "u.cuh")
    src = write(tmp_path, '#include "u.cuh"\n' + DEFAULT + USE, "u.cu")
    assert source_defaults(src) == {}


@pytest.mark.nvcc
@pytest.mark.parametrize("family, name", [("transpose", "transpose.cu"), ("reduce", "reduce.cu"),
                                          ("matmul", "matmul_streamk.cu")])
def test_every_default_dropped_from_a_real_source_preprocesses_to_the_same_device_code(family, name):
    source = catalog.family(family).directory / name
    defaults = source_defaults(source)
    assert len(defaults) >= 3, defaults
    same = build_share.device_digest(source, {}, "sm_90")
    assert same is not None and build_share.device_digest(source, defaults, "sm_90") == same
    # And a name the source never writes (what --add passes every kernel) changes nothing either.
    assert drop_restated(source, {**defaults, "BLOCK_X": "32"}) == {}
    assert build_share.device_digest(source, {**defaults, "BLOCK_X": "32"}, "sm_90") == same
    # The check sees a real difference: one default changed is other code.
    name0, value0 = next(iter(defaults.items()))
    assert build_share.device_digest(source, {**defaults, name0: value0 + " + 1"}, "sm_90") != same


@pytest.mark.nvcc
def test_restating_defaults_takes_the_same_build_without_nvcc(monkeypatch):
    source = catalog.family("transpose").directory / "transpose.cu"
    first = build.build(source, {"TILE": "32"}, "sm_90")
    monkeypatch.setattr(build, "_run", lambda argv: pytest.fail(f"nvcc ran: {argv}"))
    again = build.build(source, {"PAD": "0", "ROWS": "8", "TILE": "32"}, "sm_90")
    assert again.cached and again.key == first.key and again.cubin == first.cubin
    assert again.defines == (("PAD", "0"), ("ROWS", "8"), ("TILE", "32"))  # what was asked, for the report
    assert build.cached(source, {}, "sm_90").key == first.key
    other = build.cached(source, {"TILE": "64"}, "sm_90")  # built by another test, or not yet
    assert other is None or other.key != first.key
