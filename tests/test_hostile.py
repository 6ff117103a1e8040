"""Hostile invocations, table-driven: each gets exactly one line, exit 2, no traceback, and changes no
file (CPU only). ``{ws}`` is a workspace holding saved runs, files a user keeps, and hostile inputs;
every test runs inside it and checks that nothing in it changed.

The fragment names the rule that refused the input: a case must fail for the right reason, not for
a missing GPU (``pycuda is not installed`` matches no fragment here).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from cudalab import catalog

RUNS = Path(__file__).parent / "data" / "runs"
NCU_CSV = Path(__file__).parent / "data" / "ncu_import_copy_memory_h200.csv"

CASES: list[tuple[str, str]] = []


def case(args: str, fragment: str) -> None:
    CASES.append((args, fragment))


# --- sizes, blocks, grids, dtypes across families ---------------------------------------------------------
for fam in ("transpose", "copy", "gemv"):
    case(f"{fam} --n 0", "--n must be positive (got 0)")
    case(f"{fam} --n -3", "--n must be positive")
    case(f"{fam} --n abc", "is not a size")
    case(f"{fam} --n 1.5", "is not a size")
    case(f"{fam} --n 1k,,4k", "has an empty entry")
    case(f"{fam} --n 2^40", "2^31")
    case(f"{fam} --shape 0x16", "must be positive")
    case(f"{fam} --shape 4x4x4", "must have 2 sizes")
    case(f"{fam} --n 16 --shape 4x4", "not both")
    case(f"{fam} --dtype float16", "has no dtype 'float16'")
    case(f"{fam} --block 0x8", "every dimension must be at least 1")
    case(f"{fam} --block 32x", "is not of the form X, XxY or XxYxZ")
    case(f"{fam} --block 8x8x4x1", "is not of the form")
    case(f"{fam} --grid 0", "every dimension must be at least 1")
    case(f"{fam} --variant nosuch", "has no variant 'nosuch'")
    case(f"{fam} --variant none", "--variant none runs only your own kernels")
    case(f"{fam} --variant ,", "names no variant")
for fam in ("matmul", "gemm"):
    case(f"{fam} --n 0", "--n must be positive")
    case(f"{fam} --shape 4x4", "must have 3 sizes")
    case(f"{fam} --n 50000", "2^31")
    case(f"{fam} --dtype float64", "has no dtype")
    case(f"{fam} --variant nosuch", "has no variant 'nosuch'")
for fam in ("reduce", "search"):
    case(f"{fam} --n 0", "--n must be positive")
    case(f"{fam} --shape 4x4", "takes a length: use --n")
    case(f"{fam} --n 2^40", "2^3")
    case(f"{fam} --dtype int8", "has no dtype 'int8'")
# --- cudalab tune: refused before any worker starts, no campaign file written or changed -------------------
_T = "tune copy --variant vec4 --n 1k -D UNROLL=1..8"
case(f"{_T} --require 'NOPE > 1'", "unknown name 'NOPE'")
case(f"{_T} --require 'UNROLL > 9'", "the space is empty")
case("tune copy --variant vec4 -D UNROLL=9..8", "the range has no values")
case("tune copy --variant vec4 -D UNROLL=5..7:pow2", "the range has no values")
case(f"{_T} --trials 0", "--trials must be at least 1")
case(f"{_T} --time 0", "not a positive duration")
case(f"{_T} --strategy nope", "is not one of grid")
case(f"{_T} --storage nosuch://x", "cannot open it")
case(f"{_T} --storage sqlite:///{{ws}}/nofolder/c.db", "does not exist")
case(f"{_T} --storage sqlite:///{{ws}}/bin.json", "is not an SQLite campaign file")
case(f"{_T} --storage sqlite:///{{ws}}/other.tune.db", "with another space")
case("tune copy", "needs --variant")
case("tune copy --variant host -D X=1,2", "not a kernel")
case("tune --replay {ws}/nosuch.db", "no such campaign file")
# tune's values follow the family commands' rules (session.options.seconds / whole): refused by name
for flag, values in (("--budget", ("nan", "-1", "0", "inf", "1e9")), ("--timeout", ("-2", "nan", "0", "-inf"))):
    for v in values:
        case(f"{_T} {flag} {v}", f"{flag} must be a positive number of seconds")
        case(f"truth copy {flag} {v}", "must be a positive number of seconds")
for flag, v in (("--race", "-3"), ("--device", "-2"), ("--build-ahead", "-7"), ("--seed", "-9"),
                ("--seed", str(2**32 + 5)), ("--race", "100000")):
    case(f"{_T} {flag} {v}", f"{flag} must be an integer from")
case(f"{_T} --tolerance nan", "--tolerance must be between")
case("tune copy --variant vec4 --n 1k -D UNROLL=3,123456789012345678901", "does not fit 64 bits")
case("tune copy --variant vec4 --n 1k -D UNROLL=1..99999999999999999999", "does not fit 64 bits")
case(f"{_T} --json ''", "--json needs a file name")
for flag in ("--name", "--storage", "--strategy", "--block", "--dtype"):
    case(f"{_T} {flag} ''", f"{flag} was given empty")
case(f"{_T} --block 0,64", "every dimension must be at least 1")
case(f"{_T} --block -64..256:pow2", "every dimension must be at least 1")
# an option tune does not have is an error naming the nearest one, never a define
case(f"{_T} --trails 3", "no such option: --trails (did you mean --trials?)")
case(f"{_T} --sede=4", "did you mean --seed?")
case(f"{_T} --UNROLL 1,2", "a define is -D NAME=VALUES")
case("tune gemv --tile 8", "no such option: --tile")
for fam in ("smem-square", "smem-rect"):
    case(f"{fam} --shape 4x4", "takes no --shape")
    case(f"{fam} --blocks 0", "--blocks must be at least 1")
    case(f"{fam} --n 0", "must be")
case("smem-rect --ipad -1", "--ipad must be between 0 and 32")
case("smem-rect --ipad 33", "--ipad must be between 0 and 32")
case("matmul --tile 0", "--tile must be between 1 and 32")
case("matmul --tile 33", "--tile must be between 1 and 32")
case("gemm --alpha nan", "--alpha must be a finite number")
case("gemm --beta inf", "--beta must be a finite number")
case("search --key bogus", "--key 'bogus' must be one of")
case("reduce --block 128,,256", "empty entry")
case("reduce --block 2000,3000", "power-of-two block size")
case("transpose --variant naive --block 64x32", "the device allows 1024 per block")
case("transpose --variant naive --block 1x1x128", "exceeds the device limit 64")
case("transpose --variant shared --block 16x16", "is compiled for block 32x32 only")
case("transpose --variant tiled-32x8 --block 32x7", "needs block_x % block_y == 0")
case("transpose --variant tiled-32x8 --block 128x8", "needs block_x <= 64")
case("transpose --variant naive --n 1024 --grid 1x1", "use at least 32 blocks there")
case("transpose --variant naive --shape 3000000x2", "exceeds the device limit 65535")
case("transpose --all --variant naive", "give --all or --variant, not both")
case("transpose --variant naive,naive", "names 'naive' twice")

# --- timing options, seeds, defines -------------------------------------------------------------------
for value in ("nan", "inf", "-inf", "0", "-1", "1e9", "abc", ""):
    case(f"transpose --budget={value}", "Invalid value for '--budget'")
for value in ("-1", "x", "1.5", "18446744073709551616"):
    case(f"transpose --seed={value}", "Invalid value for '--seed'")
case("transpose --min-samples 0", "Invalid value for '--min-samples'")
case("transpose --lock-clocks 0", "Invalid value for '--lock-clocks'")
case("calibrate --pairs 0", "Invalid value for '--pairs'")
case("calibrate --pairs x", "Invalid value for '--pairs'")
case("calibrate --n abc --dry-run", "is not a size")
case("calibrate --budget nan", "Invalid value for '--budget'")
case("calibrate --min-samples 3", "Invalid value for '--min-samples'")
case("calibrate --device -1", "Invalid value for '--device'")
case("compare {ws}/run.json {ws}/run.json --fail-on slower", "needs a percentage")
case("compare {ws}/run.json {ws}/run.json --fail-on faster", "must be slower:PERCENT")
case("transpose --launch graphs", "Invalid value for '--launch'")
case("transpose --launch=", "Invalid value for '--launch'")
case("transpose --drop-throttled=yes", "Option '--drop-throttled' does not take a value")
case("transpose --device -1", "Invalid value for '--device'")
for digits in ("\u00b2", "\u0663", "\uff11", "1\u00b2"):  # not ASCII digits: '²'.isdigit(), int('٣') == 3
    CASES.append((["transpose", "--device", digits], "is not a GPU index"))
    CASES.append((["info", "--device", digits], "is not a GPU index"))
case("transpose --layout wide", "Invalid value for '--layout'")
for define, fragment in (
        ("ROWS=0", "ROWS is block_y, a tile size or loop stride; it must be at least 1"),
        ("ROWS=-1", "it must be at least 1"), ("ROWS=0u", "it must be at least 1"), ("TILE=0", "at least 1"),
        ("TILE=1-1", "at least 1"), ("ROWS=8,0", "at least 1"), ("X=1/0", "-D X=1/0: division by zero"),
        ("TILE=1%0", "division by zero"), ("X=2**99", "exponent 99"), ("X=99999999999999999999", "64 bits"),
        ("X", "must be NAME=VALUE"), ("1X=2", "is not a C identifier"), ("__X=1", "reserved"),
        ("X=", "empty value"), ("X=a;b", "is not allowed"), ("X=\"s\"", "is not allowed"), ("X=(1", "unbalanced"),
        ("PAD=/*", "starts or ends a C comment"), ("PAD=1//2", "'//' starts or ends a C comment"),
        ("PAD=2*/1", "'*/' starts or ends"), ("PAD=1,/*", "starts or ends a C comment"),
        ("X=$(id)", "is not allowed"), ("X=1\n#include", "is not allowed")):
    CASES.append((["transpose", "-D", define], fragment))
    CASES.append((["compile", "transpose", "-D", define], fragment))
# A sweep is counted before it is built: 101 x 101 points would be 10,201 requests (2,000 x 2,000 grew
# memory by gigabytes before any line).
_VALUES = ",".join(str(i) for i in range(1, 102))
CASES.append((["transpose", "-D", f"X={_VALUES}", "-D", f"Y={_VALUES}"],
              "the sweep has 10,201 points (101 -D X x 101 -D Y); cudalab runs at most 10,000"))
CASES.append((["transpose", "--n", "1k,2k,3k", "--block", "32x8,16x16", "-D", f"X={_VALUES}", "-D", f"Y={_VALUES[:50]}"],
              "the sweep has 12,120 points (3 --n x 2 --block x 101 -D X x 20 -D Y)"))
case("smem-square -D IPAD=-1", "a count or padding (1 by default); it must be at least 0")

# --- names, usage -------------------------------------------------------------------------------------
case("nosuch", "No such command 'nosuch'")
case("transpose --bogus", "No such option '--bogus'")
case("transpose --n", "Option '--n' requires an argument")
case("transpose extra", "unexpected extra argument")
case("list nosuch", "no family 'nosuch'; valid: ")
case("compile nosuch", "no family 'nosuch'")
case("compile transpose --variant nosuch", "has no variant 'nosuch'")
case("compile transpose --arch sm_xx", "is not a GPU architecture")
case("compile transpose --arch 'sm_90; rm -rf /'", "is not a GPU architecture")
case("compile transpose --block 0", "every dimension must be at least 1")
case("compile transpose --dtype float64", "has no dtype")
case("compile transpose --variant none", "--variant none runs only your own kernels")
case("report", "Missing argument 'RUN.json'")
case("sass transpose --variant nosuch", "has no variant 'nosuch'")
case("sass transpose --variant block,bankopt,naive", "give one variant or two")
case("sass transpose --variant host", "has no kernel of cudalab's")
case("sass transpose --variant block --arch sm_35", "this nvcc cannot build it")
case("sass transpose --variant block --arch sm_xx", "is not a GPU architecture")
case("sass transpose --variant block --source-line x", "--source-line")
case("sass transpose --variant block --run {ws}/reduce.json", "is a run of reduce, not transpose")
case("compile transpose --arch sm_35", "this nvcc cannot build it")
case("roofline {ws}/run.json -o {ws}/x.gif", "give a .png, .svg or .html file")
case("roofline {ws}/missing.json -o {ws}/x.png", "")
case("compare {ws}/run.json", "at least two run files")
case("info --mib x", "Invalid value for '--mib'")

# --- --add ---------------------------------------------------------------------------------------------
case("transpose --add {ws}/mine.cu", "must be FILE.cu:KERNEL")
case("transpose --add nosuch.cu:k", "no such file")
case("transpose --add /dev/zero:k", "/dev/zero is not a regular file")
case("transpose --add {ws}/folder:k", "is a folder, not a file")
case("transpose --add {ws}/huge.cu:k", "huge.cu is 300.0 MiB; cudalab reads files up to 256.0 MiB")
case("transpose --add {ws}/bin.json:k", "is a binary file (a NUL byte at offset 0), not CUDA source")
case("transpose --add {ws}/mine.cu:k@", "nothing after '@'")
case("transpose --add {ws}/mine.cu:k@bogus=1", "bogus")
case("transpose --add {ws}/mine.cu:k@block=0", "must be positive dims")
case("transpose --add '{ws}/mine.cu:k;rm'", "--add")
case("transpose --add '{ws}/mine.cu:k@-DPAD=/*'", "starts or ends a C comment")

# --- outputs: checked before any work, nothing replaced ---------------------------------------------------
for option in ("--json", "--csv", "--plot"):
    suffix = ".png" if option == "--plot" else ".json"
    case(f"transpose {option} {{ws}}/folder", "is a folder")
    case(f"transpose {option} {{ws}}/missing/x{suffix}", "does not exist")
    case(f"transpose {option} {{ws}}/keep.txt/x{suffix}", "is not a folder")
    case(f"transpose {option} {{ws}}/null{suffix}", "not a regular file")
    case(f"transpose {option} ''", "needs a file name")
case("transpose --plot {ws}/x.gif", "give a .png, .svg or .pdf file")
for command in ("report {ws}/run.json", "compare {ws}/run.json {ws}/other.json"):
    case(f"{command} --plot {{ws}}/missing/x.png", "does not exist")
    case(f"{command} --plot {{ws}}/null.png", "not a regular file")
    case(f"{command} --plot {{ws}}/keep.txt/x.png", "is not a folder")
    case(f"{command} --plot {{ws}}/x.bmp", "give a .png, .svg or .pdf file")
    case(f"{command} --plot {{ws}}/folder.png", "is a folder")
for command in ("report {ws}/run.json", "compare {ws}/run.json {ws}/other.json"):  # never over the input
    case(f"{command} --plot {{ws}}/run-link.png", "which this command also reads")
    case(f"{command} --plot {{ws}}/ro.png", "the file is read-only (mode 0444)")  # for root too
    case(f"{command} --plot {{ws}}/keep.png", "hard links")  # every workspace file is a hard link
case("transpose --json {ws}/ro.json", "the file is read-only (mode 0444)")
case("transpose --json {ws}/x.json --csv {ws}/x.json", "also reads or writes")
case("transpose --csv {ws}/x.json --plot {ws}/run-link.png --json {ws}/run.json", "also reads or writes")
case("ncu transpose --export {ws}/folder", "is a folder")
case("ncu transpose --export {ws}/null.csv", "not a regular file")
case("ncu transpose --export {ws}/missing/x.csv", "does not exist")
case("sanitize transpose --json {ws}/null.json", "not a regular file")
case("sanitize transpose --log {ws}/keep.txt", "is a file, not a folder")

# --- saved runs: hostile files ---------------------------------------------------------------------------
for name, fragment in (
        ("nosuch.json", "no such file"), ("folder", "is a folder, not a file"), ("oops.json", "'points' must be a list"),
        ("oops1.json", "no results"), ("deep.json", "levels deep"), ("bin.json", "binary"), ("latin.json", "not UTF-8"),
        ("v2str.json", "schema_version '2' is not a version number"), ("v99.json", "newer than this cudalab reads"),
        ("list.json", "expected a JSON object"), ("notjson.json", "not JSON"), ("results5.json", "'results' must be"),
        ("command.json", "'command' must be a list"), ("status.json", "not a cudalab run record"),
        ("stats.json", "not a cudalab run record"), ("empty.json", "not JSON")):
    case(f"report {{ws}}/{name}", fragment)
    case(f"compare {{ws}}/run.json {{ws}}/{name}", fragment)
# Hand-edited saved runs (J = run.json with one field changed), classes rather than strings: a number JSON
# has but a time cannot be (Infinity, 1e400, NaN, negative, a 5,001-digit integer), a field of the wrong type.
_TIME = '"median": 3.909872055053711'
_STARTED = '"started": 1795455702.702337'
SAVED_EDITS: dict[str, tuple[str, str, str]] = {  # file: (text replaced, by what, fragment)
    "inf-median.json": (_TIME, '"median": Infinity', "'stats.median' must be a time in ms"),
    "huge-median.json": (_TIME, '"median": 1e400', "'stats.median' must be a time in ms"),
    "nan-median.json": (_TIME, '"median": NaN', "'stats.median' must be a time in ms"),
    "nanstr-median.json": (_TIME, '"median": "nan"', "'stats.median' must be a time in ms"),
    "negative-median.json": (_TIME, '"median": -3.9', "'stats.median' must be a time in ms, at least 0"),
    "digits-median.json": (_TIME, '"median": ' + "9" * 5001, "a number too long to read"),
    "digits-started.json": (_STARTED, '"started": ' + "9" * 5001, "a number too long to read"),
    "nan-started.json": (_STARTED, '"started": NaN', "'started' must be seconds since 1970"),
    "inf-started.json": (_STARTED, '"started": 1e400', "'started' must be seconds since 1970"),
    "str-started.json": (_STARTED, '"started": "x"', "'started' must be seconds since 1970"),
    "negative-n.json": ('"n": 10', '"n": -5', "'stats.n' must be a count"),
    "samples-str.json": ('"samples": [', '"samples": "x", "s": [', "'stats.samples' must be a list"),
    "protocol-list.json": ('"protocol": {', '"protocol": [], "p": {', "'protocol' must be an object"),
    "protocol-field.json": ('"warmup": 2', '"warmup": "x"', "'protocol.warmup' must be a number"),
    "protocol-bool.json": ('"flush_l2": true', '"flush_l2": 1', "'protocol.flush_l2' must be a true/false"),
    "dims-int.json": ('"dims": [', '"dims": 5, "d": [', "'problem.dims' must be a list of whole numbers"),
}
for _name, (_, _, _fragment) in SAVED_EDITS.items():
    case(f"report {{ws}}/{_name}", _fragment)
    case(f"compare {{ws}}/run.json {{ws}}/{_name}", _fragment)
case("report /dev/zero", "not a regular file")
case("report /dev/null", "not a regular file")
case("compare /dev/zero {ws}/run.json", "not a regular file")
case("compare {ws}/run.json {ws}/other.json --fail-on faster:5%", "slower:PERCENT")
case("compare {ws}/run.json {ws}/other.json --fail-on slower:x", "must be a percentage")
case("compare {ws}/run.json {ws}/other.json --min-effect two", "must be a percentage")
case("compare {ws}/run.json {ws}/other.json --allow-missing", "give --fail-on too")
case("compare {ws}/run.json {ws}/reduce.json --fail-on slower:5%", "nothing was compared")

# --- ncu --import ------------------------------------------------------------------------------------------
for name, fragment in (("nosuch.csv", "no such file"), ("folder", "is a folder"), ("bin.csv", "binary"),
                       ("latin.json", "not UTF-8")):
    case(f"ncu transpose --import {{ws}}/{name}", fragment)
case("ncu copy --import {ws}/longfield.csv", "line 2 is not ncu CSV (field larger than field limit")
case("ncu transpose --import /dev/null", "not a regular file")
case("ncu transpose --import /dev/zero", "not a regular file")
case("ncu transpose --import a.csv --export b.csv", "not both")
case("ncu transpose --metrics 'not a metric'", "--metrics takes")
case("ncu smem-square --import {ncu_csv}", "holds no launch of smem-square")
case("sanitize transpose --tool bogus", "unknown sanitizer tool bogus")
case("sanitize transpose --variant host", "no kernel variant selected")

ENV_CASES: list[tuple[str, dict[str, str], str]] = [
    ("transpose", {"CUDALAB_SRC": ""}, "CUDALAB_SRC is set but empty"),
    ("transpose", {"CUDALAB_SRC": "{ws}/nosuch"}, "no such folder"),
    ("transpose", {"CUDALAB_SRC": "{ws}/keep.txt"}, "is a file, not a folder of families"),
    ("list", {"CUDALAB_SRC": "{ws}/folder"}, "holds no family"),
    ("tr", {"CUDALAB_SRC": "{ws}/broken-src"}, "module 'base' is cudalab's family contract"),
    ("compile nosuch", {"CUDALAB_SRC": "{ws}/broken-src"}, "no family under"),
    ("compile transpose --variant naive", {"CUDALAB_CACHE": "{ws}/keep.txt"}, "cannot hold the build cache"),
    ("ncu transpose", {"CUDALAB_NCU": "{ws}/keep.txt"}, "keep.txt is not executable"),
    ("ncu transpose --import {ws}/mine.ncu-rep", {"CUDALAB_NCU": "{ws}/keep.txt"}, "keep.txt is not executable"),
    ("transpose --ncu", {"CUDALAB_NCU": "{ws}/keep.txt"}, "keep.txt is not executable"),
    ("deep", {"CUDALAB_SRC": "{ws}/deep-src"}, "deep/family.toml: nested too deeply"),
    ("big", {"CUDALAB_SRC": "{ws}/deep-src"}, "is 1,048,586 bytes; cudalab reads files up to 1,048,576 bytes"),
]


def _tree(ws: Path) -> dict[str, str]:
    # A file that was written has a new mtime, one that was replaced a new inode: no need to hash it.
    out = {}
    for p in sorted(ws.rglob("*")):
        if p.is_symlink():
            out[str(p)] = "-> " + os.readlink(p)
        elif p.is_file():
            st = p.stat()
            out[str(p)] = f"{st.st_ino} {st.st_size} {st.st_mode:o} {st.st_mtime_ns}"
        elif p.is_dir():
            out[str(p)] = "dir"
    return out


@pytest.fixture(scope="module")
def _ws_template(tmp_path_factory) -> Path:
    """What every test's workspace holds, written once (a 1 MiB family.toml among it)."""
    tmp_path = tmp_path_factory.mktemp("hostile-ws")
    shutil.copy(RUNS / "nvidia-h200-transpose.json", tmp_path / "run.json")
    shutil.copy(RUNS / "nvidia-h100-80gb-hbm3-transpose.json", tmp_path / "other.json")
    shutil.copy(RUNS / "nvidia-h200-reduce.json", tmp_path / "reduce.json")
    for name, text in {"keep.json": "{}", "keep.csv": "a,b\n", "keep.png": "png", "keep.txt": "keep",
                       "mine.cu": 'extern "C" __global__ void k() {}\n', "oops.json": '{"schema_version": 2, "points": "oops"}',
                       "oops1.json": '{"points": "oops"}', "deep.json": "[" * 10000 + "]" * 10000,
                       "v2str.json": '{"schema_version": "2"}', "v99.json": '{"schema_version": 99}', "list.json": "[1]",
                       "notjson.json": "{not json", "results5.json": '{"schema_version": 2, "points": [{"results": 5}]}',
                       "command.json": '{"schema_version": 2, "points": [], "command": 7}', "empty.json": "",
                       "status.json": json.dumps({"schema_version": 2, "points": [{"results": [{"variant": "a", "status": "?"}]}]}),
                       "stats.json": json.dumps({"schema_version": 2, "points": [{"results": [
                           {"variant": "a", "status": "passed", "stats": "x"}]}]})}.items():
        (tmp_path / name).write_text(text)
    csv_lines = NCU_CSV.read_text().splitlines()
    fields = csv_lines[1].split('","')
    fields[5] = "A" * 140_000  # over csv's field limit (131,072)
    (tmp_path / "longfield.csv").write_text("\n".join([csv_lines[0], '","'.join(fields), *csv_lines[2:]]) + "\n")
    with open(tmp_path / "huge.cu", "wb") as f:  # sparse: 300 MiB on paper, no disk
        f.truncate(300 * 2**20)
    (tmp_path / "mine.ncu-rep").write_bytes(b"NVIDIA Nsight Compute report (not really)")
    run_text = (RUNS / "nvidia-h200-transpose.json").read_text()
    for name, (old, new, _) in SAVED_EDITS.items():
        assert old in run_text, name
        (tmp_path / name).write_text(run_text.replace(old, new, 1))
    (tmp_path / "bin.json").write_bytes(b"\x00\x01\x02\xff")
    from cudalab.tuning import campaign as TC  # a campaign of another space, which tune must refuse and leave as it is
    from cudalab.tuning import strategy as TS

    other = TC.open_campaign(f"sqlite:///{tmp_path / 'other.tune.db'}", "copy-vec4",
                             {"family": "copy", "fingerprint": "0" * 16}, ["minimize"],
                             TS.quiet_optuna().samplers.RandomSampler())
    # as a campaign leaves its file: the rollback journal, no -wal beside it. Left in WAL mode, the template's
    # hard-linked -wal was checkpointed into the shared file by whichever test opened a copy first, and a test
    # running then saw "its" other.tune.db change (a serial run on 2026-11-29)
    TC.settle(other)
    (tmp_path / "bin.csv").write_bytes(b'"ID","Process ID"\n\x00\x1b[2J\xff\xfe')
    (tmp_path / "latin.json").write_bytes(b'{"caf\xe9": 1}')
    (tmp_path / "folder").mkdir()
    (tmp_path / "folder.png").mkdir()
    for name in ("null.json", "null.png", "null.csv"):
        (tmp_path / name).symlink_to("/dev/null")
    (tmp_path / "run-link.png").symlink_to("run.json")  # a plot target that is the run it reads
    for name in ("ro.png", "ro.json"):
        (tmp_path / name).write_text("keep")
        (tmp_path / name).chmod(0o444)
    broken = tmp_path / "broken-src" / "tr"
    shutil.copytree(catalog.src_root() / "transpose", broken)
    toml = broken / "family.toml"
    toml.write_text(toml.read_text().replace('name = "transpose"', 'name = "tr"\nmodule = "base"', 1))
    (tmp_path / "deep-src" / "deep").mkdir(parents=True)
    (tmp_path / "deep-src" / "deep" / "family.toml").write_text("a = " + "[" * 5000 + "]" * 5000 + "\n")
    (tmp_path / "deep-src" / "big").mkdir()
    (tmp_path / "deep-src" / "big" / "family.toml").write_text("#" * (2**20 + 10))
    return tmp_path


@pytest.fixture
def ws(_ws_template, tmp_path, monkeypatch) -> Path:
    """The workspace: saved runs, files a user keeps, hostile inputs; the tests run inside it. Its files
    are hard links to the template's: a test that wrote one in place fails its own check (the mtime)."""
    root = tmp_path / "ws"
    shutil.copytree(_ws_template, root, symlinks=True, copy_function=os.link)
    monkeypatch.chdir(root)
    for var in ("CUDALAB_SRC", "CUDALAB_PATH"):  # what an earlier test may have left
        monkeypatch.delenv(var, raising=False)
    # Every case here is refused before any GPU work, so no worker needs to come up: the session a
    # family command starts early (to overlap the worker's start with planning) is left empty.
    from cudalab.execute.local import drive

    monkeypatch.setattr(drive.Session, "start", lambda self: self)
    return root


def _argv(args: str | list[str], ws: Path) -> list[str]:
    import shlex

    parts = args if isinstance(args, list) else shlex.split(args)
    return [p.replace("{ws}", str(ws)).replace("{ncu_csv}", str(NCU_CSV)) for p in parts]


def test_there_are_at_least_150_hostile_invocations():
    assert len(CASES) + len(ENV_CASES) >= 150


@pytest.mark.parametrize("args, fragment", CASES, ids=[a if isinstance(a, str) else " ".join(a) for a, _ in CASES])
def test_hostile_invocation_is_one_line_exit_2_and_changes_nothing(ws, invoke, one_line_exit_2, args, fragment):
    before = _tree(ws)
    res = invoke(_argv(args, ws))
    one_line_exit_2(res, fragment)
    assert "pycuda is not installed" not in res.output  # refused for its own reason, before any GPU
    assert _tree(ws) == before


@pytest.mark.parametrize("args, env, fragment", ENV_CASES, ids=[f"{k}={v} {a}" for a, e, _ in ENV_CASES for k, v in e.items()])
def test_hostile_environment_is_one_line_exit_2_and_changes_nothing(ws, invoke, one_line_exit_2, monkeypatch, args, env,
                                                                      fragment):
    for k, v in env.items():
        monkeypatch.setenv(k, v.replace("{ws}", str(ws)))
    before = _tree(ws)
    one_line_exit_2(invoke(_argv(args, ws)), fragment)
    assert _tree(ws) == before


# --- a family module of the user's that ends, hangs or crashes the process importing it ---------------------
HOSTILE_MODULES = {
    "sysexit": ("import sys\nsys.exit(0)\n", "raised SystemExit (sys.exit at import)"),
    "osexit": ("import os\nos._exit(3)\n", "ended the process (exit code 3"),
    "forever": ("while True:\n    pass\n", "did not finish within 3 s"),
    "crash": ("import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n", "killed the process (SIGSEGV)"),
    "badstr": ("class E(Exception):\n    __str__ = lambda self: 1 / 0\nraise E()\n", "its message could not be shown"),
}
# ... and a Problem whose contract cannot run as written: refused when the family loads, naming the field
from test_problem_contract import BAD, TWO_D  # noqa: E402

HOSTILE_MODULES.update({
    "badcheck": (BAD["unknown check"][0], BAD["unknown check"][2]),
    "badargs": (BAD["args names nothing"][0], BAD["args names nothing"][2]),
    "badtol": (BAD["negative tolerance"][0], BAD["negative tolerance"][2]),
    "noextent": (TWO_D.format(extent=""), "a 2-D problem needs extent="),
})


@pytest.fixture(scope="module")
def _hostile_families(tmp_path_factory) -> Path:
    from test_problem import make_family

    root = tmp_path_factory.mktemp("hostile-families")  # outside the workspace: imports write __pycache__
    for name, (module, _) in HOSTILE_MODULES.items():
        make_family(root, name=name, module=module)
    return root


@pytest.mark.parametrize("name", sorted(HOSTILE_MODULES))
def test_hostile_family_module_is_one_line_exit_2(ws, invoke, one_line_exit_2, monkeypatch,
                                                   _hostile_families, name):
    monkeypatch.setenv("CUDALAB_PATH", str(_hostile_families))
    monkeypatch.setenv("CUDALAB_IMPORT_TIMEOUT", "3")
    before = _tree(ws)
    one_line_exit_2(invoke(name, "--n", "64"), HOSTILE_MODULES[name][1])
    assert _tree(ws) == before


# --- text cudalab did not write: terminal controls in it reach the terminal as visible escapes ---------------
#: A title change, a screen clear, a C1 CSI, a right-to-left override and a carriage return (which would let
#: a name overwrite its own line).
EVIL = "\x1b]0;pwned\x07\x1b[2J\x9b31m\u202e\rX"
_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


@pytest.fixture(scope="module")
def _hostile_text(tmp_path_factory) -> Path:
    """A family whose family.toml descriptions hold :data:`EVIL` (as TOML escapes), a saved run whose GPU,
    hostname, variant names and reasons hold it, and ncu CSVs whose kernel names do."""
    from test_problem import make_family

    root = tmp_path_factory.mktemp("hostile-text")
    esc = json.dumps(EVIL)[1:-1]  # TOML basic strings take JSON's \\uXXXX escapes
    toml = make_family(root / "fams", name="evil") / "family.toml"
    text = toml.read_text().replace('description = "y = 2x"', f'description = "y = 2x {esc}"')
    toml.write_text(text.replace('name = "good"', f'name = "good"\ndescription = "good {esc}"'))
    run = json.loads((RUNS / "nvidia-h200-transpose.json").read_text())
    run["device"]["name"] += EVIL
    run["machine"]["hostname"] += EVIL
    for p in run["points"]:
        for r in p["results"]:
            r["variant"] += EVIL
            r["reason"] = (r.get("reason") or "") + EVIL
    (root / "evil.json").write_text(json.dumps(run))
    (root / "evil.csv").write_text(NCU_CSV.read_text().replace('"copy_', f'"{EVIL.replace(chr(13), "")}copy_'))
    return root


HOSTILE_TEXT = ["report {t}/evil.json", "report {t}/evil.json --layout long", "report {t}/evil.json --wide",
                "compare {runs}/nvidia-h200-transpose.json {t}/evil.json", "compare {t}/evil.json {t}/evil.json",
                "list", "list evil", "--help", "evil --help", "ncu --help", "ncu evil --help",
                "ncu copy --import {t}/evil.csv", "ncu smem-square --import {t}/evil.csv"]


@pytest.mark.parametrize("args", HOSTILE_TEXT)
def test_hostile_text_reaches_the_terminal_as_escapes(invoke, monkeypatch, _hostile_text, args):
    monkeypatch.setenv("CUDALAB_PATH", str(_hostile_text / "fams"))
    res = invoke(args.replace("{t}", str(_hostile_text)).replace("{runs}", str(RUNS)).split())
    assert "Traceback" not in res.output, res.output
    assert not _CONTROL.search(res.output), repr(res.output[:3000])
    assert "\\x1b]0;pwned\\x07" in res.output, res.output  # shown, not silently dropped


@pytest.mark.parametrize("text, cell, block", [
    ("plain text, café, 中文", "plain text, café, 中文", "plain text, café, 中文"),
    ("a\x1b[2Jb", "a\\x1b[2Jb", "a\\x1b[2Jb"),
    ("osc\x1b]0;t\x07", "osc\\x1b]0;t\\x07", "osc\\x1b]0;t\\x07"),
    ("c1\x9b31m del\x7f", "c1\\x9b31m del\\x7f", "c1\\x9b31m del\\x7f"),
    ("rtl\u202eevil\u2066", "rtl\\u202eevil\\u2066", "rtl\\u202eevil\\u2066"),
    ("two\nlines\tand\rcr", "two lines and cr", "two\nlines\tand\\x0dcr"),
    ("crlf\r\nline", "crlf  line", "crlf\nline"),
    ("nul\x00 surrogate\udc80", "nul\\x00 surrogate\\udc80", "nul\\x00 surrogate\\udc80"),
])
def test_clean_shows_every_terminal_control_as_its_escape(text, cell, block):
    from cudalab.textcells import clean

    assert clean(text) == cell
    assert clean(text, lines=True) == block


def test_every_console_cleans_what_it_prints():
    """Text printed on cudalab's consoles outside any table (watch's header, a run's header) is cleaned too;
    rich's own colours still work."""
    import io

    from rich.console import Console

    from cudalab.report.console import CleanConsole

    out = io.StringIO()
    con = CleanConsole(file=out, force_terminal=True, color_system="standard", width=200)
    assert isinstance(con, Console)
    con.print("host " + EVIL, markup=False, highlight=False)
    con.print("red", style="red")
    text = out.getvalue()
    assert "host \\x1b]0;pwned" in text  # (rich itself drops the BEL and the CR)
    assert "\x1b[31mred" in text  # rich's colour, untouched
    assert not _CONTROL.search(text.replace("\x1b[31m", "").replace("\x1b[0m", ""))


# --- an outside family whose name is a command or an option: refused in one line naming its folder ----------
@pytest.mark.parametrize("name", ["list", "tune", "compare", "-h", "--n", "two words", "tab\tname"])
def test_family_named_like_a_command_or_option_is_refused(invoke, monkeypatch, tmp_path, name):
    from test_problem import make_family

    from cudalab.catalog.discovery import COMMANDS

    folder = make_family(tmp_path, name=name)
    monkeypatch.setenv("CUDALAB_PATH", str(tmp_path))
    res = invoke("list")
    assert res.exit_code == 2, res.output
    errs = res.stderr.strip().splitlines()
    assert len(errs) == 1 and errs[0].startswith(f"cudalab: broken family "), res.stderr
    assert str(tmp_path) in errs[0] and "rename the folder" in errs[0], errs[0]
    assert "transpose" in res.stdout  # the others are listed
    helped = invoke("--help")
    assert helped.exit_code == 0
    assert not any(ln.split()[:1] == [name] for ln in helped.output.splitlines() if name not in COMMANDS), helped.output
    if name in COMMANDS:  # the command still is the command
        assert "broken family" not in invoke(name, "--help").output


def test_reserved_names_are_the_commands():
    from cudalab.catalog.discovery import COMMANDS
    from cudalab.cli import cli

    assert COMMANDS == set(cli.commands)
