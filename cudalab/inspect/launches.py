"""What each kernel row of a family launches at its default size, before any GPU (``cudalab list FAMILY``)."""

from __future__ import annotations

from cudalab import launch as L
from cudalab.catalog import FamilySpec
from cudalab.errors import CudalabError
from cudalab.families import Family
from cudalab.plan import plan_launch

__all__ = ["default_launches"]


def default_launches(spec: FamilySpec, fam: Family) -> tuple[str, list[tuple[str, str]]]:
    """What each kernel row launches at the family's default size (no GPU: the default device limits,
    132 SMs for ``sm:K`` grids): ``(the size, [(row, "grid G × block B = T threads, extent E")])``; a
    row that cannot run there says why instead.

    Raises:
        CudalabError: the default size itself is refused (a problem's ``validate``).
    """
    problem = fam.problem(None, None, spec.default_dtype, {})
    out = []
    for v in spec.variants:
        if v.kind != "kernel":
            continue
        try:
            launch = plan_launch(v, fam, problem)
            extent = fam.extent(problem, v)
        except CudalabError as exc:
            out.append((v.name, f"– ({exc})"))
            continue
        threads = L.threads(launch.grid) * L.threads(launch.block)
        out.append((v.name, f"grid {L.fmt_dims(launch.grid)} × block {L.fmt_dims(launch.block)} = {threads:,} threads "
                            f"over extent {L.fmt_dims(extent)}"))
    return f"{problem.label} {problem.dtype}", out
