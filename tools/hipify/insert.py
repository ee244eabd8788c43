"""Lines the translation adds at the top of a file: ``#include <hip/hip_runtime.h>`` (nvcc includes
``cuda_runtime.h`` in every ``.cu`` file by itself; HIP-Clang does not), and the macro HIP 6.2-6.x needs to declare
the warp ``*_sync`` builtins. What a file uses is found here (``uses``, ``defines_and_lines``; the translator
records what it includes); whether a file needs the lines is decided by the tree pass, which sees the project
headers each file includes (tools/hipify/tree.py).

Both are placed at one point (``insertion_point``): after a UTF-8 byte-order mark, blank lines, comments,
``#pragma once``, an include guard (``#ifndef X`` + ``#define X`` as the first two directives) and leading
``#define``/``#undef`` lines; before the first ``#include``, any other directive, or code. So the macro comes before
any HIP header of the file, the include before the file's own includes, and a second run adds nothing (the file
then includes the runtime and defines the macro itself).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from tools.hipify import cond

if TYPE_CHECKING:
    from tools.hipify.targets import RuntimeInclude

# facts (bits), found by the translator
USES_SYNC = 1  # the warp *_sync builtins or __activemask
USES_DEVICE = 2  # device code: built-in variables, execution-space keywords, device builtins, <<<
USES_API = 4  # runtime/driver API names
HAS_RUNTIME = 8  # includes hip/hip_runtime.h (after translation)
HAS_RUNTIME_API = 16  # includes hip/hip_runtime_api.h (after translation)
DEFINES_SYNC = 32  # #defines the warp-sync macro itself
CRLF = 64  # its lines end with CRLF
SEEN_INCLUDE = 128  # (while translating) an #include directive was met
RUNTIME_FIRST = 256  # its first #include is hip/hip_runtime.h (as nvcc's implicit one comes first)
INCLUDES_CUDA = 512  # includes a CUDA header (one the database maps or knows, or a CUDA-only one): CUDA host code
# Then two bits for each of the target's runtime includes (Target.runtime_includes, data/targets.tsv), the i-th
# at ``RUNTIME_INCLUDE_BITS + 2 * i``: ``has_include(i)`` (the file includes the header, or one that provides it),
# ``uses_include(i)`` (it uses one of the header's names unqualified: ``runtime_include_uses``).
RUNTIME_INCLUDE_BITS = 12


def has_include(i: int) -> int:
    return 1 << (RUNTIME_INCLUDE_BITS + 2 * i)


def uses_include(i: int) -> int:
    return 1 << (RUNTIME_INCLUDE_BITS + 2 * i + 1)


#: the files nvcc compiles with cuda_runtime.h included implicitly: .cu, and the headers (which .cu files include);
#: a .c/.cpp/.cc file is compiled by the host compiler in a CUDA build and includes what it uses itself
IMPLICIT_SUFFIXES = frozenset({".cu", ".cuh", ".h", ".hh", ".hpp", ".hxx", ".h++", ".inl", ".inc", ".ipp", ".tpp"})

RUNTIME_HEADER = b"hip/hip_runtime.h"
RUNTIME_API_HEADER = b"hip/hip_runtime_api.h"

# Device code: device builtins (threadIdx, __syncthreads, atomics, shuffles) can only be used in functions marked
# __device__ or __global__, so those keywords and <<< launches find the files that need hip_runtime.h (the keywords
# come with HIP-Clang's own wrapper, but a file with them is device code, which nvcc compiled with the runtime
# included). Runtime API names: cudaMalloc, cudaStream_t, hipMalloc (the driver API is declared by cuda.h, which
# nvcc does not include implicitly: a file using it includes it). Few needles: each is a full bytes.find.
_DEVICE = (b"__global__", b"__device__", b"<<<")
_API = (b"cuda", b"hip")  # followed by an upper-case letter
_UPPER = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ")
_IDC = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") | frozenset(range(0x80, 0x100))
_KEYWORDS_BEFORE_EXPR = frozenset({b"return", b"case", b"else", b"do", b"throw", b"co_return"})
_SYNC_DEFINE = r"^[ \t]*#[ \t]*define[ \t]+{}\b"


def _first(
    data: bytes, needle: bytes, starts: list[int], spans: list[tuple[int, int]], follow: frozenset[int] | None
) -> int:
    """The first occurrence of ``needle`` as a whole word (or followed by a byte of ``follow``) outside the
    comments and literals ``spans`` (their ``starts``), or -1. Each search is ``bytes.find``'s (C speed)."""
    find = data.find
    n = len(needle)
    size = len(data)
    i = find(needle)
    while i >= 0:
        k = bisect_right(starts, i) - 1
        if k >= 0 and i < spans[k][1]:
            i = find(needle, spans[k][1])  # in a comment or literal: go on after it
            continue
        end = i + n
        before_ok = needle[0] == 0x3C or i == 0 or data[i - 1] not in _IDC
        if follow is None:
            after_ok = needle[0] == 0x3C or end >= size or data[end] not in _IDC
        else:
            after_ok = end < size and data[end] in follow
        if before_ok and after_ok:
            return i
        i = find(needle, i + 1)
    return -1


def uses(data: bytes, spans: list[tuple[int, int]]) -> int:
    """``USES_DEVICE`` or ``USES_API`` (or 0): what the input ``data`` uses, outside its comments and literals
    (``spans``, sorted). The tree pass asks only for the files nvcc gave the runtime implicitly (see
    ``IMPLICIT_SUFFIXES``) that do not include it themselves."""
    starts = [a for a, _ in spans]
    if any(_first(data, needle, starts, spans, None) >= 0 for needle in _DEVICE):
        return USES_DEVICE  # device code needs all of the runtime: the API names do not matter then
    if any(_first(data, needle, starts, spans, _UPPER) >= 0 for needle in _API):
        return USES_API
    return 0


# C/C++ headers CUDA's runtime header includes (crt/common_functions.h: <string.h>, <assert.h>, <math.h>, ...) that
# the target's hip_runtime.h does not make usable in host code: CUDA host code calls their names unqualified
# without including them (llm.c: memset, isfinite). The rows are the target's data (Target.runtime_includes); a
# use is a call of one of a row's names, unqualified (``memset(p, 0, n)``, ``::memset``; not ``std::memset``,
# ``v.isnan()`` or ``my_memset``), outside comments and literals. Each needle is one ``bytes.find`` over the file
# (a prefix of the row's names, ``mem``: the whole name is checked at each hit).
def runtime_include_uses(data: bytes, spans: list[tuple[int, int]], rows: Sequence[RuntimeInclude], facts: int) -> int:
    """``uses_include(i)`` for each row i of ``rows`` whose names ``data`` calls (``spans``: its comments and
    literals, sorted) and whose header it does not include (``has_include(i)`` in ``facts``)."""
    out = 0
    starts: list[int] = []  # (made at the first candidate: files that name none of them cost only the finds)

    def outside(at: int) -> bool:
        if not starts:
            starts.extend(a for a, _ in spans)
        k = bisect_right(starts, at) - 1
        return k < 0 or at >= spans[k][1]

    for i, row in enumerate(rows):
        if not facts & has_include(i) and any(_calls(data, n, row.name_set, outside) for n in row.needles):
            out |= uses_include(i)
    return out


def _calls(data: bytes, needle: bytes, names: frozenset[bytes], outside: Callable[[int], bool]) -> bool:
    """Whether ``data`` calls a name of ``names`` that starts with ``needle`` unqualified, where ``outside``."""
    size = len(data)
    at = data.find(needle)
    while at >= 0:
        tail_end = at + len(needle)
        while tail_end < size and data[tail_end] in _IDC:
            tail_end += 1
        if (
            data[at:tail_end] in names
            and (at == 0 or data[at - 1] not in _IDC)
            and data[tail_end : tail_end + 64].lstrip()[:1] == b"("
            and _unqualified(data[max(0, at - 64) : at].rstrip())
            and outside(at)
        ):
            return True
        at = data.find(needle, tail_end)
    return False


def _unqualified(before: bytes) -> bool:
    """Whether a name after ``before`` is called as the global function: not a member (``.``, ``->``) nor a
    namespace's (``std::isnan``); ``::isnan`` is the global one, which HIP declares for device code only too."""
    if before.endswith((b".", b"->")):
        return False
    if not before.endswith(b"::"):
        return True
    head = before[:-2].rstrip()
    m = re.search(rb"[A-Za-z_0-9]+\Z", head)
    return m is None or m.group(0) in _KEYWORDS_BEFORE_EXPR  # `return ::isnan(x)`: the global one


def has_device_code(data: bytes, spans: list[tuple[int, int]]) -> bool:
    """Whether ``data`` has ``__global__`` or ``__device__`` outside its comments and literals (only a CUDA compiler
    can compile such a file: tools/hipify/scope.py)."""
    if b"__global__" not in data and b"__device__" not in data:
        return False
    starts = [a for a, _ in spans]
    return any(_first(data, needle, starts, spans, None) >= 0 for needle in _DEVICE[:2])


def constructs(data: bytes, spans: list[tuple[int, int]]) -> list[int]:
    """The offsets of every CUDA construct that makes a file need the runtime (what ``uses`` looks for): device
    code (``__global__``, ``__device__``, ``<<<``) and runtime API names, outside comments and literals."""
    starts = [a for a, _ in spans]
    size = len(data)
    out: list[int] = []
    for needle, follow in (
        (b"__global__", None),
        (b"__device__", None),
        (b"<<<", None),
        (b"cuda", _UPPER),
        (b"hip", _UPPER),
    ):
        at = data.find(needle)
        while at >= 0:
            k = bisect_right(starts, at) - 1
            if k >= 0 and at < spans[k][1]:
                at = data.find(needle, spans[k][1])  # in a comment or literal: go on after it
                continue
            end = at + len(needle)
            before = needle[0] == 0x3C or at == 0 or data[at - 1] not in _IDC
            if follow is not None:
                after = end < size and data[end] in follow
            else:
                after = needle[0] == 0x3C or end >= size or data[end] not in _IDC
            if before and after:
                out.append(at)
            at = data.find(needle, at + 1)
    return sorted(out)


def guard_line(data: bytes, spans: list[tuple[int, int]], lookup: cond.Lookup) -> int:
    """Where the runtime include goes when every CUDA construct of ``data`` sits in branches a host C/C++ compiler
    does not compile (``#ifdef __CUDACC__``, ``#if defined(__CUDACC__) || defined(__CUDA_ARCH__)``, ...: decided with
    ``lookup``, the host compiler's view, tools/hipify/scope.py): the first line of that branch's body when they all
    sit in one such branch (the line after its ``#if``), 0 when they sit in several (the include then goes at the top,
    inside ``#ifdef __HIPCC__``; also when an ``extern "C" {`` comes before that branch, as the include cannot go in
    one), -1 when one is outside every such branch (at the top, as it is)."""
    found = constructs(data, spans)
    if not found:
        return -1
    bs = cond.branches(cond.directives(data, spans))
    if not bs:
        return -1
    states = cond.branch_states(bs, lookup)
    dead = [s == 0 for s in states]
    lines = [data.count(b"\n", 0, at) + 1 for at in found]
    holders: set[int] = set()
    for line in lines:
        outer = -1
        for i, b in enumerate(bs):
            if dead[i] and b.first <= line <= b.last and (b.parent < 0 or not _dead_ancestor(bs, dead, b.parent)):
                outer = i
                break
        if outer < 0:
            return -1
        holders.add(outer)
    if len(holders) != 1:
        return 0
    line = bs[holders.pop()].first
    at = 0
    for _ in range(line - 1):
        at = data.find(b"\n", at) + 1
    if re.search(rb'\bextern\s*"C"\s*\{', data[:at]):
        return 0  # (the branch may sit in an extern "C" block, where C++ headers cannot go: the top, guarded)
    return line


def _dead_ancestor(bs: list[cond.Branch], dead: list[bool], i: int) -> bool:
    while i >= 0:
        if dead[i]:
            return True
        i = bs[i].parent
    return False


def defines_and_lines(data: bytes, sync_macro: str | None) -> int:
    """``DEFINES_SYNC`` (the file defines the warp-sync macro itself) and ``CRLF`` (its lines end so)."""
    out = 0
    if sync_macro and sync_macro.encode() in data and re.search(_SYNC_DEFINE.format(sync_macro).encode(), data, re.M):
        out |= DEFINES_SYNC
    nl = data.find(b"\n")
    if nl > 0 and data[nl - 1] == 0x0D:
        out |= CRLF
    return out


# (compiled where used, through re's cache: start-up time)
_DIRECTIVE = rb"[ \t]*#[ \t]*(\w*)[ \t]*(\S*)"
_GUARD_IF = rb"[ \t]*#[ \t]*if[ \t]*![ \t]*defined[ \t]*\(?[ \t]*(\w+)"


def insertion_point(data: bytes) -> int:
    """Where the added lines go (see the module doc): the start of a line."""
    i = 3 if data.startswith(b"\xef\xbb\xbf") else 0
    n = len(data)
    guard: bytes | None = None  # the macro of a first #ifndef, until the #define that makes it an include guard
    guard_at = -1  # where that #ifndef is: the place to insert when it is not a guard after all
    directives = 0  # directives seen, #pragma once aside (an include guard is the first two)
    while i < n:
        line_end = cond.logical_end(data, i)
        line = data[i:line_end]
        stripped = line.strip()
        if not stripped or stripped.startswith(b"//"):
            i = line_end + 1
            continue
        if stripped.startswith(b"/*"):
            close = data.find(b"*/", i + line.find(b"/*") + 2)
            if close < 0:
                return guard_at if guard_at >= 0 else n
            rest_end = cond.logical_end(data, close)
            rest = data[close + 2 : rest_end].strip()
            if rest.startswith(b"/*"):
                i = close + 2 + data[close + 2 :].find(b"/*")  # another comment: go on from it
                continue
            if rest and not rest.startswith(b"//"):
                return guard_at if guard_at >= 0 else i  # code after the comment on its line
            i = rest_end + 1
            continue
        m = re.match(_DIRECTIVE, line)
        if m is None:
            return guard_at if guard_at >= 0 else i  # code
        name, arg = m.group(1), m.group(2)
        if name == b"pragma" and arg == b"once":
            i = line_end + 1
            continue
        directives += 1
        if directives == 1 and name in (b"ifndef", b"if"):
            found = arg if name == b"ifndef" else None
            if found is None:
                g = re.match(_GUARD_IF, line)
                found = g.group(1) if g is not None else None
            if found:
                guard, guard_at = found, i
                i = line_end + 1
                continue
        if guard_at >= 0:
            if directives == 2 and name == b"define" and arg == guard:
                guard_at = -1  # an include guard: the lines go inside it
                i = line_end + 1
                continue
            return guard_at
        if name not in (b"define", b"undef"):
            return i  # an #include, a conditional, or another directive
        i = line_end + 1
    return guard_at if guard_at >= 0 else min(i, n)


def render(
    define: str | None,
    runtime: bytes | None,
    crlf: bool,
    simd_path: str | None = None,
    *,
    own_guard: bool = False,
    headers: Sequence[RuntimeInclude] = (),
) -> bytes:
    """The lines to insert: the macro (guarded), then ``#include <runtime>`` and ``#include "simd_path"`` (the
    compat header, relative to the file), then ``#include <h>`` for each of the runtime includes ``headers``, inside
    ``#ifdef __HIPCC__`` with ``own_guard`` (a file whose CUDA code only a CUDA compiler sees, in several branches: a
    host compiler must not see the include either)."""
    eol = "\r\n" if crlf else "\n"
    lines: list[str] = []
    if define:
        lines += [
            f"#ifndef {define}  // [hipify] HIP 6.2-6.x declare the warp *_sync builtins only with it",
            f"#define {define}",
            "#endif",
        ]
    includes: list[str] = []
    if runtime:
        includes.append(f"#include <{runtime.decode('ascii')}>  // [hipify] nvcc includes the CUDA runtime implicitly")
    if simd_path:
        includes.append(f'#include "{simd_path}"  // [hipify] CUDA functions HIP lacks (SIMD, cache hints, cg::reduce)')
    for row in headers:
        shown = ", ".join(n.decode("ascii") for n in row.names[:2]) + (", ..." if len(row.names) > 2 else "")
        includes.append(
            f"#include <{row.header.decode('ascii')}>  // [hipify] CUDA's runtime header includes it; HIP's does not "
            f"declare {shown} for host code"
        )
    if includes and own_guard:
        includes = [
            "#ifdef __HIPCC__  // [hipify] this file's CUDA code is for CUDA/HIP compilers only",
            *includes,
            "#endif",
        ]
    lines += includes
    return "".join(line + eol for line in lines).encode("ascii")
