"""Every kernel variant of every family under all four compute-sanitizer tools (GPU + compute-sanitizer).

Fails on a finding (or a failed run) in a variant that is not marked legacy, and on a kernel
variant the sanitizer never saw because every size skipped it (give the family SANITIZE_SIZES).
Legacy variants' findings are printed, not counted. On an H200 the whole catalog takes about
two minutes with the families run side by side.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from cudalab import catalog
from cudalab import sanitize as S
from cudalab.plan import RunRequest

pytestmark = pytest.mark.sanitizer

FAMILIES = sorted(catalog.load_catalog())


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """Rows of every family, sanitized in parallel (the runs are independent processes)."""
    logs = tmp_path_factory.mktemp("sanitizer-logs")

    def one(family: str):
        return family, S.sanitize(RunRequest(family=family), tools=S.TOOLS, log_dir=logs / family, timeout_s=300)

    with ThreadPoolExecutor(max_workers=len(FAMILIES)) as pool:
        return dict(pool.map(one, FAMILIES))


@pytest.mark.parametrize("family", FAMILIES)
def test_family_is_clean_under_every_tool(results, family):
    rows = results[family]
    legacy = [f"{r.variant} {r.tool} {r.size}: {r.findings} ({r.first})" for r in rows
              if r.legacy and r.status == S.FINDINGS]
    if legacy:
        print(f"legacy findings in {family} (shown, not counted):", *legacy, sep="\n  ")
    bad = [f"{r.variant} {r.tool} {r.size}: {r.status} {r.findings} {r.first or r.reason} [{r.log}]"
           for r in S.failing(rows)]
    assert not bad, "\n".join(bad)
    unseen = [v for v in S.never_ran(rows) if not catalog.family(family).variant(v).legacy]
    assert not unseen, f"{family}: never run (skipped at every size): {unseen}; add SANITIZE_SIZES"


@pytest.mark.parametrize("family", FAMILIES)
def test_every_tool_ran_at_two_sizes(results, family):
    rows = results[family]
    assert {r.tool for r in rows} == set(S.TOOLS)
    assert len({r.size for r in rows}) == 2, sorted({r.size for r in rows})
    assert any(r.status == S.PASSED for r in rows), [(r.variant, r.tool, r.size, r.status, r.reason) for r in rows]
