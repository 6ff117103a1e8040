"""Your own kernel beside the ladder: ``--add FILE.cu:KERNEL[@KEY=VALUE,...]``.

A user kernel becomes a :class:`~cudalab.catalog.VariantSpec` like any family.toml variant, except
that its ``source`` is the absolute path of the user's file and ``params`` holds ``user = True``.
It is launched with the family's argument convention (``Family.SIGNATURE``, printed by
``cudalab list FAMILY``), and before it runs its compiled parameter list (read from the PTX
``.entry``) is checked against that convention.

No user text reaches a shell: the file is compiled through a small prelude file that ``#include``s
it by absolute path (so neither the path nor its folder is ever on a command line), and ``-D``
values from ``--add`` are limited to characters that mean nothing to a shell.

Syntax (keys after ``@``, comma separated, any order)::

    FILE.cu:KERNEL
    FILE.cu:KERNEL@block=32x8,tile=32x32,grid=tiles,-DTILE=32
    FILE.cu:KERNEL@per_thread=8,name=mine,shared=4096

``block`` default block (``--block`` still overrides it); ``per_thread`` elements a thread covers per
dim (tile = block × per_thread); ``tile`` elements one block covers, when not block × per_thread;
``grid`` ``tiles`` (default), ``sm:K`` (K blocks per SM, grid-stride) or fixed dims; ``shared``
dynamic shared memory bytes; ``name`` the row's name (default ``+KERNEL``); ``-DNAME=VALUE`` a macro.

``tile``, ``grid`` and ``shared`` may be integer expressions over the launch's names (``block_x``,
``threads``, ``itemsize``...) and the kernel's integer defines, the tuned ones too, dims separated by a
lone ``x``: ``tile=block_x*TX x block_y*TY`` is kernel_tuner's ``grid_div_x = ["block_size_x", "TX"]``.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from cudalab.catalog import VariantSpec
from cudalab.build.defines import validate_define
from cudalab.errors import CompileError, UsageError
from cudalab import private
from cudalab.files import check_input, read_bytes

__all__ = ["UserKernel", "SignatureError", "parse_add", "prototype_sizes", "check_signature",
           "compile_source", "is_user", "compact_signature"]

_SYMBOL = re.compile(r"[A-Za-z_]\w*")
# the path is the shortest that leaves ":KERNEL" then "@" or the end (a path may hold ':', and so may grid=sm:K)
_ADD = re.compile(r"(?P<path>.+?):(?P<kernel>[A-Za-z_]\w*)(?:@(?P<opts>.*))?", re.S)
#: ``x`` standing alone between two expressions (``block_x*TX x block_y*TY``); ``32x8`` is plain dims.
_BY = re.compile(r"\bx\b")
_DIMS = re.compile(r"\d+(x\d+){0,2}")
_GRID = re.compile(r"tiles|sm:\d+|\d+(x\d+){0,2}")
#: Characters a ``-D`` value from ``--add`` may use: enough for numbers, types and arithmetic.
_SAFE_VALUE = re.compile(r"[A-Za-z0-9_.+\-*/()]+")
_NAME = re.compile(r"[A-Za-z0-9_.+-]+")
_KEYS = ("block", "per_thread", "tile", "grid", "shared", "name")
#: Macros every user kernel gets from its launch (a tile size for shared memory, say).
LAUNCH_DEFINES = (("BLOCK_X", "block_x"), ("BLOCK_Y", "block_y"), ("BLOCK_Z", "block_z"),
                  ("TILE_X", "tile_x"), ("TILE_Y", "tile_y"), ("TILE_Z", "tile_z"))
EXAMPLE = "--add my.cu:my_kernel  or  --add my.cu:my_kernel@block=32x8,tile=32x32,-DTILE=32"


class SignatureError(UsageError):
    """A user kernel's compiled parameters do not fit its family's convention (or it is not there)."""


@dataclass(frozen=True)
class UserKernel:
    """One ``--add``: where the kernel is and how to launch it (JSON-safe, for child runs).

    Attributes:
        path: absolute path of the ``.cu`` file.
        kernel: the ``extern "C"`` symbol.
        name: the row's name (``+KERNEL`` unless ``name=`` was given).
        block: default block dims ('' for the family's first kernel variant's block).
        per_thread: elements a thread covers per dim.
        tile: elements a block covers per dim, when not block × per_thread (() if not given).
        grid: ``tiles``, ``sm:K`` or dims.
        shared: dynamic shared memory bytes (an expression over the launch names).
        defines: ``-D`` macros from the ``--add`` text.
        text: the ``--add`` text as written.
    """

    path: str
    kernel: str
    name: str
    block: str = ""
    per_thread: str = "1"
    tile: tuple[str, ...] = ()
    grid: str = "tiles"
    shared: str = "0"
    defines: tuple[tuple[str, str], ...] = ()
    text: str = ""

    def to_dict(self) -> dict[str, Any]:
        """Plain dict for JSON."""
        d = asdict(self)
        d["tile"] = list(self.tile)
        d["defines"] = [list(x) for x in self.defines]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "UserKernel":
        """Read :meth:`to_dict`'s output."""
        d = dict(d)
        d["tile"] = tuple(str(t) for t in d.get("tile", ()))
        d["defines"] = tuple((str(k), str(v)) for k, v in d.get("defines", ()))
        return cls(**d)

    def variant(self, default_block: tuple[int, int, int]) -> VariantSpec:
        """The VariantSpec the runner launches (``default_block`` when the text gave none)."""
        from cudalab.launch import parse_dims  # noqa: PLC0415

        return VariantSpec(
            name=self.name, kind="kernel", description=f"your kernel {self.kernel} from {self.path}",
            source=self.path, kernel=self.kernel,
            block=parse_dims(self.block) if self.block else default_block,
            per_thread=parse_dims(self.per_thread, "per_thread"), grid=self.grid,
            grid_stride=self.grid.startswith("sm:"), shared=self.shared,
            defines=LAUNCH_DEFINES + self.defines, tile=self.tile, params=(("user", True),),
        )


def is_user(variant: VariantSpec) -> bool:
    """Whether a variant came from ``--add``."""
    return bool(variant.param("user"))


def parse_add(text: str, cwd: str | os.PathLike | None = None) -> UserKernel:
    """Parse one ``--add`` text and check its file, before any GPU work.

    Raises:
        UsageError: bad syntax, an unknown key, a bad value, or the file is missing.
    """
    m = _ADD.fullmatch(text.strip())
    if not m:
        raise UsageError(f"--add {text!r} must be FILE.cu:KERNEL[@KEY=VALUE,...] ({EXAMPLE})")
    raw_path = m.group("path")
    if "\n" in raw_path or '"' in raw_path or "\0" in raw_path:
        raise UsageError(f"--add {text!r}: the file name may not hold a newline or a double quote")
    path = Path(os.path.expanduser(raw_path))
    if not path.is_absolute():
        path = Path(cwd or os.getcwd()) / path
    path = Path(os.path.normpath(path))
    if not path.is_file():
        if path.exists():  # a folder or /dev/zero is named as what it is
            check_input(path, f"--add {text!r}:")
        raise UsageError(f"--add {text!r}: no such file {path}")
    data = read_bytes(path, f"--add {text!r}:")  # larger than cudalab reads (256 MiB): one line, nothing read
    if b"\0" in data:  # an object file or an image: nvcc would print pages of garbage
        raise UsageError(f"--add {text!r}: {path} is a binary file (a NUL byte at offset {data.index(0)}), "
                         "not CUDA source")
    fields: dict[str, Any] = {"kernel": m.group("kernel"), "name": "+" + m.group("kernel")}
    defines: list[tuple[str, str]] = []
    opts = m.group("opts")
    if opts is not None and not opts.strip(" ,"):
        raise UsageError(f"--add {text!r}: nothing after '@' (keys: {', '.join(_KEYS)}, -DNAME=VALUE)")
    for item in (opts or "").split(","):
        item = item.strip()
        if not item:  # a stray comma
            continue
        if item.startswith("-D"):
            name, sep, value = item[2:].partition("=")
            if not sep or not _SYMBOL.fullmatch(name) or not _SAFE_VALUE.fullmatch(value):
                raise UsageError(f"--add {text!r}: {item!r} must be -DNAME=VALUE with a value of letters, digits "
                                 "and . + - * / ( ) _")
            try:  # the rules every -D value meets ('/*' opens a comment in the prelude)
                validate_define(name, value)
            except UsageError as exc:
                raise UsageError(f"--add {text!r}: {exc}") from None
            defines.append((name, value))
            continue
        key, sep, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or key not in _KEYS or not value:
            raise UsageError(f"--add {text!r}: {item!r} is not KEY=VALUE with KEY one of {', '.join(_KEYS)} "
                             "(or -DNAME=VALUE)")
        fields[key] = _value(text, key, value)
    return UserKernel(path=str(path), defines=tuple(defines), text=text, **fields)


def split_dims(value: str) -> tuple[str, ...]:
    """Dims written ``32x8`` or as expressions separated by a lone ``x`` (``block_x*TX x block_y*TY``)."""
    if _DIMS.fullmatch(value):
        return tuple(value.split("x"))
    return tuple(part.strip() for part in _BY.split(value))


def _expressions(text: str, key: str, value: str, parts: tuple[str, ...]) -> None:
    """Refuse dims that are not 1 to 3 integer expressions (their names are checked where they are known)."""
    import ast  # noqa: PLC0415

    if not 1 <= len(parts) <= 3 or not all(parts):
        raise UsageError(f"--add {text!r}: {key}={value!r} must be 1 to 3 dims such as 32x8 or block_x*TX x block_y*TY")
    for part in parts:
        try:
            ast.parse(part, mode="eval")
        except SyntaxError as exc:
            raise UsageError(f"--add {text!r}: {key}={value!r}: {part!r} is not an expression ({exc.msg})") from None


def _value(text: str, key: str, value: str) -> Any:
    """Check one ``KEY=VALUE`` of an ``--add`` text and return it as UserKernel stores it."""
    if key in ("block", "per_thread"):
        if not _DIMS.fullmatch(value) or any(int(x) < 1 for x in value.split("x")):
            raise UsageError(f"--add {text!r}: {key}={value!r} must be positive dims such as 32 or 32x8")
        return value
    if key == "tile":
        parts = split_dims(value)
        if _DIMS.fullmatch(value) and any(int(x) < 1 for x in parts):
            raise UsageError(f"--add {text!r}: tile={value!r} must be positive dims such as 32 or 32x8")
        _expressions(text, key, value, parts)
        return parts
    if key == "grid" and not _GRID.fullmatch(value):
        if value.startswith("sm:"):
            _expressions(text, key, value, (value[3:],))
        else:
            _expressions(text, key, value, split_dims(value))
    if key == "grid" and re.fullmatch(r"sm:\s*-?\d+", value) and int(value[3:]) < 1:
        raise UsageError(f"--add {text!r}: grid={value!r}: K of sm:K must be at least 1")
    if key == "shared" and not value.isdigit():
        _expressions(text, key, value, (value,))
    if key == "name":
        if not _NAME.fullmatch(value):
            raise UsageError(f"--add {text!r}: name={value!r} may hold letters, digits and . + - _ only")
        return value if value.startswith("+") else "+" + value
    return value


def parse_adds(texts: tuple[str, ...] | list[str], cwd: str | os.PathLike | None = None) -> tuple[UserKernel, ...]:
    """Parse several ``--add`` texts; two rows may not share a name.

    Raises:
        UsageError: as :func:`parse_add`, or a repeated name (give one ``name=``).
    """
    kernels = tuple(parse_add(t, cwd) for t in texts)
    seen: set[str] = set()
    for k in kernels:
        if k.name in seen:
            raise UsageError(f"two --add rows are called {k.name}: give one of them @name=...")
        seen.add(k.name)
    return kernels


# --- compiling and the signature --------------------------------------------------------------------

def compile_source(variant: VariantSpec) -> Path:
    """A prelude file that includes the user's file by absolute path: what nvcc is given.

    The prelude carries a hash of the user's file so compiler caches (PyCUDA's) see every edit;
    it lives in a per-user temporary folder whose name holds nothing the user typed.
    """
    src = Path(variant.source)
    try:
        digest = hashlib.sha256(src.read_bytes()).hexdigest()
    except OSError as exc:
        raise UsageError(f"{variant.name}: cannot read {src} ({exc.strerror})") from None
    text = f'// cudalab --add prelude; source sha256 {digest}\n#include "{src}"\n'
    folder = private.private_folder("cudalab-add")  # refused if another user made it first
    return private.write_private(folder, f"{hashlib.sha256(text.encode()).hexdigest()[:24]}.cu", text)


def kernel_params(variant: VariantSpec, defines: dict[str, str], arch: str = "sm_90") -> dict[str, tuple[int, ...]]:
    """Compile the user's file to PTX for ``arch`` (nvcc, no GPU) and read every entry's parameter sizes.

    Raises:
        CompileError: with nvcc's log.
        ToolMissingError: no nvcc.
    """
    from cudalab import build  # noqa: PLC0415

    prelude = compile_source(variant)
    try:
        # the very build the run loads (same source, defines and arch: the run hits the cache)
        b = build.build(prelude, defines, arch)
    except CompileError as exc:  # name the user's file, not the prelude (the log names both)
        raise CompileError(f"nvcc could not compile {variant.source}", exc.log) from None
    return {k.name: k.params for k in b.kernels}


def prototype_sizes(signature: str, itemsize: int = 4) -> tuple[int, ...]:
    """Byte sizes of the parameters of a C prototype (pointers 8; ``ELEM_T`` is the element)."""
    inner = re.sub(r"//[^\n]*", "", signature)
    inner = inner[inner.index("(") + 1:inner.rindex(")")]
    sizes = []
    for param in inner.split(","):
        words = param.replace("*", " * ").split()
        if not words:
            continue
        types = words[:-1]
        if "*" in words or {"double", "long", "size_t"} & set(types):
            sizes.append(8)
        elif "ELEM_T" in types or "elem_t" in types:
            sizes.append(itemsize)
        elif "char" in types:
            sizes.append(1)
        elif "short" in types:
            sizes.append(2)
        else:
            sizes.append(4)
    return tuple(sizes)


def compact_signature(signature: str, kernel: str = "KERNEL") -> str:
    """The prototype on one line, comments dropped: ``void KERNEL(float *out, ...)``."""
    text = re.sub(r"//[^\n]*", "", signature)
    text = " ".join(text.split()).replace("( ", "(").replace(" )", ")")
    return text.replace("KERNEL", kernel)


def check_signature(variant: VariantSpec, family: str, signature: str, defines: dict[str, str],
                    itemsize: int, arch: str = "sm_90") -> None:
    """Refuse a user kernel whose compiled parameters do not fit the family's convention.

    ``arch``: the GPU's (the kernel may use what only it has); sizes do not depend on it.

    Raises:
        SignatureError: one line naming the expected signature (or the missing kernel).
        CompileError: the file does not compile (nvcc's log).
    """
    if not signature:
        raise SignatureError(f"{family} takes no --add kernels (its module declares no SIGNATURE)")
    entries = kernel_params(variant, defines, arch)
    expected = prototype_sizes(signature, itemsize)
    want = compact_signature(signature, variant.kernel)
    got = entries.get(variant.kernel)
    if got is None:
        mangled = [e for e in entries if variant.kernel in e]
        hint = f" (found {', '.join(mangled)}: declare it extern \"C\")" if mangled else ""
        raise SignatureError(f"{variant.name}: {variant.source} has no kernel {variant.kernel}{hint}; "
                             f"{family} expects extern \"C\" __global__ {want} (see cudalab list {family})")
    if got != expected:
        raise SignatureError(
            f"{variant.name}: {variant.kernel} takes {len(got)} parameter(s) of {_sizes(got)} bytes; {family} "
            f"launches {len(expected)} of {_sizes(expected)} bytes: extern \"C\" __global__ {want} (see cudalab list {family})")


def _sizes(sizes: tuple[int, ...]) -> str:
    return "(" + ", ".join(str(s) for s in sizes) + ")"


def variants(kernels: tuple[UserKernel, ...], spec: Any) -> list[VariantSpec]:
    """The VariantSpecs of a run's ``--add`` kernels; without ``block=`` they take the block of the
    family's first kernel variant (the ladder's first rung: 32x32 for transpose, 512 for reduce).

    Raises:
        UsageError: a user row's name is a built-in variant's too.
    """
    if not kernels:
        return []
    first = next((v.block for v in spec.variants if v.kind == "kernel"), (256, 1, 1))
    out = []
    for k in kernels:
        if k.name in spec.names():
            raise UsageError(f"--add {k.text!r}: {spec.name} already has a variant {k.name}; give @name=...")
        out.append(k.variant(first))
    return out


def precheck_signature(variant: VariantSpec, family: str, signature: str, defines: dict[str, str],
                       itemsize: int) -> None:
    """:func:`check_signature` where a compile error or a missing nvcc is left for the run to report
    (a compile error is the row's nvcc log, not a reason to refuse the others).

    Raises:
        SignatureError: the kernel is missing or does not fit.
    """
    from cudalab.errors import ToolMissingError  # noqa: PLC0415

    try:
        check_signature(variant, family, signature, defines, itemsize)
    except (CompileError, ToolMissingError):
        pass


def describe(spec: Any, fam: Any) -> str:
    """What ``cudalab list FAMILY`` says about ``--add``: the signature and the macros a kernel gets."""
    if not fam.SIGNATURE:
        return f"{spec.name} takes no --add kernels."
    first = next((v for v in spec.variants if v.kind == "kernel"), None)
    block = "x".join(str(b) for b in first.block if b > 1) or "1" if first else "256"
    lines = [f"Your own kernel: cudalab {spec.name} --add FILE.cu:KERNEL[@KEY=VALUE,...] launches it as",
             "", 'extern "C" __global__'] + fam.SIGNATURE.splitlines() + [
             "",
             f"Keys: block= (default {block}), per_thread=, tile=, grid=tiles|sm:K|DIMS, shared=BYTES, name=, -DNAME=VALUE.",
             "Macros it gets: " + ", ".join(k for k, _ in LAUNCH_DEFINES) + " (from the launch)"
             + (", ELEM_T (the element type of --dtype)" if "ELEM_T" in fam.SIGNATURE else "") + "."]
    return "\n".join(lines)
