"""CUDA functions HIP lacks, for HIP: the compat header ``data/hipify_compat.h`` and what a tree gets of it.

The header is data: a preamble, then families (``// @family KIND``), each a run of ``// @begin NAME`` ... ``// @end``
blocks, one per function, then an epilogue. ``names()`` are the functions it has; ``family(name)`` says which
family a name is of, and the texts of its findings; ``render(wanted)`` is the header with only the blocks of
``wanted``, which the tree pass writes to ``OUT/hipify_compat.h`` and includes in the files that use them
(tools/hipify/tree.py). The families:

- ``simd``: CUDA's SIMD-in-a-word intrinsics (``__vsub4``, ``__vcmpne4``, ...; HIP 5.2, 6.4 and 7.2 have none).
  A project that defines one itself (a hand port's compat header) keeps its own: the header does not provide it.
- ``cache-hint``: CUDA's loads and stores with cache hints (``__ldcs``, ``__stcs``, ...; HIP declares ``__ldcg``,
  ``__ldca``, ``__ldcs`` for ``__half``/``__half2`` only, and none of the others), as function templates. A
  project's own (non-template) ``__ldcs(const floatX*)`` is an overload beside them, not the same function: only a
  template definition of its own keeps the header from providing one.
- ``cg-reduce``: CUDA's ``<cooperative_groups/reduce.h>`` (``cooperative_groups::reduce`` and its function objects
  ``plus``, ``less``, ``greater``, ``bit_and``, ``bit_or``, ``bit_xor``; HIP 5.2, 6.4 and 7.2 have no such header).
  Its block is wanted by an include, not by a name (``reduce`` and ``plus`` are everyone's names): the row of
  ``data/cuda_only_headers.tsv`` names the blocks that provide the header (its ``compat`` column), and the
  translation puts the compat header in the include's place (tools/hipify/translate.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path

from tools.errors import ToolError

SOURCE = Path(__file__).resolve().parent / "data" / "hipify_compat.h"
#: the header's name in the output directory (at its top)
OUTPUT_NAME = "hipify_compat.h"
_BLOCK = rb"(?ms)^// @begin (\w+)\n(.*?)^// @end\n"
_FAMILY = rb"(?m)^// @family ([\w-]+)\n"


class Family:
    """One family of the header's functions: what they are (for the findings' texts) and how a project's own
    definition of one of their names is read. (A plain class: ``dataclasses`` costs start-up time.)"""

    __slots__ = ("by_include", "fix", "kind", "lacks", "overloadable", "provided_as", "rule", "what")

    def __init__(
        self,
        kind: str,
        rule: str,
        *,
        what: str,
        lacks: str,
        provided_as: str,
        fix: str,
        overloadable: bool,
        by_include: bool = False,
    ) -> None:
        self.kind = kind
        self.rule = rule  # the findings' rule
        self.what = what  # "one of CUDA's ...": completes "NAME is ..."
        self.lacks = lacks  # what HIP lacks of them, with the HIP versions checked
        self.provided_as = provided_as  # how the header provides them
        self.fix = fix  # what to write instead, without the header ({name})
        #: the header's functions are templates: a project's own non-template function of the name is an
        #: overload beside them (only a template of its own is the same function)
        self.overloadable = overloadable
        #: its blocks are wanted by an include (a row of data/cuda_only_headers.tsv names them), not by a name
        self.by_include = by_include

    def unsupported(self, name: str, target: str) -> tuple[str, str]:
        """(reason, suggestion) of a use the header does not provide."""
        return (
            f"{name} is {self.what}, which {target} lacks ({self.lacks})",
            f"{self.fix.format(name=name)}, or let hipify provide it: it writes {OUTPUT_NAME} into the output and "
            "includes it where the tree uses these",
        )

    def provided(self, name: str) -> str:
        """The reason of a note on a use the header provides."""
        return (
            f"{name}: {self.what}, which HIP lacks ({self.lacks}); provided by {OUTPUT_NAME}, which the "
            f"translation writes at the top of the output and includes here ({self.provided_as})"
        )


FAMILIES = {
    "simd": Family(
        "simd",
        "simd-intrinsic",
        what="one of CUDA's SIMD-in-a-word intrinsics",
        lacks="HIP 5.2, 6.4 and 7.2 declare none of them",
        provided_as="__host__ __device__, from the semantics the CUDA Math API documents",
        fix="write {name} with per-lane integer arithmetic (the CUDA Math API documents each)",
        overloadable=False,
    ),
    "cache-hint": Family(
        "cache-hint",
        "cache-hint",
        what="one of CUDA's loads and stores with a cache hint (CUDA C++ Programming Guide, \"Load Functions Using "
        'Cache Hints", "Store Functions Using Cache Hints")',
        lacks="HIP 5.2, 6.4 and 7.2 declare __ldcg, __ldca and __ldcs for __half and __half2 only, and no "
        "other of them",
        provided_as="a template for every type, a plain load or store: the hint is only a performance hint, and "
        "HIP's own __half ones are plain loads too",
        fix="write a plain load or store (*p, *p = v) instead of {name}",
        overloadable=True,
    ),
    "cg-reduce": Family(
        "cg-reduce",
        "cuda-only-header",
        what="CUDA's cooperative-groups reductions (cooperative_groups::reduce and the function objects plus, less, "
        'greater, bit_and, bit_or, bit_xor; CUDA C++ Programming Guide, Cooperative Groups, "reduce")',
        lacks="HIP 5.2, 6.4 and 7.2 have no <cooperative_groups/reduce.h>, and amd_hip_cooperative_groups.h declares "
        "none of them",
        provided_as="cooperative_groups::reduce for a thread_block_tile or a coalesced_group, with the group's "
        "shfl_down and shfl, and the six function objects",
        fix="reduce with the tile's shuffles (tile.shfl_down) or hipCUB's WarpReduce instead of {name}",
        overloadable=False,
        by_include=True,
    ),
}


#: the rules of the findings on the header's functions (those a name wants)
RULES = frozenset(f.rule for f in FAMILIES.values() if not f.by_include)


class _Header:
    __slots__ = ("blocks", "epilogue", "families", "preamble")

    def __init__(
        self, preamble: bytes, blocks: dict[bytes, bytes], families: dict[bytes, Family], epilogue: bytes
    ) -> None:
        self.preamble = preamble
        self.blocks = blocks
        self.families = families
        self.epilogue = epilogue


@lru_cache(maxsize=1)
def _header(path: Path = SOURCE) -> _Header:
    try:
        data = path.read_bytes()
    except OSError as err:
        raise ToolError(f"cannot read {path}: {err.strerror or err}") from None
    matches = list(re.finditer(_BLOCK, data))
    marks = list(re.finditer(_FAMILY, data))
    if not matches or not marks or marks[0].start() > matches[0].start():
        raise ToolError(f"{path}: no '// @family KIND' line followed by '// @begin NAME' ... '// @end' blocks")
    blocks: dict[bytes, bytes] = {}
    families: dict[bytes, Family] = {}
    for prev, m in zip([marks[0], *matches], matches):
        if re.sub(_FAMILY, b"", data[prev.end() : m.start()]):
            raise ToolError(f"{path}: text between blocks (before '// @begin {m.group(1).decode('latin-1')}')")
        mark = [f for f in marks if f.start() < m.start()][-1]
        kind = mark.group(1).decode("latin-1")
        if kind not in FAMILIES:
            raise ToolError(f"{path}: unknown family '{kind}' (known: {', '.join(FAMILIES)})")
        blocks[m.group(1)] = m.group(0)
        families[m.group(1)] = FAMILIES[kind]
    return _Header(data[: marks[0].start()], blocks, families, data[matches[-1].end() :])


def names() -> frozenset[bytes]:
    """The functions the header provides where a name wants them (not the blocks an include wants)."""
    h = _header()
    return frozenset(name for name in h.blocks if not h.families[name].by_include)


def blocks() -> frozenset[str]:
    """Every block of the header (the names a row of data/cuda_only_headers.tsv may give in its compat column)."""
    return frozenset(name.decode("latin-1") for name in _header().blocks)


def family(name: bytes) -> Family:
    """The family of ``name``, one of ``names()``."""
    return _header().families[name]


def render(wanted: Iterable[str]) -> bytes:
    """The header with the blocks of ``wanted`` (names it has), in its order; the first line says it is generated."""
    h = _header()
    keep = {w.encode("latin-1") for w in wanted}
    body = b"".join(block for name, block in h.blocks.items() if name in keep)
    first = (
        b"// Generated by `python -m tools hipify` from tools/hipify/data/hipify_compat.h (monarch-runtime): the CUDA "
        b"functions this tree uses that HIP lacks.\n"
    )
    return first + h.preamble + body + h.epilogue
