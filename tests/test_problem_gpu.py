"""The three examples (outside families) on a GPU: run (✓ for the real variants, ✗ for the wrong twins,
% of the roofline), sizes off every tile, and compute-sanitizer's memcheck and racecheck clean."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
WRONG = {"softmax": "wrong-no-rescale", "scan": "wrong-no-carry", "histogram": "wrong-short-flush",
         "rowsum": "wrong-skips-last"}


def cudalab(*args: str) -> subprocess.CompletedProcess:
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return subprocess.run([sys.executable, "-m", "cudalab", "--family-path", str(EXAMPLES), *args],
                          capture_output=True, text=True, cwd=ROOT, env=dict(os.environ, PYTHONPATH=path), timeout=600)


@pytest.mark.gpu
@pytest.mark.parametrize("family, size", [
    ("softmax", ("--shape", "1000x1000")), ("softmax", ("--shape", "4096x4096")), ("softmax", ("--shape", "7x33")),
    ("scan", ("--n", "1")), ("scan", ("--n", "16789561")), ("scan", ("--n", "2^26")),
    ("histogram", ("--n", "3")), ("histogram", ("--n", "16777217")),
    ("rowsum", ("--shape", "16384x1024")), ("rowsum", ("--shape", "1000x33")), ("rowsum", ("--shape", "7x1")),
])
def test_real_variants_pass_and_the_wrong_twin_does_not(tmp_path, family, size):
    out = tmp_path / "run.json"
    res = cudalab(family, *size, "--budget", "0.05", "--json", str(out))
    rows = {r["variant"]: r for p in json.loads(out.read_text())["points"] for r in p["results"]}
    small = size[-1] in ("1", "3", "7x33", "7x1")  # a twin's bug may not show at a tiny size (one tile, few bins)
    for name, row in rows.items():
        if (name == "cupy" and row["status"] == "skipped") or (small and name == WRONG[family]):
            continue
        want = "incorrect" if name == WRONG[family] else "passed"
        assert row["status"] == want, (name, row.get("reason"), res.stdout, res.stderr)
    assert res.returncode in ((0, 1) if small else (1,)), res.stderr  # 1: the wrong twin's row


@pytest.mark.gpu
def test_a_roofline_is_measured_for_each(tmp_path):
    for family in WRONG:
        out = tmp_path / f"{family}.json"
        cudalab(family, "--budget", "0.05", "--json", str(out))
        point = json.loads(out.read_text())["points"][0]
        assert point["roofline"]["gbs"] > 0, family


@pytest.mark.sanitizer
@pytest.mark.parametrize("family", sorted(WRONG))
def test_examples_are_clean_under_memcheck_and_racecheck(family):
    variants = ",".join(v for v in {"softmax": "block-row,warp-online", "scan": "reduce-then-scan,lookback",
                                    "histogram": "global-atomics,shared-bins",
                                    "rowsum": "thread-a-row,warp-a-row"}[family].split(","))
    res = cudalab("sanitize", family, "--variant", variants, "--tool", "memcheck,racecheck")
    assert res.returncode == 0, res.stdout + res.stderr
