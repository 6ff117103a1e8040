"""Family trees with broken kernels added (tests/data/mutants): what the mutation tests run.

Each tree is a copy of ``cuda_src/<family>`` whose family.toml gains one ``[[variant]]`` per
mutation, all compiled from one mutant source with ``-D MUTATION=<k>`` (0 is the correct control).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path


MUTANTS = Path(__file__).resolve().parent / "data" / "mutants"
SRC = Path(__file__).resolve().parent.parent / "cuda_src"

#: Mutation numbers shared by every mutant source.
MUTATIONS = {"control": 0, "drop-last": 1, "drop-warp": 2, "drop-block": 3, "wrong-element": 4}


@dataclass(frozen=True)
class Mutants:
    """How one family's mutants are declared."""

    family: str
    source: str
    kernel: str
    fields: str = ""                  # extra TOML lines for each variant (block, defines, ...)
    defines: str = ""                 # extra inline-table entries next to MUTATION
    extra: tuple[tuple[str, int], ...] = ()  # family-specific mutations (name, number)

    def mutations(self) -> dict[str, int]:
        return {**MUTATIONS, **dict(self.extra)}


FAMILIES: dict[str, Mutants] = {
    "copy": Mutants("copy", "copy_mutants.cu", "copy_mutant", 'block = "32x32"', extra=(("padding-write", 5),)),
    "transpose": Mutants("transpose", "transpose_mutants.cu", "transpose_mutant", 'block = "32x32"',
                         extra=(("padding-write", 5),)),
    "reduce": Mutants("reduce", "reduce_mutants.cu", "reduce_mutant", 'block = "512"\nblock_pow2 = true',
                      extra=()),
    "matmul": Mutants("matmul", "matmul_mutants.cu", "matmul_mutant", 'block = "32x8"'),
    "gemv": Mutants("gemv", "gemv_mutants.cu", "gemv_mutant", 'block = "256"'),
    "smem-square": Mutants("smem-square", "smem_square_mutants.cu", "setRowReadRow",
                           'block = "32x32"\nfixed_block = true', 'BDIMX = "block_x", BDIMY = "block_y"'),
}
# reduce's "writes one partial wrong" is its mutation 4 (wrong-element): a partial off by one.


def build(root: Path, family: str) -> list[str]:
    """Write ``root/<family>`` (the family's tree plus its mutant variants); return the variant names."""
    m = FAMILIES[family]
    dest = root / family
    shutil.copytree(SRC / family, dest)
    shutil.copy(MUTANTS / m.source, dest / m.source)
    names = []
    text = (dest / "family.toml").read_text()
    for name, number in m.mutations().items():
        variant = f"mutant-{name}"
        defines = f'MUTATION = "{number}"' + (f", {m.defines}" if m.defines else "")
        text += (f'\n[[variant]]\nname = "{variant}"\nsource = "{m.source}"\nkernel = "{m.kernel}"\n'
                 f"{m.fields}\ndefines = {{ {defines} }}\ndescription = \"mutation {number}: {name}\"\n")
        names.append(variant)
    (dest / "family.toml").write_text(text)
    return names


def use_tree(monkeypatch, root: Path) -> None:
    """Point cudalab at ``root`` for the rest of the test."""
    monkeypatch.setenv("CUDALAB_SRC", str(root))
