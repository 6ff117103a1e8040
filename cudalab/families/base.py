"""The family contract: every hook a family provides, required or optional, with its default.

A family is a folder ``cuda_src/<family>/`` (its ``family.toml`` and kernels) plus one module
``cudalab/families/<module>.py`` that defines a subclass of :class:`Family` and an instance of it
named ``FAMILY``. runner, cli, ncu and sanitize talk to a family only through this class; nothing
looks hooks up by name. Hooks are plain methods of the subclass; what several families share is a
module of functions (:mod:`cudalab.families.matrix`, :mod:`~cudalab.families.product`,
:mod:`~cudalab.families.smem_tile`), never a base class.

Required hooks raise :class:`NotImplementedError` here; optional ones have the default written
next to them.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from cudalab import launch as L
from cudalab.catalog.specs import VariantSpec
from cudalab.families.model import Case, Check, FamilyOption, Size, SetupContext, Work
from cudalab.records.results import Result, Roofline


class Family:
    """Base of every family; subclass it once per family module and set ``FAMILY = YourFamily()``.

    Class attributes (optional):
        OPTIONS: extra command-line options (``--tile``, ``--ipad``); their values are in
            ``Size.options`` and, when integers, usable as names in family.toml expressions.
        SIZE_HELP: one line for ``--n`` / ``--shape`` help.
        EXTRA_COLUMNS: (key, header) pairs read from ``Result.extra`` for the table.
        SANITIZE_SIZES: the problems ``cudalab sanitize`` runs each variant at, as request fields
            (``{"n": "64"}``, ``{"shape": "33x17x65"}``): one a multiple of every variant's tile and
            one not, both small (the tools slow kernels 10-100 times).
        SHOW: the family can print small inputs and results (``--show``, :meth:`show`).
        SIGNATURE: the C prototype a ``--add`` kernel must have, ``KERNEL`` for its name, one
            ``// comment`` per parameter saying what it holds; then comment lines on the launch
            (what the grid covers). Parameter sizes are read from it (:func:`cudalab.catalog.user.prototype_sizes`:
            pointers 8 bytes, ``ELEM_T`` the element) and checked against the compiled kernel.
            Printed by ``cudalab list FAMILY``. Empty: the family takes no ``--add`` kernels.
        SIZE_TYPE: the :class:`Size` subclass :meth:`problem` returns, when the family has one (hgemm's
            bfloat16); a GPU worker reads a planned point's size back as this type.
    """

    OPTIONS: tuple[FamilyOption, ...] = ()
    SIZE_HELP: str = "problem size (16k, 1M, 2^24)"
    EXTRA_COLUMNS: tuple[tuple[str, str], ...] = ()
    SANITIZE_SIZES: tuple[dict[str, str], ...] = ({"n": "64"}, {"n": "33"})
    SHOW: bool = False
    SIGNATURE: str = ""
    #: The type of the sizes :meth:`problem` returns (a subclass of :class:`Size` where the family needs one:
    #: hgemm's bfloat16): a planned point is read back as this type in the GPU worker.
    SIZE_TYPE: type[Size] = Size

    # --- required -----------------------------------------------------------------------------

    def problem(self, n: str | None, shape: str | None, dtype: str, options: dict[str, Any]) -> Size:
        """Parse the user's size (raw ``--n`` / ``--shape`` strings or None) into a Size.

        Raises:
            UsageError: a bad size or option.
        """
        raise NotImplementedError

    def extent(self, problem: Size, variant: VariantSpec) -> L.Dim3:
        """Elements the variant's grid covers along x, y, z (for the ``tiles`` rule and ``divisible``).

        Raises:
            SkipRow: a size this variant cannot take (:class:`~cudalab.errors.SizeError`, a SkipRow).
        """
        raise NotImplementedError

    def work(self, problem: Size) -> Work:
        """Necessary bytes (each counted once) and FLOPs of one launch, for GB/s and GFLOP/s."""
        raise NotImplementedError

    def device_bytes(self, problem: Size) -> int:
        """Device memory one variant needs at most (checked against free memory before the run)."""
        raise NotImplementedError

    def make_inputs(self, problem: Size, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """Fresh random inputs (never zeros)."""
        raise NotImplementedError

    def reference(self, problem: Size, inputs: dict[str, np.ndarray]) -> np.ndarray:
        """The NumPy answer."""
        raise NotImplementedError

    def check(self, problem: Size, result: np.ndarray, reference: np.ndarray) -> Check:
        """Compare a variant's result with the reference (:func:`cudalab.families.model.compare`)."""
        raise NotImplementedError

    def setup(self, ctx: SetupContext) -> Case:
        """Build one row's :class:`Case`: allocate its output, upload the inputs (``ctx.upload(array)``:
        once a run, shared by every row and the roofline), compile its kernels (``ctx.kernel(name)``)
        and say how to launch and read it. ``ctx`` carries the row: ``ctx.variant``, ``ctx.launch``,
        ``ctx.problem``, ``ctx.inputs``, and the run's ``ctx.device``, ``ctx.rng``, ``ctx.shared``.

        Raises:
            SkipRow: this row cannot run here (a launch it does not take, a library that is not
                installed): it is shown as skipped with the message. Any other error is a failed row.
        """
        raise NotImplementedError

    # --- optional -----------------------------------------------------------------------------

    def default_block(self, variant: VariantSpec, problem: Size) -> L.Dim3:
        """The block a variant runs with when the user gives none. Default: family.toml's ``block``."""
        return variant.block

    def defines(self, problem: Size, variant: VariantSpec) -> dict[str, str]:
        """Macros that depend on the problem (the element type of ``--dtype``). Default: none."""
        return {}

    def roofline_bytes(self, problem: Size) -> int:
        """Size of the copy that sets the roofline. Default: half of ``work().bytes`` (bytes are
        counted read + written, so the input is half)."""
        return self.work(problem).bytes // 2

    def own_roofline(self, problem: Size, results: Sequence[Result]) -> Roofline | None:
        """The roofline when this run's own rows already measured it (the copy family's memcpy_dtod
        and best copy kernel on the same bytes), so it is not measured twice. Default: None."""
        return None

    def host_bytes(self, problem: Size) -> int:
        """Host memory one run holds at its peak: the inputs, one downloaded result, the reference
        and whatever the check makes. Default: three times the work's bytes (inputs counted in
        them, a download, a reference)."""
        return 3 * self.work(problem).bytes

    def host_seconds(self, problem: Size) -> float:
        """A rough estimate of one NumPy (host row) sample, to skip host rows that would hold up the
        table (over :data:`cudalab.worker.executor.HOST_SKIP_S` unless asked for by name). Default: the work's
        bytes at 4 GB/s."""
        return self.work(problem).bytes / 4e9

    def smem_expect(self, problem: Size, variant: VariantSpec) -> dict[str, float] | None:
        """Expected shared-memory wavefronts per request ``{"ld", "st"}`` for ncu's ✓/✗.
        Default: family.toml's ``params.smem_expect``."""
        exp = variant.param("smem_expect")
        return {k: float(v) for k, v in exp.items()} if exp else None

    def show(self, problem: Size, inputs: dict[str, np.ndarray], result: np.ndarray | None) -> str:
        """Text of a small problem's inputs (result None) or of one result; only when ``SHOW``."""
        return ""
