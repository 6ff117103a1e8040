"""The Python API, for notebooks: ``cudalab.run(...)`` runs a family (a sweep when any axis is a list)
and returns the :class:`~cudalab.results.RunRecord` the command line would save; nothing is printed
unless asked.

    import cudalab
    rec = cudalab.run("transpose", variants=["naive", "bankopt"], n=[4096, 16384],
                      add=["docs/examples/my_transpose.cu:my_transpose@block=32x8,tile=32x32"])
    rec.to_pandas()          # one row per (point, variant)

The GPU module (and so pycuda) is imported only when a run starts: ``import cudalab`` works without it.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

from cudalab import catalog, sweep, user
from cudalab.bench import Protocol
from cudalab.families import load
from cudalab.results import RunRecord

__all__ = ["run"]


def _text(value: Any) -> Any:
    """Sizes or blocks as the runner takes them: ``(32, 8)`` is the block ``32x8``, a list is a sweep."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, tuple) and all(isinstance(v, int) for v in value):
        return "x".join(str(v) for v in value)
    if isinstance(value, (list, tuple)):
        return [_text(v) for v in value]
    return str(value)


def run(family: Any, variants: str | Sequence[str] | None = None, *, n: Any = None, shape: Any = None,
        dtype: str | Sequence[str] | None = None, block: Any = None, grid: str | None = None,
        add: str | Iterable[str] = (), defines: Mapping[str, Any] | None = None, seed: int | None = None,
        budget: float = 0.5, min_samples: int = 10, hot: bool = False, roofline: bool = True, device: int = 0,
        devices: Sequence[int] | str | None = None, timeout: float | None = None,
        progress: bool = False, show: bool = False, **options: Any) -> RunRecord:
    """Run variants of one family on the GPU and return the record.

    Every axis may be a list (or a comma text, as on the command line); the cross product runs,
    one :class:`~cudalab.results.RunPoint` per point.

    Args:
        family: family name (``transpose``), or a :class:`cudalab.Problem` defined inline (its
            ``name``, ``kernels`` and ``libraries`` stand for a family folder).
        variants: names (list or comma text); None: all; ``"none"`` with ``add``: only your kernels.
        n, shape, dtype, block: sizes, element type, block dims (``"32x8"``, ``(32, 8)`` or a list of them).
        grid: grid dims override.
        add: ``--add`` texts (``"my.cu:my_kernel@block=32x8"``), paths relative to the working directory.
        defines: ``-D`` overrides, ``{"UNROLL": 8}`` or ``{"UNROLL": [2, 4, 8]}`` (a sweep).
        seed: random seed of the inputs.
        budget, min_samples, hot, roofline: the timing protocol, as on the command line.
        device: GPU index.
        devices: spread the points over these GPUs (``"all"`` or a list), one worker each.
        timeout: seconds a kernel may run before its worker is killed and its row is ``timeout``.
        progress: show progress on stderr (a bar on a terminal, lines otherwise).
        show: print the tables as the command line does.
        **options: the family's own options (``tile=16``, ``alpha=1.5``; lists sweep).

    Raises:
        UsageError: a bad name, size, option or ``add`` text (before the GPU is opened).
        GpuUnavailableError: no pycuda, driver or GPU.
    """
    from cudalab import progress as P  # noqa: PLC0415
    from cudalab import report  # noqa: PLC0415

    if not isinstance(family, str):  # a problem object: a family folder while it runs (workers find it)
        from cudalab.problems.inline import materialized  # noqa: PLC0415

        args = dict(n=n, shape=shape, dtype=dtype, block=block, grid=grid, add=add, defines=defines, seed=seed,
                    budget=budget, min_samples=min_samples, hot=hot, roofline=roofline, device=device,
                    devices=devices, timeout=timeout, progress=progress, show=show)
        with materialized(family) as name:
            return run(name, variants, **args, **options)
    spec = catalog.family(family)
    fam = load(spec.module)
    names = variants if variants is None or isinstance(variants, str) else ",".join(variants)
    adds = user.parse_adds([add] if isinstance(add, str) else list(add))
    base = sweep.base_request(spec, fam, variants=names, grid=grid, add=adds,
                              protocol=Protocol(budget_s=budget, min_samples=min_samples, flush_l2=not hot),
                              seed=seed, roofline=roofline, device=device, keep_outputs=False)
    ax = sweep.axes(spec, fam, n=_text(n), shape=_text(shape), dtype=dtype, block=_text(block), options=options,
                    defines=[(k, [str(x) for x in v] if isinstance(v, (list, tuple)) else str(v))
                             for k, v in (defines or {}).items()])
    reqs = sweep.requests(spec, base, ax)
    counts = sweep.precheck_points(reqs)
    gpus = "all" if devices == "all" else [device] if devices is None else [int(d) for d in devices]
    ex = sweep.execute(reqs, P.for_stderr(quiet=not progress), sum(counts), devices=gpus, timeout=timeout)
    refused = ex.refusal()
    if refused is not None:
        raise refused
    rec = sweep.record(spec, ex.runs, ex.incomplete, ex.info, ["cudalab.run", family], None)
    if show:
        con = report.console()
        for p in rec.points:
            report.print_point(con, rec, p, fam.EXTRA_COLUMNS)
    return rec
