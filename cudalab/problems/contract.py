"""The public problem contract: a problem declared in a few frozen dataclasses (no GPU, no pycuda).

A problem says what cudalab cannot guess: the names of its sizes, how to draw its inputs, the output
it checks (shape and dtype: cudalab allocates it, poisons it twice, downloads and checks it), the
scalar arguments, the NumPy reference, the check, the work behind GB/s and GFLOP/s, the extent the
grid covers, and the order of the kernel's arguments (from which the C signature for ``--add`` is
written). :class:`cudalab.problems.adapter.ProblemFamily` turns it into a
:class:`~cudalab.families.base.Family`, so the runner, ncu, sanitize and report treat it as any
built-in.

    PROBLEM = Problem(
        dims=("rows", "cols"), default=(4096, 4096),
        inputs=lambda s, rng: {"x": rng.standard_normal((s.rows, s.cols), np.float32)},
        outputs=(Output("y", lambda s: (s.rows, s.cols)),),
        args=("y", "x", "rows", "cols"),
        reference=lambda s, i: softmax(i["x"]),
        check=Tolerance(rtol=1e-4, atol=1e-7),
        work=lambda s: Work(bytes=2 * s.rows * s.cols * 4),
        extent=lambda s, v: (32, s.rows),
    )
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np

from cudalab.families.model import Check, FamilyOption, Size, Work

__all__ = ["Check", "Kernel", "Library", "Option", "Output", "Problem", "Scalar", "Scratch", "Size",
           "Tolerance", "Work", "ctype"]

#: A family option on the command line (``--bins 256``); its value is ``size.bins``.
Option = FamilyOption

_CTYPES = {"float32": "float", "float64": "double", "int32": "int", "uint32": "unsigned int",
           "int64": "long long", "uint64": "unsigned long long", "int16": "short", "uint16": "unsigned short",
           "int8": "signed char", "uint8": "unsigned char", "float16": "__half", "bfloat16": "__nv_bfloat16"}


def ctype(dtype: str | np.dtype) -> str:
    """The C type of a NumPy dtype name (``float32`` -> ``float``)."""
    try:
        name = np.dtype(dtype).name if not isinstance(dtype, str) or dtype != "bfloat16" else dtype
    except TypeError:  # not a dtype: the contract check names the field (cudalab.problems.checks)
        return str(dtype)
    return _CTYPES.get(name, name)


ShapeRule = Callable[..., "tuple[int, ...] | int"]


@dataclass(frozen=True)
class Output:
    """The array the kernel writes and cudalab checks (the first output of a problem).

    Attributes:
        name: its argument name.
        shape: ``shape(size)`` -> the array's shape.
        dtype: its element type (None: the run's ``--dtype``).
        accumulate: the kernel adds into it (a histogram): zeroed before every launch, never poisoned.
    """

    name: str
    shape: ShapeRule
    dtype: str | None = None
    accumulate: bool = False


@dataclass(frozen=True)
class Scratch:
    """A device buffer the kernel needs besides its output (tile flags, partial sums), never checked.

    Attributes:
        name: its argument name.
        shape: ``shape(size, launch)`` -> its shape (``launch.grid``, ``launch.block``, ``launch.tile``).
        dtype: its element type (None: the run's ``--dtype``).
        zero: zeroed before every launch, untimed (flags and counters a single-pass kernel resets).
    """

    name: str
    shape: ShapeRule
    dtype: str | None = None
    zero: bool = False


@dataclass(frozen=True)
class Scalar:
    """A scalar argument: ``value(size)`` (or a constant) passed as ``ctype``."""

    name: str
    value: Any
    dtype: str = "int32"


@dataclass(frozen=True)
class Tolerance:
    """A check that passes when ``|result - reference| <= atol + rtol * |reference|`` everywhere."""

    rtol: float = 1e-5
    atol: float = 0.0


@dataclass(frozen=True)
class Library:
    """A reference row from a library: ``fn(size, arrays)`` runs it on the device arrays (each has
    ``__cuda_array_interface__``: ``cupy.asarray(a)``, ``torch.as_tensor(a, device="cuda")``) and
    writes into ``arrays[output]``, or returns the answer (anything ``cupy.asnumpy``, ``.cpu()`` or
    ``numpy.asarray`` turns into an array). Its family.toml row is ``kind = "library"``, same name."""

    name: str
    fn: Callable[[Size, Mapping[str, Any]], Any]
    description: str = ""


@dataclass(frozen=True)
class Kernel:
    """A variant given in Python, for a problem defined inline (no family.toml): what a
    ``[[variant]]`` table says.

    Attributes:
        name: the row's name.
        source: CUDA source text, or the path of a ``.cu`` file.
        kernel: the ``extern "C"`` symbol.
        block, per_thread, grid, shared, require, defines, params, description: as in family.toml.
        tile: elements one block covers per dim, when not block × per_thread: expressions over the launch's
            names and the defines (``("block_x * TX", "block_y * TY")``), as family.toml's ``tile``.
    """

    name: str
    source: str
    kernel: str
    block: str = "256"
    per_thread: str = "1"
    grid: str = "tiles"
    shared: str = "0"
    tile: tuple[str, ...] = ()
    require: tuple[str, ...] = ()
    defines: Mapping[str, str] = field(default_factory=dict)
    params: Mapping[str, Any] = field(default_factory=dict)
    description: str = ""


CheckRule = Any  # "exact" | Tolerance | float | Callable[[Size, result, reference], Check | bool | tuple]


@dataclass(frozen=True)
class Problem:
    """A problem: everything cudalab needs to run, verify and rate the kernels of one family.

    Attributes:
        dims: the names of the sizes (``("n",)``, ``("rows", "cols")``); ``--n`` sets every one,
            ``--shape AxB`` each.
        default: the size when none is given (one int: every dim).
        inputs: ``inputs(size, rng)`` -> ``{name: array}``, fresh random inputs (not all zeros).
        outputs: the output cudalab checks (first), then any other array the kernel writes.
        reference: ``reference(size, inputs)`` -> the NumPy answer (the checked output's shape and
            dtype, or float64 for a float output).
        args: the kernel's arguments in order: names of inputs, outputs, scratch, scalars and dims
            (dims are passed as ``int``). The C signature for ``--add`` is written from them.
        check: ``"exact"`` (bit for bit), a :class:`Tolerance`, a float (relative tolerance), or a
            callable ``check(size, result, reference)`` returning a Check, a bool, or ``(ok, detail)``.
        work: ``work(size)`` -> :class:`Work` (bytes each counted once, FLOPs, and ``written=``: how many of
            the bytes are written, default half) or ``(bytes, flops)``. The written share sets the row's
            roofline: reads are charged at the measured read rate, writes at the write rate.
        extent: ``extent(size, variant)`` -> the elements the grid covers along x, y, z (1 to 3
            ints; default: every element along x). ``variant.param("key")`` reads family.toml params.
        scratch: device buffers besides the output (:class:`Scratch`).
        scalars: scalar arguments (:class:`Scalar`).
        options: command-line options (:data:`Option`), read as ``size.<name>``.
        libraries: library rows (:class:`Library`).
        launch: advanced: ``launch(ctx)`` -> a function that enqueues one run (several kernels,
            say); ``ctx`` is a :class:`cudalab.problems.adapter.LaunchContext`. Default: the variant's
            kernel with ``args`` over its grid.
        validate: ``validate(size)`` raises ValueError for a size the kernels cannot take.
        kernels: variants given in Python, for a problem defined inline (folders use family.toml).
        name, description, dtypes, metric: the family's, for a problem defined inline.
        size_help: one line for ``--n`` / ``--shape`` help.
        input_dtypes: the inputs' dtypes, for the C signature (default: the run's ``--dtype``).
    """

    dims: tuple[str, ...]
    inputs: Callable[[Size, np.random.Generator], dict[str, np.ndarray]]
    outputs: tuple[Output, ...]
    reference: Callable[[Size, dict[str, np.ndarray]], np.ndarray]
    args: tuple[str, ...]
    work: Callable[[Size], Any]
    check: CheckRule = "exact"
    default: tuple[int, ...] | int = 1 << 20
    extent: Callable[[Size, Any], tuple[int, ...]] | None = None
    scratch: tuple[Scratch, ...] = ()
    scalars: tuple[Scalar, ...] = ()
    options: tuple[FamilyOption, ...] = ()
    libraries: tuple[Library, ...] = ()
    launch: Callable[[Any], Callable[[], None]] | None = None
    validate: Callable[[Size], None] | None = None
    kernels: tuple[Kernel, ...] = ()
    name: str = ""
    description: str = ""
    dtypes: tuple[str, ...] = ("float32",)
    metric: str = "bandwidth"
    size_help: str = ""
    input_dtypes: Mapping[str, str] = field(default_factory=dict)

    def signature(self) -> str:
        """The C prototype a kernel of this problem has (``KERNEL`` for its name), one parameter a line."""
        arrays = {o.name: (o.dtype, False) for o in (*self.outputs, *self.scratch)}
        arrays.update({name: (self.input_dtypes.get(name), True) for name in self._input_names()})
        elem = "ELEM_T" if len(self.dtypes) > 1 else ctype(self.dtypes[0])
        scalars = {s.name: s.dtype for s in self.scalars}
        params = []
        for name in self.args:
            if name in arrays:
                dtype, const = arrays[name]
                c = elem if dtype is None else ctype(dtype)
                params.append((f"{'const ' if const else ''}{c} *{name}", "input" if const else "output or scratch"))
            elif name in scalars:
                params.append((f"{ctype(scalars[name])} {name}", "scalar"))
            else:
                params.append((f"int {name}", "size"))
        width = max((len(p) for p, _ in params), default=0) + 2
        lines = []
        for i, (p, what) in enumerate(params):
            head = "void KERNEL(" if i == 0 else " " * len("void KERNEL(")
            tail = "," if i < len(params) - 1 else ")"
            lines.append(f"{head}{(p + tail).ljust(width)}// {what}")
        return "\n".join(lines) if lines else "void KERNEL()"

    def _input_names(self) -> tuple[str, ...]:
        """Argument names that are not outputs, scratch, scalars or dims: the inputs."""
        taken = {o.name for o in (*self.outputs, *self.scratch)} | {s.name for s in self.scalars} | set(self.dims)
        return tuple(a for a in self.args if a not in taken)
