"""A variant's tile, grid, shared and require expressions may name the integer defines in effect (the
family's defines and the -D overrides): a tuned WT_BM x WT_BN gets the grid it needs, and every built-in
variant's planned launch is what it was before (tests/data/launches/builtin.json, written by the planner
before the change: ``python tests/test_plan_defines.py --write``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from cudalab import catalog
from cudalab import launch as L
from cudalab.errors import CudalabError, SkipRow
from cudalab.families import load
from cudalab.plan import plan_launch

SNAPSHOT = Path(__file__).parent / "data" / "launches" / "builtin.json"
SIZES = (None, "1024", "4096", "3000")
BLOCKS = (None, "128", "256", "32x8")


def planned_launches() -> dict[str, str]:
    """Every built-in kernel variant's launch (or the class of its refusal) at a few sizes and blocks."""
    out = {}
    for name in sorted(catalog.load_catalog()):
        spec = catalog.family(name)
        fam = load(spec.module)
        for v in spec.variants:
            if v.kind != "kernel":
                continue
            for n in SIZES:
                try:
                    problem = fam.problem(n, None, spec.default_dtype, {})
                except CudalabError:
                    continue
                for block in BLOCKS:
                    key = f"{name}/{v.name} n={n} block={block}"
                    try:
                        lau = plan_launch(v, fam, problem, block)
                    except CudalabError as exc:
                        out[key] = type(exc).__name__
                        continue
                    out[key] = (f"grid {L.fmt_dims(lau.grid)} block {L.fmt_dims(lau.block)} tile {L.fmt_dims(lau.tile)} "
                                f"shared {lau.shared} defines {' '.join(f'{k}={v}' for k, v in lau.defines)}")
    return out


def test_every_builtin_launch_is_unchanged():
    want = json.loads(SNAPSHOT.read_text())
    got = planned_launches()
    assert set(got) == set(want)
    changed = {k: (want[k], got[k]) for k in want if want[k] != got[k]}
    assert not changed


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    SNAPSHOT.write_text(json.dumps(planned_launches(), indent=1, sort_keys=True) + "\n")
