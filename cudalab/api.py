"""The Python API, for notebooks: ``cudalab.run(...)`` runs a family (a sweep when any axis is a list)
and returns the :class:`~cudalab.records.results.RunRecord` the command line would save; nothing is printed
unless asked.

    import cudalab
    rec = cudalab.run("transpose", variants=["naive", "bankopt"], n=[4096, 16384],
                      add=["docs/examples/my_transpose.cu:my_transpose@block=32x8,tile=32x32"])
    rec.to_pandas()          # one row per (point, variant)

The GPU module (and so pycuda) is imported only when a run starts: ``import cudalab`` works without it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

from cudalab import catalog
from cudalab.errors import UsageError
from cudalab.execute import Workers
from cudalab.records import results
from cudalab.report import notebook  # noqa: F401  (a record shows as its tables in a notebook: registers them)
from cudalab.session.options import RunOptions

if TYPE_CHECKING:
    from cudalab.records.results import RunRecord

__all__ = ["run", "run_options", "load_record"]


def _text(value: Any) -> Any:
    """Sizes or blocks as the runner takes them: ``(32, 8)`` is the block ``32x8``, a list is a sweep."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, tuple) and all(isinstance(v, int) for v in value):
        return "x".join(str(v) for v in value)
    if isinstance(value, (list, tuple)):
        return [_text(v) for v in value]
    return str(value)


def _define(name: str, value: Any) -> str:
    """One ``-D`` text: ``UNROLL=8``, or ``UNROLL=2,4,8`` for a list (a sweep)."""
    values = value if isinstance(value, (list, tuple)) else [value]
    return f"{name}={','.join(str(v) for v in values)}"


def _types(variants: Any, defines: Any, devices: Any, budget: Any, min_samples: Any, seed: Any, device: Any,
           timeout: Any) -> None:
    """Refuse an argument of the wrong type in one UsageError (a raw TypeError deep in the run said nothing)."""
    def seq_of(v: Any, kind: type) -> bool:
        return isinstance(v, Sequence) and not isinstance(v, (str, bytes)) and \
            all(isinstance(x, kind) and not isinstance(x, bool) for x in v)

    def num(v: Any, kind: tuple[type, ...] = (int, float)) -> bool:
        return isinstance(v, kind) and not isinstance(v, bool)

    checks = (("variants", variants is None or isinstance(variants, str) or seq_of(variants, str),
               "a variant's name or a list of names"),
              ("defines", defines is None or isinstance(defines, Mapping), "a dict of NAME -> value(s)"),
              ("devices", devices is None or isinstance(devices, str) or seq_of(devices, int),
               "'all', '0,1' or a list of GPU indices"),
              ("budget", num(budget), "seconds, a number"), ("min_samples", num(min_samples, (int,)), "an integer"),
              ("seed", seed is None or num(seed, (int,)), "an integer"), ("device", num(device, (int,)), "an integer"),
              ("timeout", timeout is None or num(timeout), "seconds, a number"))
    for name, ok, what in checks:
        if not ok:
            value = locals()[name] if name in locals() else None
            raise UsageError(f"cudalab.run: {name} must be {what} (got {type(value).__name__})")


def run_options(fam: Any, variants: str | Sequence[str] | None = None, *, n: Any = None, shape: Any = None,
                dtype: str | Sequence[str] | None = None, block: Any = None, grid: str | None = None,
                add: str | Iterable[str] = (), defines: Mapping[str, Any] | None = None, seed: int | None = None,
                budget: float = 0.5, min_samples: int = 10, hot: bool = False, roofline: bool = True,
                energy: bool = False, exclusive: bool = False, lock_clocks: int | None = None, force: bool = False,
                device: int = 0, drop_throttled: bool = False, launch: str = "auto", **options: Any) -> RunOptions:
    """:func:`run`'s arguments as the typed request every front end builds
    (:class:`~cudalab.session.options.RunOptions`; where it runs is :func:`run`'s).

    Raises:
        UsageError: an option the family does not have, a malformed ``add`` or its file missing.
    """
    from cudalab.catalog.user import parse_adds  # noqa: PLC0415  (the build modules: only when a run is made)

    _types(variants, defines, None, budget, min_samples, seed, device, None)
    known = [o.name.replace("-", "_") for o in fam.OPTIONS]
    for name in options:
        if name.replace("-", "_") not in known:
            raise UsageError(f"no option {name!r}; valid: {', '.join(o.name for o in fam.OPTIONS) or 'none'}")
    given = {name.replace("-", "_"): value for name, value in options.items()}
    return RunOptions(
        variants=variants if variants is None or isinstance(variants, str) else ",".join(variants),
        n=_text(n), shape=_text(shape), dtype=dtype if dtype is None or isinstance(dtype, str) else list(dtype),
        block=_text(block), grid=grid, add=parse_adds((add,) if isinstance(add, str) else tuple(add)),
        defines=tuple(_define(k, v) for k, v in (defines or {}).items()), seed=seed, budget=budget,
        min_samples=min_samples, hot=hot, roofline=roofline, energy=energy, exclusive=exclusive,
        drop_throttled=drop_throttled, launch=launch, lock_clocks=lock_clocks, force=force, device=device,
        options=tuple((o.name, given.get(o.name.replace("-", "_"))) for o in fam.OPTIONS))


def run(family: Any, variants: str | Sequence[str] | None = None, *, n: Any = None, shape: Any = None,
        dtype: str | Sequence[str] | None = None, block: Any = None, grid: str | None = None,
        add: str | Iterable[str] = (), defines: Mapping[str, Any] | None = None, seed: int | None = None,
        budget: float = 0.5, min_samples: int = 10, hot: bool = False, roofline: bool = True,
        energy: bool = False, exclusive: bool = False, lock_clocks: int | None = None, force: bool = False,
        device: int = 0, devices: Sequence[int] | str | None = None, timeout: float | None = None,
        drop_throttled: bool = False, launch: str = "auto", progress: bool = False, show: bool = False, **options: Any) -> RunRecord:
    """Run variants of one family on the GPU and return the record.

    Every axis may be a list (or a comma text, as on the command line); the cross product runs,
    one :class:`~cudalab.records.results.RunPoint` per point. The run is the command line's
    (``cudalab FAMILY`` with the same options: :func:`cudalab.session.run.run_points`).

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
        energy: ``--energy``: each GPU row's energy from a second of back-to-back launches (needs NVML).
        exclusive: ``--exclusive``: refuse to start while another process computes on the GPU (needs NVML).
        lock_clocks: ``--lock-clocks MHZ``: the SM clock locked during the run, restored after (needs NVML
            and permission to set clocks).
        force: ``--force``: run even when the memory plan says the GPU's free memory is too small.
        device: GPU index.
        devices: spread the points over these GPUs (``"all"`` or a list), one worker each.
        timeout: seconds a kernel may run before its worker is killed and its row is ``timeout``.
        drop_throttled: ``--drop-throttled``: samples NVML saw throttled left out of the statistics.
        launch: ``--launch``: how a kernel under 20 µs is timed (``auto``, ``batch``, ``graph``, ``cupti``, ``events``).
        progress: show progress on stderr (a bar on a terminal, lines otherwise).
        show: print the tables as the command line does.
        **options: the family's own options (``tile=16``, ``alpha=1.5``; lists sweep).

    Raises:
        UsageError: a bad name, size, option or ``add`` text (before the GPU is opened).
        GpuUnavailableError: no pycuda, driver or GPU.
        TelemetryError: ``exclusive`` with another process on the GPU, or ``lock_clocks`` refused.
    """
    from cudalab.report import progress as P  # noqa: PLC0415
    from cudalab import report  # noqa: PLC0415
    from cudalab.session import sweep  # noqa: PLC0415
    from cudalab.families import load  # noqa: PLC0415
    from cudalab.session.run import run_points  # noqa: PLC0415

    args = dict(n=n, shape=shape, dtype=dtype, block=block, grid=grid, add=add, defines=defines, seed=seed,
                budget=budget, min_samples=min_samples, hot=hot, roofline=roofline, energy=energy,
                exclusive=exclusive, lock_clocks=lock_clocks, force=force, device=device,
                drop_throttled=drop_throttled, launch=launch)
    if not isinstance(family, str) and not isinstance(getattr(family, "name", None), str):
        raise UsageError(f"cudalab.run: family must be a family's name or a Problem (got {type(family).__name__})")
    if not isinstance(family, str):  # a problem object: a family folder while it runs (workers find it)
        from cudalab.problems.inline import materialized  # noqa: PLC0415

        with materialized(family) as name:
            return run(name, variants, **args, devices=devices, timeout=timeout, progress=progress, show=show,
                       **options)
    with catalog.held():  # read once for the run, as a command does
        spec = catalog.family(family)
        fam = load(spec.module)
        _types(variants, defines, devices, budget, min_samples, seed, device, timeout)
        opts = run_options(fam, variants, **args, **options)
        workers = Workers(device=device, timeout=timeout, energy=energy, nvml_first=exclusive or lock_clocks is not None,
                          devices=devices if devices is None or isinstance(devices, str) else
                          ",".join(str(int(d)) for d in devices))
        ex = run_points(spec, fam, opts, workers, P.for_stderr(quiet=not progress)).executed
    refused = ex.refusal()
    if refused is not None:
        raise refused
    rec = sweep.record(spec, ex.runs, ex.incomplete, ex.info, ["cudalab.run", family], None)
    if show:
        con = report.console()
        for p in rec.points:
            report.print_point(con, rec, p, fam.EXTRA_COLUMNS)
    return rec


def load_record(path: Any) -> RunRecord:
    """Read a saved run (``--json``): :func:`cudalab.records.results.load_record`, shown as its tables in a notebook.

    Raises:
        UsageError: not a cudalab run record, or unreadable.
    """
    return results.load_record(path)
