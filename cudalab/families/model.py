"""The data a family and the runner exchange: options, problems, work, launches, checks, cases (pure)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from cudalab.launch import Dim3

if TYPE_CHECKING:
    from cudalab.catalog.specs import VariantSpec


@dataclass(frozen=True)
class FamilyOption:
    """An extra command-line option of one family (``--tile 32``)."""

    name: str
    type: type
    default: Any
    help: str


@dataclass(frozen=True)
class Size:
    """The size of one run, for both forms of the contract: dims in the family's own order, the dtype's name
    and the option values; with ``names`` (a :class:`cudalab.Problem`'s dims), read by them too:
    ``size.rows``, ``size["cols"]``, ``size.bins`` (an option).

    Attributes:
        names: the size names, in the problem's order (empty for a family that names none).
        dims: their values.
        dtype: the run's element type (``--dtype``).
        options: the values of the family's options.
    """

    names: tuple[str, ...] = ()
    dims: tuple[int, ...] = ()
    dtype: str = "float32"
    options: tuple[tuple[str, Any], ...] = ()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        try:
            return self[name]
        except KeyError:
            raise AttributeError(f"size has no {name!r} (sizes: {', '.join(self.names) or 'unnamed'}; options: "
                                 f"{', '.join(k for k, _ in self.options) or 'none'})") from None

    def __getitem__(self, name: str) -> Any:
        if name in self.names:
            return self.dims[self.names.index(name)]
        opts = dict(self.options)
        if name in opts:
            return opts[name]
        raise KeyError(name)

    @property
    def elements(self) -> int:
        """The product of the dims."""
        return int(np.prod(self.dims, dtype=np.int64))

    def opt(self, name: str, default: Any = None) -> Any:
        """Value of a family option."""
        return dict(self.options).get(name, default)

    @property
    def label(self) -> str:
        """Dims joined with x (``16384x16384``)."""
        return "x".join(str(d) for d in self.dims)

    @property
    def np_dtype(self) -> np.dtype:
        """The NumPy dtype."""
        return np.dtype(self.dtype)

    def to_dict(self) -> dict[str, Any]:
        """Plain dict for JSON."""
        return {"dims": list(self.dims), "dtype": self.dtype, "options": dict(self.options)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Problem":
        """Read :meth:`to_dict`'s output (the options keep their order; ``names`` where the dict has them)."""
        return cls(names=tuple(str(x) for x in d.get("names", ())), dims=tuple(int(x) for x in d["dims"]),
                   dtype=str(d["dtype"]), options=tuple((str(k), v) for k, v in dict(d.get("options") or {}).items()))


@dataclass(frozen=True)
class Work:
    """What one launch must move and compute: bytes (each necessary byte once) and FLOPs.

    Attributes:
        bytes: the necessary bytes, each counted once (read + written): what GB/s counts.
        flops: the necessary FLOPs: what GFLOP/s counts.
        written: how many of ``bytes`` are written (None: half, a copy's mix, which is what every problem
            declared before this field). A row's roofline charges its reads and writes at the rates
            measured for each (:mod:`cudalab.roofline`): a reduction that reads N and writes one
            value says ``written=itemsize`` and is rated against the read stream, not a copy.
    """

    bytes: int = 0
    flops: int = 0
    written: int | None = None

    @property
    def write_bytes(self) -> int:
        """The bytes written (half of :attr:`bytes` unless declared)."""
        return self.bytes // 2 if self.written is None else min(int(self.written), self.bytes)

    @property
    def read_bytes(self) -> int:
        """The bytes read: the rest."""
        return self.bytes - self.write_bytes


@dataclass(frozen=True)
class Launch:
    """A resolved launch configuration for one variant."""

    block: Dim3
    grid: Dim3
    tile: Dim3
    shared: int = 0
    defines: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Check:
    """The outcome of comparing a result with the reference."""

    ok: bool
    max_error: float
    tolerance: float
    detail: str = ""
    #: What ``max_error`` measures, as the row's reason names it.
    what: str = "max error"


def _no_poison(byte: int = 0xFF) -> None:
    """Default ``Case.poison``: nothing to poison (host and library rows)."""


def _no_reset() -> None:
    """Default ``Case.reset``: nothing to restore between launches."""


@dataclass
class Case:
    """How the runner drives one variant.

    The runner calls ``reset`` (untimed) before every launch, ``poison(byte)`` before each verified
    launch (twice, with two byte patterns: an element the kernel never writes differs between the
    two results), ``run`` between two CUDA events (or a host clock when ``timer == "host"``),
    ``result`` after synchronising, and ``close`` at the end. ``to_result`` (optional) runs
    ``run`` plus whatever turns the output into the final answer (e.g. the host sum of partial
    sums) and is timed with a host clock after a synchronise: the 'time to result'.

    Attributes:
        poison: fills the output with one byte pattern (``DeviceArray.poison`` fits), padding too.
        padded: pitched outputs whose row padding must still hold the poison after the launch
            (objects with ``download_raw()``, ``row_bytes``, ``pitch_bytes``): a stray write into
            the padding is a wrong write the element check cannot see.
        repeatable: whether ``run`` may be launched back to back without ``reset`` in between and
            still do the same work (what batching short kernels needs). None: repeatable when
            ``reset`` is the default no-op.
        one_poison: the poison is a value no correct answer can hold (an absent key, a negative
            index), so the family's own check sees every unwritten element and one poisoned launch
            is enough; results that are not plain arrays (sort's keys and order) need this.
        extra_checks: further verifications, each called with a poison byte after the verified
            launches and returning a :class:`Check` (reduce: a launch on exactly summable inputs).
    """

    run: Callable[[], None]
    result: Callable[[], np.ndarray]
    reset: Callable[[], None] = _no_reset
    poison: Callable[..., None] = _no_poison
    close: Callable[[], None] = lambda: None
    to_result: Callable[[], Any] | None = None
    timer: str = "events"
    notes: dict[str, Any] = field(default_factory=dict)
    padded: tuple[Any, ...] = ()
    repeatable: bool | None = None
    extra_checks: tuple[Callable[[int], "Check"], ...] = ()
    one_poison: bool = False

    @property
    def can_repeat(self) -> bool:
        """``repeatable``, or when undeclared, whether ``reset`` is the default no-op."""
        return self.reset is _no_reset if self.repeatable is None else bool(self.repeatable)
    items: int = 0
    """Keys, queries or elements one ``run`` handles; when set, the runner adds their rate
    (items / median time, in 1e9 a second) as ``extra["rate"]``: the rate column of a family whose
    metric is ``rate``."""


class SetupContext:
    """What a family's :meth:`~cudalab.families.base.Family.setup` gets for one row.

    Attributes:
        variant: the family.toml row (``variant.kind``, ``variant.kernel``, ``variant.param("key")``).
        launch: its planned :class:`Launch` (``grid``, ``block``, ``tile``, ``shared``); ones for a
            host, driver or library row.
        problem: the run's size.
        inputs: the run's inputs (drawn once a run, shared by every row and the roofline).
        run: the run's shared state (:class:`cudalab.worker.context.Context`); reach it through :attr:`device`,
            :attr:`rng`, :meth:`upload` and :meth:`shared`.
    """

    def __init__(self, variant: VariantSpec, launch: Launch, problem: Problem, inputs: dict[str, np.ndarray],
                 run: Any, kernels: Callable[[str], Any] | None = None):
        self.variant = variant
        self.launch = launch
        self.problem = problem
        self.inputs = inputs
        self.run = run
        self._kernels = kernels

    @property
    def device(self) -> Any:
        """The GPU: ``empty(shape, dtype, pitched=False)``, ``to_device(array)``, ``synchronize()``..."""
        return self.run.device

    @property
    def rng(self) -> np.random.Generator:
        """The run's random generator (seeded by ``--seed``)."""
        return self.run.rng

    def upload(self, host: np.ndarray, pitched: bool = False) -> Any:
        """The device copy of ``host``, uploaded once a run and shared by every row and the roofline."""
        return self.run.upload(host, pitched=pitched)

    def shared(self, key: str, make: Callable[[], Any]) -> Any:
        """The object stored under ``key`` for the run, made once by ``make()`` (freed at the end)."""
        return self.run.shared(key, make)

    def kernel(self, name: str | None = None) -> Any:
        """A kernel compiled from the variant's source with its defines (default: the variant's own
        symbol); ``.launch(grid, block, args, shared)``, ``.num_regs``.

        Raises:
            CudalabError: a host, driver or library row, which has no kernels.
        """
        if self._kernels is None:
            from cudalab.errors import CudalabError  # noqa: PLC0415

            raise CudalabError(f"{self.variant.name} is a {self.variant.kind} row and has no kernels")
        return self._kernels(name or self.variant.kernel)

    def one_dimensional(self) -> None:
        """Refuse a 2-D or 3-D block or grid for a kernel that indexes along x only.

        Raises:
            SkipRow: the launch has a y or z extent (the row is skipped, naming what to give).
        """
        launch = self.launch
        if launch.block[1:] != (1, 1) or launch.grid[1:] != (1, 1):
            from cudalab.errors import SkipRow  # noqa: PLC0415
            from cudalab.launch import fmt_dims  # noqa: PLC0415

            raise SkipRow(f"{self.variant.name} is one-dimensional: give --block N and --grid N "
                          f"(got block {fmt_dims(launch.block)}, grid {fmt_dims(launch.grid)})")


def compare(result: np.ndarray, reference: np.ndarray, tolerance: float, relative: bool = True) -> Check:
    """Compare element-wise; NaN (the poison) anywhere fails.

    Args:
        result: what the variant produced.
        reference: the NumPy answer.
        tolerance: largest allowed error.
        relative: scale the error by max(1, |reference|) element-wise.
    """
    result = np.asarray(result)
    reference = np.asarray(reference)
    if result.shape != reference.shape:
        return Check(False, float("inf"), tolerance, f" (shape {result.shape}, expected {reference.shape})")
    r = result.astype(np.float64, copy=False)
    ref = reference.astype(np.float64, copy=False)
    nan_mask = np.isnan(r)
    nan = int(np.count_nonzero(nan_mask))
    if nan:
        return Check(False, float("nan"), tolerance, f" ({nan} elements unwritten or NaN, first at {where(nan_mask)})")
    if r.size == 0:
        return Check(True, 0.0, tolerance)
    err = np.abs(r - ref)
    if relative:
        err = err / np.maximum(1.0, np.abs(ref))
    worst = float(err.max())
    if worst <= tolerance:
        return Check(True, worst, tolerance)
    bad = err > tolerance
    first = np.unravel_index(int(np.argmax(bad)), bad.shape)  # C order: the first wrong element
    return Check(False, worst, tolerance, f" ({int(np.count_nonzero(bad))} wrong, first at {where(bad)}: "
                                          f"got {r[first]:.17g}, expected {ref[first]:.17g})")


def where(mask: np.ndarray) -> str:
    """Name the first True element of ``mask`` in C order: ``element 7``, ``row 3, column 17`` or ``[b, y, x]``."""
    return where_index(int(np.argmax(mask)), mask.shape)


def where_index(flat: int, shape: tuple[int, ...]) -> str:
    """Name the element at C-order index ``flat`` of an array of ``shape`` as :func:`where` does."""
    idx = tuple(int(i) for i in np.unravel_index(flat, shape))
    if len(idx) == 1:
        return f"element {idx[0]}"
    if len(idx) == 2:
        return f"row {idx[0]}, column {idx[1]}"
    return "[" + ", ".join(map(str, idx)) + "]"


def cupy_version() -> str:
    """The CuPy a library row runs (its row's notes say it), or '' when CuPy is not installed."""
    try:
        import cupy  # noqa: PLC0415  (optional: the ref extra)
    except ImportError:
        return ""
    return str(cupy.__version__)


def old_name(module: str, name: str) -> Any:
    """What a module of the families package gives for ``name`` beyond its own names: ``Problem``, the size
    type's name before it served both contract forms, kept one release with a warning."""
    if name == "Problem":
        import warnings  # noqa: PLC0415  (only for the old name)

        warnings.warn("cudalab.families.Problem is now cudalab.families.Size (one size type for both forms of the "
                      "contract; cudalab.Problem is the simple form's problem)", DeprecationWarning, stacklevel=3)
        return Size
    raise AttributeError(f"module {module!r} has no attribute {name!r}")


def __getattr__(name: str) -> Any:
    """``Problem``: see :func:`old_name`."""
    return old_name(__name__, name)
