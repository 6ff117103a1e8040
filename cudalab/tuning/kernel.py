"""``cudalab.tune_kernel``: a kernel without a family, tuned in one call, in the shape kernel_tuner's users know.

    res = cudalab.tune_kernel("my_axpy", "my_axpy.cu", n, [z, x, y, np.float32(2.0), np.int32(n)],
                              {"block_size_x": [128, 256, 512], "EPT": [1, 2, 4], "VW": [1, 2, 4]},
                              grid_div_x=["block_size_x", "EPT", "VW"], answer=[2 * x + y, None, None, None, None])
    res.winner, res.to_pandas()

Behind it is everything ``cudalab tune`` does: the arguments become a problem defined inline (the arrays its
inputs, the answer its reference; :mod:`cudalab.problems.inline`), the parameters a space (:mod:`cudalab.
tuning.interchange`), and every configuration an ordinary trial: built, run in an isolated GPU worker (a
configuration that crashes, hangs or computes a wrong answer is one infeasible trial, never the end of the
campaign), its output poisoned twice and checked, timed by the run tables' protocol (the L2 flushed before
each sample), the best raced before a winner is named, the campaign in SQLite (the same call continues it).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from cudalab.errors import UsageError

__all__ = ["tune_kernel"]

_DIMS = ("x", "y", "z")


def _sizes(problem_size: Any) -> tuple[int, ...]:
    sizes = (problem_size,) if isinstance(problem_size, (int, np.integer)) else tuple(problem_size or ())
    if not 1 <= len(sizes) <= 3 or not all(isinstance(s, (int, np.integer)) and int(s) >= 1 for s in sizes):
        raise UsageError(f"problem_size must be 1 to 3 positive integers (got {problem_size!r})")
    return tuple(int(s) for s in sizes)


def _source(kernel_source: Any, kernel_name: str) -> str:
    """The CUDA text: ``kernel_source`` itself, or the file it names."""
    if not isinstance(kernel_source, (str, Path)):
        raise UsageError("kernel_source must be CUDA text or the path of a .cu file")
    text = str(kernel_source)
    if "__global__" not in text and "\n" not in text:
        path = Path(text).expanduser()
        if not path.is_file():
            raise UsageError(f"kernel_source {text!r} is neither CUDA text nor a file")
        text = path.read_text(encoding="utf-8")
    if not re.search(rf"\b{re.escape(kernel_name)}\b", text):
        raise UsageError(f"the source has no kernel {kernel_name} (declare it extern \"C\" __global__)")
    return text


def _problem(kernel_name: str, text: str, sizes: tuple[int, ...], arguments: Sequence[Any],
             answer: Sequence[Any] | None, reference: Callable[[list[Any]], Sequence[Any]] | None,
             atol: float, rtol: float, work: Any, metric: str, kt: Any) -> Any:
    """The inline problem: the arrays, the scalars, the checked output and its reference, the launch rules."""
    from cudalab import problems as P  # noqa: PLC0415

    if not isinstance(arguments, (list, tuple)) or not arguments:
        raise UsageError("arguments must be a list of NumPy arrays and NumPy scalars, in the kernel's order")
    names = [f"arg{i}" for i in range(len(arguments))]
    arrays: dict[str, np.ndarray] = {}
    scalars = []
    for name, a in zip(names, arguments):
        if isinstance(a, np.ndarray):
            arrays[name] = a
        elif isinstance(a, np.generic):
            scalars.append(P.Scalar(name, a.item(), a.dtype.name))
        else:
            raise UsageError(f"argument {name} is a {type(a).__name__}: give NumPy arrays and NumPy scalars "
                             "(np.int32(n), np.float32(alpha)), as the kernel takes them")
    if answer is None and reference is None:
        raise UsageError("give answer= (the expected outputs, None where an argument is not checked) or reference=")
    if answer is not None and reference is not None:
        raise UsageError("give answer= or reference=, not both")
    expected = list(answer) if answer is not None else None
    if expected is not None and len(expected) != len(arguments):
        raise UsageError(f"answer has {len(expected)} entries for {len(arguments)} arguments")
    checked = [n for n, e in zip(names, expected or []) if e is not None]
    if reference is not None:  # the reference says which: the first array argument it gives a value for
        got = list(reference([arrays.get(n, s) for n, s in zip(names, arguments)]))
        checked = [n for n, e in zip(names, got) if e is not None]
        expected = got
    if len(checked) != 1 or checked[0] not in arrays:
        raise UsageError(f"tune_kernel checks one output array: the answer names {len(checked)} "
                         f"({', '.join(checked) or 'none'}); give None for the others")
    out = checked[0]
    want = np.asarray(expected[names.index(out)])
    if want.shape != arrays[out].shape:
        raise UsageError(f"the answer for {out} has shape {want.shape}, the argument {arrays[out].shape}")
    inputs = {n: a for n, a in arrays.items() if n != out}
    dtype = arrays[out].dtype.name
    nbytes = sum(a.nbytes for a in arrays.values())

    def make_inputs(size: Any, rng: Any) -> dict[str, np.ndarray]:
        return {n: a.copy() for n, a in inputs.items()}  # the caller's arrays, never written by a run

    kernel = P.Kernel(name=kernel_name, source=text, kernel=kernel_name, block="x".join(map(str, _first_block(kt))),
                      tile=kt.tile, defines=_kt_macros(kt))
    dims = _DIMS[:len(sizes)]
    return P.Problem(
        dims=dims, default=sizes, inputs=make_inputs,
        outputs=(P.Output(out, lambda s, _shape=arrays[out].shape: _shape, dtype),),
        reference=lambda s, i, _want=want: _want, args=tuple(names), check=P.Tolerance(rtol=rtol, atol=atol),
        work=work if work is not None else (lambda s, _b=nbytes: P.Work(bytes=_b)),
        extent=lambda s, v, _sizes=sizes: _sizes, scalars=tuple(scalars), kernels=(kernel,),
        name=_name(kernel_name, text), description=f"tune_kernel {kernel_name}", dtypes=(dtype,), metric=metric,
        input_dtypes={n: a.dtype.name for n, a in inputs.items()})


def _first_block(kt: Any) -> tuple[int, ...]:
    if kt.block is None:
        return (256,)
    return tuple(int(x) for x in kt.block.split(",")[0].split("x"))


def _kt_macros(kt: Any) -> dict[str, str]:
    """The variant's macros: kernel_tuner's block sizes (``block_size_x``) as the launch sets them (its kernels
    read them), and each tuned parameter at its first value (the variant's own configuration; a trial's ``-D``
    replaces it)."""
    out = {name: launch for name, launch in zip(("block_size_x", "block_size_y", "block_size_z"),
                                                ("block_x", "block_y", "block_z"))}
    out.update({name: values.split(",")[0] for name, values in kt.defines})
    return out


def _name(kernel_name: str, text: str) -> str:
    """The campaign's family name: the kernel's, and its source's hash (another source, another family)."""
    tag = re.sub(r"[^a-z0-9_-]+", "-", kernel_name.lower()).strip("-_") or "kernel"
    return f"kt-{tag[:40]}-{hashlib.sha256(text.encode()).hexdigest()[:8]}"


def tune_kernel(kernel_name: str, kernel_source: str | Path, problem_size: Any, arguments: Sequence[Any],
                tune_params: Mapping[str, Sequence[Any]], *, grid_div_x: Sequence[str] | None = None,
                grid_div_y: Sequence[str] | None = None, grid_div_z: Sequence[str] | None = None,
                restrictions: Sequence[str] | str | None = None, answer: Sequence[Any] | None = None,
                reference: Callable[[list[Any]], Sequence[Any]] | None = None, atol: float = 1e-6,
                rtol: float = 1e-5, block_size_names: Sequence[str] | None = None, strategy: str = "grid",
                work: Any = None, metric: str = "bandwidth", **kw: Any) -> Any:
    """Tune one kernel over a parameter space, as kernel_tuner's ``tune_kernel`` is called, with cudalab's
    protocol behind it; returns the :class:`~cudalab.tuning.result.TuneResult` (``.winner``, ``.to_pandas()``).

    Args:
        kernel_name: the ``extern "C"`` kernel.
        kernel_source: CUDA text, or the path of a ``.cu`` file.
        problem_size: 1 to 3 sizes: the elements the grid covers along x, y, z.
        arguments: the kernel's arguments in order: NumPy arrays (uploaded) and NumPy scalars (``np.int32(n)``).
        tune_params: parameter -> values; ``block_size_x/y/z`` (or ``block_size_names``) are the block, every
            other one a macro the kernel reads.
        grid_div_x, grid_div_y, grid_div_z: the names whose product one block covers along each axis (default:
            the block's size); the grid is ``ceil(problem_size / that)``.
        restrictions: constraints as expressions over the parameters (``"block_size_x * TX <= 128"``).
        answer: the expected value of each argument after the kernel (None where not checked; one array is).
        reference: instead of ``answer``: ``reference(arguments) -> answer``, called once.
        atol, rtol: the check's tolerance (|result - answer| <= atol + rtol * |answer| everywhere; kernel_tuner's
            ``np.allclose(answer, result, atol=atol)`` is rtol 1e-5).
        strategy: ``grid`` (every configuration, kernel_tuner's brute force), ``random``, ``tpe``...
        work: ``work(size) -> Work`` (bytes, FLOPs) for the rates; default: every argument's bytes once.
        metric: ``bandwidth`` (GB/s) or ``flops`` (GFLOP/s, with ``work``).
        **kw: any other ``cudalab.tune`` option (``trials``, ``race``, ``storage``, ``name``, ``seed``, ``budget``,
            ``timeout``, ``device``...).

    Raises:
        UsageError: bad arguments, parameters or constraints, before any build.
    """
    from cudalab.problems.inline import materialized  # noqa: PLC0415
    from cudalab.tuning import tune  # noqa: PLC0415
    from cudalab.tuning.interchange import space_of  # noqa: PLC0415

    if not isinstance(kernel_name, str) or not re.fullmatch(r"[A-Za-z_]\w*", kernel_name):
        raise UsageError(f"kernel_name must be a C identifier (got {kernel_name!r})")
    sizes = _sizes(problem_size)
    kt = space_of(tune_params, restrictions, (grid_div_x, grid_div_y, grid_div_z), block_size_names)
    text = _source(kernel_source, kernel_name)
    problem = _problem(kernel_name, text, sizes, arguments, answer, reference, atol, rtol, work, metric, kt)
    kw.setdefault("name", problem.name)
    with materialized(problem) as family:
        res = tune(family, kernel_name, defines=dict(kt.defines), block=kt.block, require=kt.require,
                   strategy=strategy, use_table=False, **kw)
    # no command reruns it: its family lived only for the call (res.best_params is the configuration)
    return replace(res, command="")
