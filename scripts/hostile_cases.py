"""The invocations of ``scripts/hostile_pass.py``, by the classes of issue 57 (new inputs, not the issue's).

``{ws}`` is the workspace (the invocation's cwd), ``{sent}`` the sentinel folder outside it; both are planted
by :func:`hostile_pass.plant` (run.json, kt.json, k.cu, other.db, fifo, zero -> /dev/zero, out_secret.txt ->
the sentinel...). A case's outputs are the paths it names as outputs: only those may change.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

BIN = str(Path(sys.executable).parent / "cudalab")
#: The Python API's calls run inside this: a UsageError (any CudalabError) is one line and exit 2; anything
#: else escapes as a traceback, which the pass counts.
API = """import sys, cudalab
from cudalab.errors import CudalabError
try:
    {code}
except CudalabError as e:
    print(f"cudalab: {{e}}".splitlines()[0], file=sys.stderr); sys.exit(2)
"""


@dataclass
class Case:
    klass: str
    text: str
    outputs: tuple[str, ...] = ()
    refuse: bool = True
    setup: Callable[[Path, Path], None] | None = None
    env: dict[str, str] = field(default_factory=dict)
    interrupt: float | None = None
    copies: int = 1
    max_err: int | None = None
    api: bool = False
    note: str = ""

    def argv(self, ws: Path, sent: Path) -> list[str]:
        text = self.text.replace("{ws}", str(ws)).replace("{sent}", str(sent))  # not format: code has braces
        if self.api:
            return [sys.executable, "-c", API.format(code=text)]
        return [BIN, *shlex.split(text)]


CASES: list[Case] = []


def c(klass: str, text: str, **kw) -> None:
    CASES.append(Case(klass, text, **kw))


def write(rel: str, data: str | bytes) -> Callable[[Path, Path], None]:
    def setup(ws: Path, sent: Path) -> None:
        p = ws / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data if isinstance(data, bytes) else data.encode())
    return setup


def link(rel: str, target: str) -> Callable[[Path, Path], None]:
    def setup(ws: Path, sent: Path) -> None:
        p = ws / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target.format(ws=ws, sent=sent), p)
    return setup


def fifo(rel: str) -> Callable[[Path, Path], None]:
    def setup(ws: Path, sent: Path) -> None:
        p = ws / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        os.mkfifo(p)
    return setup


def both(*fs):
    def setup(ws: Path, sent: Path) -> None:
        for f in fs:
            f(ws, sent)
    return setup


# --- 1. campaign storage ------------------------------------------------------------------------------------
T = "tune copy --variant vec4 --n 2k -D UNROLL=1,2,4"
for target in ("other.db", "link_other.db", "out_db", "dangling.db", "dir", "fifo", "empty.db", "ro.db", "zero",
               "keep.txt", "run.json", "kt.json", "nowhere/deeper/c.db", "new.tune.db"):
    c("storage", f"{T} --storage sqlite:///{{ws}}/{target}")
    c("storage", f"tune --replay {{ws}}/{target} --seeds 1 --trials 3", refuse=target not in ("kt.json",))
for url in ("sqlite://", "sqlite:////dev/full", "sqlite:///relative.tune.db", "", "sqlite:///{ws}/c.db?mode=ro",
            "sqlite:///{ws}/a;touch pwned.db", "mysql://nobody@127.0.0.1:1/x", "sqlite:///{sent}/planted.db"):
    c("storage", f"{T} --storage {shlex.quote(url)}")
c("storage", f"{T} --name ../escaped")
c("storage", f"{T} --name {{sent}}/evil")
c("storage", f"{T} --name ''")
c("storage", f"{T} --name 'a/b'")
c("storage", T)
c("storage", f"{T} --storage sqlite:///{{ws}}/together.tune.db", copies=2)
c("storage", T, copies=2)
c("storage", "tune --replay {ws}/kt.json --storage sqlite:///{ws}/other.db --seeds 1 --trials 3", refuse=False)

# --- 2. spaces of any size ----------------------------------------------------------------------------------
for strat in ("grid", "random", "tpe", "cmaes", "gp", "nsga2"):
    c("spaces", f"tune copy --variant vec4 --no-table -D A=1..3000000000 -D B=1..99999 --strategy {strat}")
    dims = " ".join(f"-D X{i}=1..512" for i in range(16))
    c("spaces", f"tune copy --variant vec4 --no-table {dims} --strategy {strat} --trials 1000000000")
c("spaces", "tune copy --variant vec4 --block 1..2147483647")
c("spaces", "tune copy --variant vec4 --block 1..4294967296:pow2")
c("spaces", "tune copy --variant vec4 -D UNROLL=1..1000000000000000000000000000000")
c("spaces", "tune copy --variant vec4 -D UNROLL=1..8:pow7")
c("spaces", "tune copy --variant vec4 -D UNROLL=1..8:0")
c("spaces", "tune copy --variant vec4 -D UNROLL=1e400")
c("spaces", "tune copy --variant vec4 -D UNROLL=1..500000 --require 'UNROLL % 7919 == 3'")
c("spaces", "tune copy --variant vec4 -D UNROLL=1..8 --require '9**9**9 > 1'")
c("spaces", "tune copy --variant vec4 -D UNROLL=1..8 --require 'UNROLL ** 99999999 > 0'")
c("spaces", "tune copy --variant vec4 -D UNROLL=1..8 --require \"__import__('os').system('touch pwned')\"")
c("spaces", "tune copy --variant vec4 -D UNROLL=1..8 --require '[x for x in range(10**12)]'")
c("spaces", "tune copy --variant vec4 -D UNROLL=1,2 -D UNROLL=4,8")
c("spaces", "tune copy --variant vec4 -D UNROLL=1..8 --objective speed")
c("spaces", "tune copy --variant vec4 -D UNROLL=1..8 --objective time,energy --strategy grid")
c("spaces", "tune copy --variant vec4 -D UNROLL=1..8 --trials 99999999999999999999")
c("spaces", "tune copy --variant vec4 -D UNROLL=1..8 --time 99999999h")
for strat in ("grid", "random", "tpe", "cmaes", "nsga2", "grid,random,tpe"):
    c("spaces", f"tune --replay {{ws}}/kt.json --strategy {strat} --seeds 2 --trials 4", refuse=False)
c("spaces", "tune --replay {ws}/kt.json --seeds 0", refuse=True)
c("spaces", "tune --replay {ws}/kt.json --seeds -3")
c("spaces", "tune --replay {ws}/kt.json --trials 10000000000 --seeds 1", refuse=False)

# --- 3. interrupts ------------------------------------------------------------------------------------------
for t in (0.15, 0.6, 1.5):
    c("interrupts", "tune copy --variant vec4 --no-table -D A=1..3000000000 -D B=1..99999 --strategy grid",
      interrupt=t, refuse=False)
    c("interrupts", "tune --replay {ws}/kt.json --strategy grid,random,tpe --seeds 500 --trials 18",
      interrupt=t, refuse=False)
    c("interrupts", "tune copy --variant vec4 -D UNROLL=1,2 --cluster local", interrupt=t, refuse=False)
for addr in ("tcp://127.0.0.1:1", "tcp://", "inproc://nothing", "garbage", "tls://127.0.0.1:1", "ws://x:1"):
    c("interrupts", f"tune copy --variant vec4 -D UNROLL=1,2 --cluster {addr}")
c("interrupts", "tune copy --variant vec4 -D UNROLL=1,2 --cluster local --devices 7,8")
c("interrupts", "tune copy --variant vec4 -D UNROLL=1,2 --cluster local --devices ''")
c("interrupts", "tune copy --variant vec4 -D UNROLL=1,2 --devices 0,1")

# --- 4. values ----------------------------------------------------------------------------------------------
V = "tune copy --variant vec4 -D UNROLL=1,2"
for flag, vals in (("--budget", ("1e-300", "1e308", "0x10", "' 5 '")), ("--timeout", ("1e309", "-0.0", "1e-320")),
                   ("--race", ("-1", "100000000000000000000")), ("--device", ("-7", "1099511627776")),
                   ("--build-ahead", ("-3", "1000000000")), ("--seed", ("-9", "18446744073709551616")),
                   ("--trials", ("-1", "2.5")), ("--tolerance", ("-0.5", "nan", "inf", "7")),
                   ("--time", ("-5m", "nan", "1e99h", "5parsecs")), ("--seeds", ("nan",))):
    for v in vals:
        c("values", f"{V} {flag} {v}")
for d in ("'=1'", "X=", "X", "'X=1..'", "1X=2", "'X=1;rm -rf ~'", "'X=$(touch pwned)'", "X=1,,2",
          "X=123456789012345678901234567890", "'X=\"str\"'", "'X=1\nY=2'"):
    c("values", f"{V} -D {d}")
c("values", f"{V} --trials 3 --trails 3")
c("values", f"{V} --json ''")
c("values", f"{V} --plot {{ws}}/p.txt")
c("values", f"{V} --header ''")
c("values", f"{V} --header {{ws}}/h.c")
c("values", f"{V} --versus {{ws}}/kt.json")
c("values", f"{V} --add ''")
c("values", f"{V} --objective ''")
for t in ("--timeout -3", "--timeout nan", "--budget inf", "--budget -0", "--min-samples -2", "--seed -1",
          "--ncu-launches 0", "--ncu-timeout nan", "--device -1", "--json ''", "-D '=3'", "--n 2^70"):
    c("values", f"truth copy --variant vec4 {t}")
c("values", "truth nosuch")
for t in ("--pairs 0", "--pairs -4", "--pairs 1000000000000", "--budget nan", "--budget -1", "--min-samples 0",
          "--n 0", "--n abc", "--device -1", "--json ''", "--n '1;touch pwned'"):
    c("values", f"calibrate {t}")
c("values", "calibrate --dry-run", refuse=False)
for t in ("--min-effect nan", "--min-effect -1", "--min-effect 1e999", "--min-effect abc%", "--fail-on slower:-5",
          "--fail-on slower:nan", "--fail-on faster", "--fail-on slower:1e400"):
    c("values", f"compare {{ws}}/run.json {{ws}}/run_b.json {t}")
c("values", "report {ws}/run.json --layout diagonal")
c("values", "roofline")
c("values", "roofline {ws}/run.json {ws}/run2.json -o {ws}/r.svg", outputs=("{ws}/r.svg",), refuse=False)

# --- 5. outputs ---------------------------------------------------------------------------------------------
for o in ("run.json", "link_run.svg", "dir", "fifo", "full.svg", "nowhere/x.svg", "r.txt", "dir/", "out_secret.svg"):
    c("outputs", f"roofline {{ws}}/run.json -o {{ws}}/{o}", refuse=o not in ("full.svg", "out_secret.svg"),
      outputs=(f"{{ws}}/{o}",) if o in ("full.svg", "out_secret.svg") else ())
c("outputs", "roofline {ws}/link_run.html -o {ws}/link_run.html")
for o in ("run.json", "link_run.png", "dir", "fifo", "nowhere/x.png", "run.png/"):
    c("outputs", f"report {{ws}}/run.json --plot {{ws}}/{o}")
c("outputs", "compare {ws}/run.json {ws}/run_b.json --plot {ws}/run_b.json")
c("outputs", "compare {ws}/run.json {ws}/run_b.json --plot {ws}/link_run.png")
for o in ("k.cu", "kt.json", "link_kt.json", "dir", "fifo", "full.json", "nowhere/t.json"):
    c("outputs", f"tune copy --add {{ws}}/k.cu:axpy -D TX=1,2 --json {{ws}}/{o}")
    c("outputs", f"tune --replay {{ws}}/kt.json --seeds 1 --trials 2 --json {{ws}}/{o}",
      refuse=o not in ("full.json", "nowhere/t.json"), outputs=(f"{{ws}}/{o}",) if o == "full.json" else ())
for o in ("k.cu", "run.json", "dir", "fifo", "full.h", "nowhere/w.h"):
    c("outputs", f"tune copy --variant vec4 -D UNROLL=1,2 --header {{ws}}/{o}")
c("outputs", "tune --replay {ws}/kt.json --seeds 1 --trials 2 --plot {ws}/kt.json")
c("outputs", "calibrate --json {ws}/run.json")
c("outputs", "truth copy --variant vec4 --json {ws}/link_kt.json")

# --- 6. the cache as input ----------------------------------------------------------------------------------
NOISE, CEIL = "cache/noise/nvidia-h200.json", "cache/ceilings/nvidia-h200-1980.json"
CMP = "compare {ws}/run.json {ws}/run_b.json"
ROOF = "roofline {ws}/run.json -o {ws}/r.svg"
floors = {"wrong types": write(NOISE, json.dumps({"gpu": "NVIDIA H200", "min_effect": "1%", "pairs": [1]})),
          "nan": write(NOISE, '{"gpu": "NVIDIA H200", "min_effect": NaN, "false_rate": 0, "detect_rate": 1,'
                              ' "planted": 0.02, "pairs": 3, "judgements": 9}'),
          "negative": write(NOISE, json.dumps({"gpu": "NVIDIA H200", "min_effect": -3, "false_rate": 0,
                                               "detect_rate": 1, "planted": 0.02, "pairs": 3, "judgements": 9})),
          "list": write(NOISE, "[1, 2, 3]"), "binary": write(NOISE, b"\x00\xff" * 5000),
          "huge": write(NOISE, "[" * 200000), "fifo": fifo(NOISE), "zero": link(NOISE, "/dev/zero"),
          "dir": fifo(NOISE + "/x"), "secret link": link(NOISE, "{sent}/secret.txt"),
          "noise folder link": link("cache/noise", "{sent}")}
for why, setup in floors.items():
    c("cache", CMP, setup=setup, refuse=False, note=why)
    c("cache", CMP + " --fail-on slower", setup=setup, refuse=False, note=why)
ceils = {"inf": write(CEIL, '{"gpu": "NVIDIA H200", "sm_clock_mhz": 1980, "fma_gflops": Infinity}'),
         "string": write(CEIL, '{"gpu": "NVIDIA H200", "sm_clock_mhz": 1980, "fma_gflops": "60T"}'),
         "fifo": fifo(CEIL), "zero": link(CEIL, "/dev/zero"), "dir": fifo(CEIL + "/y"),
         "clock string": write(CEIL, '{"gpu": "NVIDIA H200", "sm_clock_mhz": "1980", "fma_gflops": 1}')}
for why, setup in ceils.items():
    c("cache", ROOF, setup=setup, outputs=("{ws}/r.svg",), refuse=False, note=why)
for setup in (link("cache/calibrate/calib_copy.cu", "{sent}/secret.txt"), link("cache/calibrate", "{sent}"),
              fifo("cache/calibrate/calib_copy.cu"), link("cache/calibrate/calib_copy.cu", "/dev/zero")):
    # cudalab replaces what was planted at its kernel's path in its own cache (never writes through it: the
    # sentinel says so), so that path is its output
    c("cache", "calibrate", setup=setup, outputs=("{ws}/cache/calibrate/calib_copy.cu",))
    c("cache", "calibrate --dry-run", setup=setup, refuse=False, outputs=("{ws}/cache/calibrate/calib_copy.cu",))
c("cache", "copy --variant vec4", env={"CUDALAB_CACHE": "{ws}/keep.txt"})
c("cache", "copy --variant vec4", env={"CUDALAB_CACHE": "{ws}/fifo"})
c("cache", "compile copy", env={"CUDALAB_CACHE": "/dev/null"})
c("cache", "compile copy", setup=link("cache/build", "{sent}"))

# --- 7. family discovery ------------------------------------------------------------------------------------
c("family", "--family-path {ws}/fifo list")
c("family", "--family-path {ws}/zero list")
c("family", "--family-path {ws}/keep.txt list")
c("family", " ".join(f"--family-path {{ws}}/gone{i}" for i in range(250)) + " list", refuse=False, max_err=2)
c("family", "list", env={"CUDALAB_PATH": ":".join(f"{{ws}}/missing{i}" for i in range(300))}, refuse=False,
  max_err=2)
c("family", "list", env={"CUDALAB_PATH": "{ws}/fifo"})
FAM = """[family]
name = "odd"
description = "odd"
metric = "bandwidth"
dtypes = ["float32"]

[[variant]]
name = "v"
source = "{src}"
kernel = "axpy"
block = "{block}"
grid = "{grid}"
"""
KU = '\nextern "C" __global__ void axpy(float *y, const float *x, int n) { }\n'
odd = {"grid sm:-3": dict(src="k.cu", block="256", grid="sm:-3"),
       "grid sm:0": dict(src="k.cu", block="256", grid="sm:0"),
       "block 0": dict(src="k.cu", block="0", grid="sm:1"),
       "block huge": dict(src="k.cu", block="99999999999999999999", grid="sm:1"),
       "block expr": dict(src="k.cu", block="__import__('os')", grid="sm:1"),
       "source /dev/zero": dict(src="/dev/zero", block="256", grid="sm:1"),
       "source escapes": dict(src="../../../../etc/passwd", block="256", grid="sm:1"),
       "source fifo": dict(src="../../fifo.cu", block="256", grid="sm:1"),
       "source dir": dict(src=".", block="256", grid="sm:1")}
for why, v in odd.items():
    setup = both(write("fam/odd/family.toml", FAM.format(**v)), write("fam/odd/k.cu", KU))
    c("family", "--family-path {ws}/fam list odd", setup=setup, note=why)
    c("family", "--family-path {ws}/fam compile odd", setup=setup, note=why)
c("family", "--family-path {ws}/fam list", setup=write("fam/bad/family.toml", "[family\nname = "))
c("family", "--family-path {ws}/fam list", setup=write("fam/bad/family.toml", "[family]\nname = 3\n"))
c("family", "--family-path {ws}/fam list", setup=fifo("fam/bad/family.toml"))
c("family", "--family-path {ws}/fam list", setup=link("fam/bad/family.toml", "/dev/zero"))
# an entry of a family path that is no folder is no family (as a README there): skipped, not an error
c("family", "--family-path {ws}/fam list", setup=link("fam/bad", "/dev/zero"), refuse=False)
c("family", "--family-path {ws}/fam list", setup=write("fam/bad/family.toml", "x = '" + "a" * 3000000 + "'\n"))
c("family", "--family-path {ws}/fam list", setup=write("fam/copy/family.toml", FAM.format(
    src="k.cu", block="256", grid="sm:1").replace('"odd"', '"copy"', 1)))

# --- 8. the Python API --------------------------------------------------------------------------------------
for code in ("cudalab.tune(123)", "cudalab.tune('copy', variant=5)", "cudalab.tune('copy', 'vec4', defines='X=1')",
             "cudalab.tune('copy', 'vec4', defines={'X': object()})", "cudalab.tune('copy', 'vec4', defines={1: 2})",
             "cudalab.tune('copy', 'vec4', trials='many')", "cudalab.tune('copy', 'vec4', trials=-1)",
             "cudalab.tune('copy', 'vec4', budget=float('nan'))", "cudalab.tune('copy', 'vec4', storage=3)",
             "cudalab.tune('copy', 'vec4', strategy=None)", "cudalab.tune('copy', 'vec4', on_event=5)",
             "cudalab.tune('copy', 'vec4', seed='x')", "cudalab.tune('copy', 'vec4', nosuch=1)",
             "cudalab.tune('copy', 'vec4', defines={'UNROLL': []})", "cudalab.tune('copy', 'vec4', race=1.5)",
             "cudalab.tune_kernel('axpy', 5, 1024, [], {'block_size_x': [32]})",
             "cudalab.tune_kernel('axpy', 'k.cu', 1024, None, {'block_size_x': [32]})",
             "cudalab.tune_kernel('axpy', 'k.cu', 'abc', [], {'block_size_x': [32]})",
             "cudalab.tune_kernel('axpy', 'k.cu', 1024, [], None)",
             "cudalab.tune_kernel('axpy', 'k.cu', 1024, [], {'block_size_x': 32})",
             "cudalab.tune_kernel('axpy', 'k.cu', 1024, [], {'block_size_x': [32]}, restrictions=5)",
             "cudalab.tune_kernel('axpy', 'k.cu', 1024, [], {'block_size_x': [32]}, strategy='nope')",
             "cudalab.tune_kernel('axpy', '{ws}/fifo.cu', 1024, [], {'block_size_x': [32]})",
             "cudalab.tune_kernel('axpy', '{ws}/zero.cu', 1024, [], {'block_size_x': [32]})",
             "cudalab.run(None)", "cudalab.run(5)", "cudalab.run('copy', n=object())",
             "cudalab.run('copy', budget='x')", "cudalab.run('copy', devices=5)", "cudalab.run('copy', n=[])",
             "cudalab.run('copy', defines=[1])", "cudalab.run('copy', variants=3)",
             "cudalab.judge(5, 'x')", "cudalab.judge('copy', 5)", "cudalab.judge('copy', 'k.cu:axpy', device='0')",
             "cudalab.judge('copy', 'k.cu:axpy', timeout=-1)", "cudalab.judge('copy', ['k.cu:axpy'])",
             "cudalab.judge('copy', 'fifo.cu:axpy')"):
    c("api", code, api=True)

# --- 9. tune --add ------------------------------------------------------------------------------------------
A = "tune copy --add {ws}/k.cu:axpy"
for spec in ("@tile=block_x*TX -D TX=0,1", "@tile=block_x*0", "@tile=__import__('os').getcwd()", "@grid=1/0",
             "@shared=-1", "@shared=2**70", "@tile=NOPE", "@tile=block_x*10**30", "@tile=9**9**9", "@", "@tile",
             "@foo=1", "@tile=block_x x block_y x 1 x 1", "@grid=sm:-2", "@tile=block_x*TX -D TX=1..8:pow2 "
             "--variant vec4", "@tile=(block_x", "@shared=block_x*TX*4 -D TX=-1,1"):
    c("add", A + spec)
for spec in ("{ws}/k.cu:nosuch", "{ws}/nosuch.cu:axpy", "{ws}/k.cu", "{ws}/fifo.cu:axpy", "{ws}/zero.cu:axpy",
             "{ws}/dir:axpy", ":axpy", "{ws}/k.cu:", "{ws}/k.cu:ax;py", "{ws}/run.json:axpy"):
    c("add", f"tune copy --add {spec}")
c("add", "tune copy --add {ws}/k.cu:axpy --add {ws}/k.cu:axpy")

# --- 10. replay --versus with malformed kernel_tuner caches -------------------------------------------------
# kernel_tuner writes its cache as it goes: the file stops after the last entry's comma (no closing braces)
KT = json.loads((Path(__file__).resolve().parent.parent / "tests/data/kt/axpy-cache.json").read_text().rstrip()
                .rstrip(",") + "}}")


def kt(mutate) -> Callable[[Path, Path], None]:
    d = json.loads(json.dumps(KT))
    mutate(d)
    return write("bad.json", json.dumps(d))


bad = {"empty": write("bad.json", ""), "object": write("bad.json", "{}"), "list": write("bad.json", "[]"),
       "cache list": kt(lambda d: d.update(cache=[1, 2])),
       "time text": kt(lambda d: [e.update(time="abc") for e in d["cache"].values()]),
       "time nan": write("bad.json", json.dumps(KT).replace('"time": 2.0', '"time": NaN', 1)),
       "time negative": kt(lambda d: [e.update(time=-1) for e in d["cache"].values()]),
       "no tune_params": kt(lambda d: d.pop("tune_params")), "params text": kt(lambda d: d.update(tune_params="x")),
       "keys mismatch": kt(lambda d: d.update(tune_params_keys=["a"])),
       "entry list": kt(lambda d: d["cache"].update({"128,1,1": [1]})),
       "other kernel": kt(lambda d: d.update(kernel_name="other", tune_params={"Q": [1, 2]},
                                             tune_params_keys=["Q"], cache={})),
       "huge": write("bad.json", '{"cache": {' + ",".join(f'"{i}": {{}}' for i in range(300000)) + "}}"),
       "deep": write("bad.json", "[" * 100000 + "]" * 100000),
       "fifo": fifo("bad.json"), "zero": link("bad.json", "/dev/zero"), "run": link("bad.json", "run.json")}
#: read as kernel_tuner writes them: a non-number time is its failure marker, tune_params are the names (the
#: keys list is redundant), an entry that is no dict is skipped as a partial write: answered, not refused
LENIENT = ("time text", "keys mismatch", "entry list")
for why, setup in bad.items():
    c("replay", "tune --replay {ws}/kt.json --versus {ws}/bad.json --seeds 1 --trials 3", setup=setup, note=why,
      refuse=why not in LENIENT + ("time negative",))  # beside a campaign, its rows say "failed"
    c("replay", "tune --replay {ws}/bad.json --seeds 1 --trials 3", setup=setup, note=why,
      refuse=why not in LENIENT and why != "time text")
c("replay", "tune --replay {ws}/kt.json --versus {ws}/kt.json --seeds 1 --trials 3", refuse=False)
c("replay", "tune --replay {ws}/kt.json --versus {ws}/dir --seeds 1")

# --- 11. judge ----------------------------------------------------------------------------------------------
J = "judge copy --add {ws}/k.cu:axpy"
for t in ("--n 0", "--seed -1", "--budget nan", "--min-samples -1", "--option '='", "--launch bogus",
          "--indent -1", "--indent 1000000000", "--device -1", "--against nosuch", "--reference nosuch",
          "--n 1k,2k", "--shape 0x3", "--timeout inf", "--option 'x=$(touch pwned)'"):
    c("judge", f"{J} {t}")
for t in ("judge copy", "judge copy --add ''", "judge nosuch --add {ws}/k.cu:axpy", "judge copy --add {ws}/k.cu:none",
          "judge copy --add {ws}/fifo.cu:axpy", "judge copy --add {ws}/zero.cu:axpy",
          "judge copy --add {ws}/k.cu:axpy --add {ws}/k.cu:axpy", "judge --add {ws}/k.cu:axpy"):
    c("judge", t)
