"""The host inputs a GPU worker keeps from one point for the next that would draw the same (issue 43).

A tune campaign sends every trial to one long-lived worker as a point of the same problem and the same
seed, and each point drew its inputs and computed their reference again: for a 2^28-float reduce, 1 GiB of
random floats and its float64 sum in every trial (1.08 s a trial on an H200, a small transpose's 0.21 s).
A point's inputs depend on its family, its problem (sizes, dtype, options) and its seed and on nothing
else: :class:`~cudalab.worker.executor.FamilyRun` seeds a fresh generator from the plan's seed for every
point and draws the inputs from it first. A point whose three are the last point's takes that point's
inputs and reference instead, and the generator's state after that draw, so whatever a family's setup
draws next (reduce's exactly summable inputs) is what it would have drawn. Points with no seed share
nothing; a plain sweep fixes a fresh seed per point (``precheck``), so its points share nothing unless
``--seed`` made their draws the same.

Only the host side is shared: each point uploads its own device copies (its own
:class:`~cudalab.worker.context.Context`) and poisons its outputs as before. The arrays are read-only, so
a family that wrote into its host inputs fails loudly instead of handing a later point altered data. One
set is kept, the last one: a point that cannot take it lets it go before it draws or checks its memory.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["Drawn", "draw", "draw_key", "read_only"]


@dataclass(frozen=True)
class Drawn:
    """One point's host inputs and reference, read-only, with what they were drawn from.

    Attributes:
        key: :func:`draw_key` of the point that drew them (None: no seed, they serve no other point).
        inputs: the family's inputs (``make_inputs``).
        reference: the family's reference on them.
        state: the generator's state right after the draw (what the point's later draws continue from).
    """

    key: tuple[Any, ...] | None
    inputs: dict[str, np.ndarray]
    reference: Any
    state: dict[str, Any]

    def serves(self, plan: Any) -> bool:
        """Whether ``plan``'s point would draw exactly these inputs."""
        key = draw_key(plan)
        return key is not None and key == self.key

    @property
    def nbytes(self) -> int:
        """Host bytes held: the inputs, and the reference when it is an array of its own (copy's is its input,
        transpose's a view of it: counted twice, a point's host check would be credited memory it lacks)."""
        held = sum(int(a.nbytes) for a in self.inputs.values())
        ref = self.reference
        if isinstance(ref, np.ndarray) and not any(np.may_share_memory(ref, a) for a in self.inputs.values()):
            held += int(ref.nbytes)
        return held


def draw(plan: Any, rng: np.random.Generator) -> Drawn:
    """Draw a point's inputs from ``rng`` and compute their reference, both read-only (the reference too:
    every later point that takes them checks against it)."""
    inputs = plan.family.make_inputs(plan.problem, rng)
    read_only(*inputs.values())  # before the reference: one that wrote into its inputs fails here
    state = rng.bit_generator.state
    reference = plan.family.reference(plan.problem, inputs)
    read_only(reference)
    return Drawn(draw_key(plan), inputs, reference, state)


def draw_key(plan: Any) -> tuple[Any, ...] | None:
    """What a point's inputs and reference are a function of (None: no seed, a fresh draw every time)."""
    seed = plan.request.seed
    if seed is None:
        return None
    return (plan.spec.name, plan.spec.module, plan.problem, seed)


def read_only(*arrays: Any) -> None:
    """Make the arrays among ``arrays`` read-only (other objects are left as they are)."""
    for a in arrays:
        if isinstance(a, np.ndarray):
            a.flags.writeable = False
