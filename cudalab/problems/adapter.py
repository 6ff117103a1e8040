"""A :class:`~cudalab.problems.contract.Problem` as a :class:`~cudalab.families.base.Family`: the runner,
ncu, sanitize and report see a problem as they see a built-in family.

Every hook the declarative form cannot say stays reachable: subclass :class:`ProblemFamily`, override
any :class:`~cudalab.families.base.Family` hook as a plain method, and set ``FAMILY = YourFamily(PROBLEM)``.
Errors in the user's code are :class:`~cudalab.errors.CatalogError` naming the module's file.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Mapping

import numpy as np

from cudalab import hostcheck, hostwork
from cudalab import launch as L
from cudalab.catalog.specs import VariantSpec
from cudalab.errors import CatalogError, CudalabError, SkipRow, UsageError
from cudalab.families.base import Family
from cudalab.families.model import Case, Check, Launch, SetupContext, Work, compare
from cudalab.catalog.userimport import line_in
from cudalab.problems.contract import Problem, Size, Tolerance, ctype

#: Sizes past this are beyond the ``int`` a kernel takes them as.
INT_MAX = 2**31 - 1


class DeviceView:
    """A device array seen through ``__cuda_array_interface__`` (CuPy, torch, numba take it, no copy)."""

    def __init__(self, arr: Any):
        self.array = arr
        self.shape = tuple(arr.shape)
        self.dtype = np.dtype(arr.dtype)

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (int(self.array.ptr), False),
                "version": 3, "strides": None}


class LaunchContext:
    """What an advanced ``Problem.launch`` hook gets: the compiled kernels, the arrays and the launch.

    Attributes:
        size: the run's :class:`~cudalab.problems.contract.Size`.
        variant: the family.toml variant (``variant.param("key")``).
        grid, block, shared: the planned launch of the variant's own kernel.
        arrays: device arrays by argument name (inputs, output, scratch).
    """

    def __init__(self, size: Size, variant: VariantSpec, launch: Launch, arrays: dict[str, Any],
                 kernels: Callable[[str], Any], device: Any, values: Mapping[str, Any]):
        self.size = size
        self.variant = variant
        self.grid, self.block, self.shared = launch.grid, launch.block, launch.shared
        self.arrays = arrays
        self._kernels = kernels
        self._device = device
        self._values = values
        self._order: tuple[str, ...] = ()
        self.where = "<problem>"
        self.made: list[Any] = []

    def kernel(self, name: str | None = None) -> Any:
        """A compiled kernel of the variant's source (default: the variant's own); ``.launch(grid, block, args, shared)``."""
        return self._kernels(name or self.variant.kernel)

    def args(self, *names: str) -> tuple[Any, ...]:
        """Kernel arguments by name: arrays, scalars (their dtype) and dims (as int32)."""
        out = []
        for n in names:
            if n in self.arrays:
                out.append(self.arrays[n])
            elif n in self._values:
                out.append(self._values[n])
            else:
                raise CatalogError(f"{self.where}: kernel argument {n!r} is no input, output, scratch, scalar or size "
                                   f"(arrays: {', '.join(self.arrays)}; values: {', '.join(self._values)})")
        return tuple(out)

    def default(self) -> Callable[[], None]:
        """The plain launch: the variant's kernel with the problem's ``args`` over its grid."""
        k = self.kernel()
        args = self.args(*self._order)
        grid, block, shared = self.grid, self.block, self.shared
        return lambda: k.launch(grid, block, args, shared)

    def empty(self, shape: tuple[int, ...] | int, dtype: str) -> Any:
        """A device array freed when the variant ends (``.poison(0)`` zeroes it)."""
        arr = self._device.empty((shape,) if isinstance(shape, int) else tuple(shape), np.dtype(dtype))
        self.made.append(arr)
        return arr


def _shape(value: Any, what: str, where: str) -> tuple[int, ...]:
    shape = (value,) if isinstance(value, (int, np.integer)) else tuple(value)
    if not all(isinstance(d, (int, np.integer)) and d >= 0 for d in shape):
        raise CatalogError(f"{where}: {what} gave shape {value!r}: a tuple of ints >= 0")
    return tuple(int(d) for d in shape)


class ProblemFamily(Family):
    """The Family of a declarative Problem.

    Args:
        problem: the problem.
        where: the file that defines it (named in every error of the user's code).
    """

    def __init__(self, problem: Problem, where: str = "<problem>"):
        if not isinstance(problem, Problem):
            raise CatalogError(f"{where}: PROBLEM must be a cudalab.Problem, not {type(problem).__name__}")
        self.spec = problem
        self.where = where
        self.OPTIONS = tuple(problem.options)
        self.SIGNATURE = problem.signature() + "\n// grid: tiles of block x per_thread over the problem's extent"
        self.SIZE_HELP = problem.size_help or (
            f"--n N (every size) or --shape {'x'.join(d.upper() for d in problem.dims)}" if len(problem.dims) > 1
            else f"--n {problem.dims[0].upper()} (16k, 1M, 2^24)")
        small = {"n": "1000"} if len(problem.dims) == 1 else {"shape": "x".join(["37"] * len(problem.dims))}
        self.SANITIZE_SIZES = ({"n": "4096"} if len(problem.dims) == 1 else {"n": "64"}, small)

    # --- the user's code, called with the file named on failure -----------------------------------

    def _call(self, what: str, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return fn(*args)
        except CudalabError:
            raise
        except Exception as exc:
            raise CatalogError(f"{self.where}{_line(exc, self.where)}: {what} raised {type(exc).__name__}: {exc}") from None

    def size(self, problem: Size) -> Size:
        """The user's view of a run's size: read by the problem's own names (a size planned here has them)."""
        return problem if problem.names == tuple(self.spec.dims) else replace(problem, names=tuple(self.spec.dims))

    # --- the Family hooks -------------------------------------------------------------------------

    def problem(self, n: str | None, shape: str | None, dtype: str, options: dict[str, Any]) -> Size:
        """``--n`` sets every dim, ``--shape AxB`` each; the default otherwise."""
        k = len(self.spec.dims)
        if n and shape:
            raise UsageError("give --n or --shape, not both")
        if shape:
            dims = L.parse_shape(shape, k)
        elif n:
            dims = (L.parse_size(n, "--n"),) * k
        else:
            d = self.spec.default
            dims = (int(d),) * k if isinstance(d, int) else tuple(int(x) for x in d)
            if len(dims) != k:
                raise CatalogError(f"{self.where}: default {d!r} has {len(dims)} sizes, dims {self.spec.dims} {k}")
        if max(dims) > INT_MAX:
            raise UsageError(f"size {'x'.join(map(str, dims))}: each size must fit the kernels' int (below 2^31)")
        opts = {o.name: o.default for o in self.OPTIONS}
        opts.update({key: v for key, v in options.items() if v is not None})
        prob = Size(names=tuple(self.spec.dims), dims=tuple(dims), dtype=dtype, options=tuple(sorted(opts.items())))
        if self.spec.validate is not None:
            try:
                self.spec.validate(self.size(prob))
            except ValueError as exc:
                raise UsageError(str(exc)) from None
            except Exception as exc:
                raise CatalogError(f"{self.where}{_line(exc, self.where)}: validate raised {type(exc).__name__}: "
                                   f"{exc}") from None
        return prob

    def extent(self, problem: Size, variant: VariantSpec) -> L.Dim3:
        """The problem's ``extent`` (default: every element along x), padded to three dims."""
        s = self.size(problem)
        if self.spec.extent is None:
            return (s.elements, 1, 1)
        ext = _shape(self._call("extent", self.spec.extent, s, variant), "extent", self.where)
        if not 1 <= len(ext) <= 3:
            raise CatalogError(f"{self.where}: extent gave {ext}: 1 to 3 ints")
        return tuple(list(ext) + [1] * (3 - len(ext)))  # type: ignore[return-value]

    def work(self, problem: Size) -> Work:
        """The problem's ``work``; a negative or non-integer figure is an error naming the file."""
        w = self._call("work", self.spec.work, self.size(problem))
        if isinstance(w, tuple):
            w = Work(*w)
        if not isinstance(w, Work):
            raise CatalogError(f"{self.where}: work gave {type(w).__name__}: a Work(bytes=, flops=) or (bytes, flops)")
        for key in ("bytes", "flops", "written"):
            v = getattr(w, key)
            if key == "written" and v is None:  # not declared: half (a copy's mix)
                continue
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 0:
                raise CatalogError(f"{self.where}: work gave {key}={v!r}: an int >= 0")
        if w.written is not None and w.written > w.bytes:
            raise CatalogError(f"{self.where}: work gave written={w.written} above bytes={w.bytes}: the written "
                               "bytes are part of the necessary bytes")
        return Work(bytes=int(w.bytes), flops=int(w.flops), written=None if w.written is None else int(w.written))

    def _out_shape(self, s: Size) -> tuple[tuple[int, ...], np.dtype]:
        out = self.spec.outputs[0]
        shape = _shape(self._call(f"output {out.name!r} shape", out.shape, s), f"output {out.name!r}", self.where)
        return shape, np.dtype(out.dtype or s.dtype)

    def device_bytes(self, problem: Size) -> int:
        """Inputs and outputs (the work's bytes) twice over, with slack."""
        return 2 * self.work(problem).bytes + (16 << 20)

    def defines(self, problem: Size, variant: VariantSpec) -> dict[str, str]:
        """``ELEM_T``: the C type of ``--dtype``."""
        return {"ELEM_T": ctype(problem.dtype)} if len(self.spec.dtypes) > 1 else {}

    def make_inputs(self, problem: Size, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """The problem's ``inputs``."""
        got = self._call("inputs", self.spec.inputs, self.size(problem), rng)
        if not isinstance(got, dict) or not all(isinstance(v, np.ndarray) for v in got.values()):
            raise CatalogError(f"{self.where}: inputs must return a dict of NumPy arrays, got {type(got).__name__}")
        return got

    def reference(self, problem: Size, inputs: dict[str, np.ndarray]) -> np.ndarray:
        """The problem's ``reference``, checked against the output's shape and dtype."""
        s = self.size(problem)
        ref = np.asarray(self._call("reference", self.spec.reference, s, inputs))
        shape, dtype = self._out_shape(s)
        name = self.spec.outputs[0].name
        if ref.shape != shape:
            raise CatalogError(f"{self.where}: reference gave shape {ref.shape}, output {name!r} has {shape}")
        wider = dtype.kind == "f" and ref.dtype == np.float64
        if ref.dtype != dtype and not wider:
            raise CatalogError(f"{self.where}: reference gave dtype {ref.dtype}, output {name!r} is {dtype}"
                               + (" (or float64)" if dtype.kind == "f" else ""))
        return ref

    def check(self, problem: Size, result: Any, reference: np.ndarray) -> Check:
        """Exact (bit for bit, as it downloads), a tolerance, or the problem's own check."""
        rule = self.spec.check
        if rule == "exact":
            return _exact(result, reference)
        result = np.asarray(result)
        if isinstance(rule, (int, float)) and not isinstance(rule, bool):
            return compare(result, reference, float(rule))
        if isinstance(rule, Tolerance):
            return _tolerance(result, reference, rule)
        if callable(rule):
            got = self._call("check", rule, self.size(problem), result, reference)
            if isinstance(got, Check):
                return got
            ok, detail = got if isinstance(got, tuple) else (got, "")
            return Check(bool(ok), 0.0 if ok else float("inf"), 0.0, f" ({detail})" if detail else "")
        raise CatalogError(f"{self.where}: check {rule!r} must be 'exact', a Tolerance, a float or a function")

    def setup(self, ctx: SetupContext) -> Case:
        """Upload the inputs (once a run), allocate the output and scratch, and build the launch; a
        ``kind = "host"`` row times the NumPy reference on the CPU (a baseline)."""
        variant, launch, problem, inputs = ctx.variant, ctx.launch, ctx.problem, ctx.inputs
        s = self.size(problem)
        out = self.spec.outputs[0]
        dev = ctx.device
        shape, dtype = self._out_shape(s)
        if variant.kind == "host":
            box: dict[str, np.ndarray] = {}

            def host() -> None:
                box["out"] = np.asarray(self.spec.reference(s, inputs)).astype(dtype, copy=False)
            return Case(run=host, result=lambda: box["out"], timer="host", notes={"reference": "NumPy on the CPU"})
        arrays: dict[str, Any] = {k: ctx.upload(np.ascontiguousarray(v)) for k, v in inputs.items()}
        made: list[Any] = []
        zero: list[Any] = []
        try:
            d_out = dev.empty(shape, dtype)
            made.append(d_out)
            arrays[out.name] = d_out
            for o in self.spec.outputs[1:]:
                extra = _shape(self._call(f"output {o.name!r} shape", o.shape, s), o.name, self.where)
                arrays[o.name] = dev.empty(extra, np.dtype(o.dtype or s.dtype))
                made.append(arrays[o.name])
            for sc in self.spec.scratch:
                sh = _shape(self._call(f"scratch {sc.name!r} shape", sc.shape, s, launch), sc.name, self.where)
                arrays[sc.name] = dev.empty(sh, np.dtype(sc.dtype or s.dtype))
                made.append(arrays[sc.name])
                if sc.zero:
                    zero.append(arrays[sc.name])
            if out.accumulate:
                zero.append(d_out)
            values: dict[str, Any] = {d: np.int32(v) for d, v in zip(self.spec.dims, problem.dims)}
            for sc in self.spec.scalars:
                v = self._call(f"scalar {sc.name!r}", sc.value, s) if callable(sc.value) else sc.value
                values[sc.name] = np.dtype(sc.dtype).type(v)
            lc = LaunchContext(s, variant, launch, arrays, ctx.kernel, dev, values)
            lc._order, lc.where = tuple(self.spec.args), self.where
            made_by_hook = lc.made
            run, notes = self._runner(variant, lc, s)
        except Exception:
            for a in made:
                a.free()
            raise
        made.extend(made_by_hook)

        def reset() -> None:
            for a in zero:
                a.poison(0)

        def close() -> None:
            for a in made:
                a.free()

        result = d_out.chunks if self.spec.check == "exact" else d_out.download
        if variant.kind == "library":
            result = notes.pop("_result")
        return Case(run=run, result=result, reset=reset, repeatable=not zero,
                    poison=(lambda byte=0xFF: None) if out.accumulate else d_out.poison,
                    one_poison=out.accumulate, close=close, notes=notes)

    def _runner(self, variant: VariantSpec, lc: LaunchContext, s: Size) -> tuple[Callable[[], None], dict]:
        """The function one timed launch calls, and the row's notes."""
        if variant.kind == "library":
            return self._library(variant, lc, s)
        if variant.kind != "kernel":
            raise SkipRow(f"{variant.name}: a problem's rows are kernels or libraries, not {variant.kind}")
        if self.spec.launch is not None and not variant.param("user"):
            run = self._call("launch", self.spec.launch, lc)
            if not callable(run):
                raise CatalogError(f"{self.where}: launch must return a function that enqueues one run")
            return run, {}
        return lc.default(), {"registers": lc.kernel().num_regs}

    def _library(self, variant: VariantSpec, lc: LaunchContext, s: Size) -> tuple[Callable[[], None], dict]:
        lib = next((x for x in self.spec.libraries if x.name == variant.name), None)
        if lib is None:
            raise CatalogError(f"{self.where}: no Library named {variant.name!r} for the library row")
        views = {k: DeviceView(v) for k, v in lc.arrays.items()}
        out = lc.arrays[self.spec.outputs[0].name]
        box: dict[str, Any] = {}

        def run() -> None:
            box["ret"] = lib.fn(s, views)

        def result() -> np.ndarray:
            ret = box.get("ret")
            return out.download() if ret is None else _to_numpy(ret).astype(out.dtype, copy=False)

        def attempt() -> None:
            try:
                run()
            except ImportError as exc:
                raise SkipRow(f"{variant.name} needs {exc.name or exc}") from None
        attempt()  # an absent library is a skipped row, said before the timing starts
        return run, {"_result": result, "reference": lib.description or variant.description}


def _to_numpy(value: Any) -> np.ndarray:
    """A library's answer on the host: CuPy (``.get()``), torch (``.cpu()``) or anything array-like."""
    if hasattr(value, "get") and hasattr(value, "__cuda_array_interface__"):
        return value.get()
    if hasattr(value, "cpu"):
        return value.cpu().numpy()
    return np.asarray(value)


def _exact(result: Any, reference: np.ndarray) -> Check:
    """Bit for bit, chunk by chunk as the result downloads; names the first wrong element."""
    try:
        d = hostwork.exact_diff(result, np.asarray(reference))
    except ValueError as exc:
        return Check(False, float("inf"), 0.0, f" ({exc})")
    if d.first is None:
        return Check(True, 0.0, 0.0)
    where = ", ".join(map(str, d.first))
    return Check(False, float("nan") if d.unwritten and not d.max_error else d.max_error, 0.0,
                 f" ({d.wrong} wrong, {d.unwritten} unwritten; first at [{where}]: got {d.got}, expected {d.want})")


def _tolerance(result: np.ndarray, reference: np.ndarray, tol: Tolerance) -> Check:
    """``|r - ref| <= atol + rtol |ref|``; the max error is reported in units of that bound."""
    if result.shape != reference.shape:
        return Check(False, float("inf"), 1.0, f" (shape {result.shape}, expected {reference.shape})", _RATIO)
    if result.size == 0:
        return Check(True, 0.0, 1.0, "", _RATIO)
    b = hostcheck.bound_ratio(result, reference, tol.atol, tol.rtol)  # in blocks: no full-size temporaries
    if b.bad == 0:
        return Check(True, b.worst, 1.0, "", _RATIO)
    first = np.unravel_index(b.first, result.shape)
    got, want = float(result[first]), float(reference[first])
    return Check(False, b.worst, 1.0, f" ({b.bad} beyond atol {tol.atol:g} + rtol {tol.rtol:g}, "
                                      f"first at {list(map(int, first))}: got {got:.9g}, expected {want:.9g})", _RATIO)


#: A tolerance check's figure: the worst error in units of its allowed error (1 is the limit).
_RATIO = "max |got - expected| / (atol + rtol |expected|)"


def _line(exc: BaseException, where: str) -> str:
    """``:LINE`` of the deepest traceback frame in ``where`` (the user's file), or ''."""
    line = line_in(exc, where)
    return f":{line}" if line else ""
