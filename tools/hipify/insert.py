"""Lines the translation adds at the top of a file: ``#include <hip/hip_runtime.h>`` (nvcc includes
``cuda_runtime.h`` in every ``.cu`` file by itself; HIP-Clang does not), and the macro HIP 6.2-6.x needs to declare
the warp ``*_sync`` builtins. What a file uses is found here (``facts``); whether a file needs the lines is decided
by the tree pass, which sees the project headers each file includes (tools/hipify/tree.py).

Both are placed at one point (``insertion_point``): after a UTF-8 byte-order mark, blank lines, comments,
``#pragma once``, an include guard (``#ifndef X`` + ``#define X`` as the first two directives) and leading
``#define``/``#undef`` lines; before the first ``#include``, any other directive, or code. So the macro comes before
any HIP header of the file, the include before the file's own includes, and a second run adds nothing (the file
then includes the runtime and defines the macro itself).
"""

from __future__ import annotations

import re
from bisect import bisect_right

# facts (bits), found by the translator
USES_SYNC = 1  # the warp *_sync builtins or __activemask
USES_DEVICE = 2  # device code: built-in variables, execution-space keywords, device builtins, <<<
USES_API = 4  # runtime/driver API names
HAS_RUNTIME = 8  # includes hip/hip_runtime.h (after translation)
HAS_RUNTIME_API = 16  # includes hip/hip_runtime_api.h (after translation)
DEFINES_SYNC = 32  # #defines the warp-sync macro itself
CRLF = 64  # its lines end with CRLF

RUNTIME_HEADER = b"hip/hip_runtime.h"
RUNTIME_API_HEADER = b"hip/hip_runtime_api.h"

# Device-code markers: (needle, whole word?) - hip_runtime.h declares these or what they need (the execution-space
# keywords come with HIP-Clang's own wrapper, but a file with them is device code nvcc would have given the runtime).
_DEVICE = (
    (b"__global__", True),
    (b"__device__", True),
    (b"threadIdx", True),
    (b"blockIdx", True),
    (b"blockDim", True),
    (b"gridDim", True),
    (b"__shared__", True),
    (b"__constant__", True),
    (b"__managed__", True),
    (b"warpSize", True),
    (b"__syncthreads", False),
    (b"__threadfence", False),
    (b"__shfl", False),
    (b"__ballot", False),
    (b"__activemask", True),
    (b"__syncwarp", True),
    (b"__any_sync", True),
    (b"__all_sync", True),
    (b"__launch_bounds__", True),
    (b"__ldg", True),
    (b"atomicAdd", True),
    (b"atomicCAS", True),
    (b"atomicExch", True),
    (b"atomicMax", True),
    (b"atomicMin", True),
    (b"atomicSub", True),
    (b"atomicAnd", True),
    (b"atomicOr", True),
    (b"atomicXor", True),
    (b"atomicInc", True),
    (b"atomicDec", True),
    (b"<<<", False),
)
# Runtime/driver API names: (needle, the bytes that may follow it) - cudaMalloc, cuInit, CUresult, hipMalloc.
_API = (
    (b"cuda", frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ")),
    (b"hip", frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ")),
    (b"cu", frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ")),
    (b"CU", frozenset(b"abcdefghijklmnopqrstuvwxyz")),
)
_IDC = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") | frozenset(range(0x80, 0x100))
_SYNC_DEFINE = r"^[ \t]*#[ \t]*define[ \t]+{}\b"


def _first(  # noqa: PLR0917
    data: bytes,
    needle: bytes,
    word: bool,
    follow: frozenset[int] | None,
    outside: list[int],
    spans: list[tuple[int, int]],
) -> int:
    """The offset of the first occurrence of ``needle`` at an identifier start, outside ``spans``, or -1."""
    n = len(needle)
    i = data.find(needle)
    while i >= 0:
        ok = not (needle[0] in _IDC and i and data[i - 1] in _IDC)
        if ok and word and i + n < len(data) and data[i + n] in _IDC:
            ok = False
        if ok and follow is not None and (i + n >= len(data) or data[i + n] not in follow):
            ok = False
        if ok:
            k = bisect_right(outside, i) - 1
            if not (k >= 0 and i < spans[k][1]):
                return i
        i = data.find(needle, i + 1)
    return -1


def facts(data: bytes, spans: list[tuple[int, int]], sync_macro: str | None) -> int:
    """What the input ``data`` uses, outside its comments and literals (``spans``, sorted)."""
    starts = [a for a, _ in spans]
    out = 0
    for needle, word in _DEVICE:
        if needle in data and _first(data, needle, word, None, starts, spans) >= 0:
            out |= USES_DEVICE
            break
    for needle, follow in _API:
        if needle in data and _first(data, needle, False, follow, starts, spans) >= 0:
            out |= USES_API
            break
    if sync_macro and sync_macro.encode() in data and re.search(_SYNC_DEFINE.format(sync_macro).encode(), data, re.M):
        out |= DEFINES_SYNC
    nl = data.find(b"\n")
    if nl > 0 and data[nl - 1] == 0x0D:
        out |= CRLF
    return out


_DIRECTIVE = re.compile(rb"[ \t]*#[ \t]*(\w*)[ \t]*(\S*)")
_GUARD_IF = re.compile(rb"[ \t]*#[ \t]*if[ \t]*![ \t]*defined[ \t]*\(?[ \t]*(\w+)")


def _logical_end(data: bytes, i: int) -> int:
    """The end (the newline's offset, or len) of the line at ``i``, continued lines (backslash-newline) included."""
    n = len(data)
    while True:
        end = data.find(b"\n", i)
        if end < 0:
            return n
        if not data[i:end].rstrip(b"\r").endswith(b"\\"):
            return end
        i = end + 1


def insertion_point(data: bytes) -> int:
    """Where the added lines go (see the module doc): the start of a line."""
    i = 3 if data.startswith(b"\xef\xbb\xbf") else 0
    n = len(data)
    guard: bytes | None = None  # the macro of a first #ifndef, until the #define that makes it an include guard
    guard_at = -1  # where that #ifndef is: the place to insert when it is not a guard after all
    directives = 0  # directives seen, #pragma once aside (an include guard is the first two)
    while i < n:
        line_end = _logical_end(data, i)
        line = data[i:line_end]
        stripped = line.strip()
        if not stripped or stripped.startswith(b"//"):
            i = line_end + 1
            continue
        if stripped.startswith(b"/*"):
            close = data.find(b"*/", i + line.find(b"/*") + 2)
            if close < 0:
                return guard_at if guard_at >= 0 else n
            rest_end = _logical_end(data, close)
            rest = data[close + 2 : rest_end].strip()
            if rest.startswith(b"/*"):
                i = close + 2 + data[close + 2 :].find(b"/*")  # another comment: go on from it
                continue
            if rest and not rest.startswith(b"//"):
                return guard_at if guard_at >= 0 else i  # code after the comment on its line
            i = rest_end + 1
            continue
        m = _DIRECTIVE.match(line)
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
                g = _GUARD_IF.match(line)
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


def render(define: str | None, runtime: bytes | None, crlf: bool) -> bytes:
    """The lines to insert: the macro (guarded), then ``#include <runtime>``."""
    eol = "\r\n" if crlf else "\n"
    lines: list[str] = []
    if define:
        lines += [
            f"#ifndef {define}  // [hipify] HIP 6.2-6.x declare the warp *_sync builtins only with it",
            f"#define {define}",
            "#endif",
        ]
    if runtime:
        lines.append(f"#include <{runtime.decode('ascii')}>  // [hipify] nvcc includes the CUDA runtime implicitly")
    return "".join(line + eol for line in lines).encode("ascii")
