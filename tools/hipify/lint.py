"""Portability hazards the mapping tables cannot see.

Runs over a file's bytes; a match that starts inside a comment or literal (the translator's spans) is
dropped, so a rule never fires inside a comment or string. Warp/lane/cooperative-groups rules run only in
files with device code. Each rule has an id; a hazard is silenced on its line by a comment containing
``hipify: ignore`` (all rules) or ``hipify: ignore(rule-id, other-id)``.

Rules (see docs/hipify.md for the full text):

warp-size-literal     32 hard-coded as warp size: index math, shared-memory sizes, loop bounds, constants
lane-math             ``& 31``, ``% 32``, ``>> 5`` on thread/lane indices (assume 32 lanes)
warp-reduce-16        a shuffle reduction loop starting at offset 16 (covers only 32 lanes)
lane-mask-32          (the translator's, tools/hipify/masks.py) a partial or run-time 32-bit ``*_sync`` lane mask
ballot-32             ``__ballot``/``__activemask`` results kept in 32 bits or passed to ``__popc``/``__ffs``
inline-asm            inline PTX ``asm(...)`` (no translation exists)
cuda-arch-compare     ``__CUDA_ARCH__`` compared with a compute capability
texture-reference     ``texture<...>``/``surface<...>`` references (removed from HIP)
texture-fetch         texture/surface fetch functions (partial support in HIP; check each)
coop-groups           cooperative-groups features HIP lacks (clusters, memcpy_async, labeled partitions, ...)
grid-sync             ``this_grid().sync()`` needs a cooperative launch (hipLaunchCooperativeKernel)
cuda-only-header      a CUDA-only header (cuda/pipeline, cuda/barrier, ...), reported by the translator
"""

from __future__ import annotations

import re
from bisect import bisect_right

from tools.hipify.translate import RawFinding

MARKER = b"hipify: ignore"

# rule -> (pattern, reason, suggestion, blocking, check)
# Every pattern starts with a literal, so the regex engine finds candidates with a fast substring search;
# the context a look-behind would need is checked in Python at the (few) candidates:
#   "word": the match must not continue an identifier; "ctx": ... and its line must mention
#   thread/lane/warp indexing, shared memory, a shuffle or a loop; "ballot": see _ballot_context.
# Each rule has one or more patterns; each pattern starts with a literal of 2+ bytes where possible, so
# the regex engine finds candidates with its fast literal search rather than trying every offset.
_RULES: dict[str, tuple[tuple[bytes, ...], str, str, bool, str]] = {
    "warp-size-literal": (
        (rb"32(?:[uU][lL]{0,2}|[lL]{1,2}[uU]?)?(?![\w.'])",),
        "literal 32 used as the warp size; AMD CDNA GPUs run 64-lane wavefronts",
        "use warpSize (device code) or a constant from __AMDGCN_WAVEFRONT_SIZE / hipDeviceProp_t::warpSize",
        True,
        "ctx",
    ),
    "lane-math": (
        (rb"&\s*(?:31|0x1[fF])(?![\w.])", rb"%\s*32(?![\w.])", rb">>\s*5(?![\w.])"),
        "lane/warp index computed assuming 32 lanes (& 31, % 32, >> 5)",
        "use warpSize: lane = tid % warpSize, warp = tid / warpSize",
        True,
        "ctx-any",
    ),
    "warp-reduce-16": (
        (rb"for\s*\([^;)]*=\s*16\s*;[^;]*;[^)]*(?:/=\s*2|>>=\s*1)",),
        "shuffle-reduction loop starting at offset 16 reduces only 32 lanes",
        "start at warpSize / 2",
        True,
        "word",
    ),
    "ballot-32": (
        (rb"__ballot(?:_sync)?\b", rb"__activemask\b"),
        "__ballot/__activemask return 64 bits on AMD; a 32-bit variable or __popc/__ffs drops half the lanes",
        "keep the result in uint64_t / unsigned long long and use __popcll / __ffsll",
        True,
        "ballot",
    ),
    "inline-asm": (
        (rb"asm(?:__)?\s*(?:volatile\s*|__volatile__\s*)?\(",),
        "inline assembly (PTX) cannot be translated",
        "replace with HIP intrinsics or guard with #ifdef __HIP_PLATFORM_NVIDIA__",
        True,
        "asm",
    ),
    "cuda-arch-compare": (
        (rb"__CUDA_ARCH__\s*(?:[<>]=?|==|!=)\s*\d",),
        "__CUDA_ARCH__ compared with a compute capability; AMD targets have no such number",
        "test features instead (e.g. __HIP_DEVICE_COMPILE__, __gfx90a__) or guard with __HIP_PLATFORM_AMD__",
        True,
        "word",
    ),
    "texture-reference": (
        (rb"texture\s*<", rb"surface\s*<"),
        "texture/surface references are not supported by HIP (removed in CUDA 12 too)",
        "use texture objects (hipTextureObject_t) or plain global-memory loads",
        True,
        "word",
    ),
    "texture-fetch": (
        (
            rb"tex(?:[123]D\w*|1Dfetch|Cubemap\w*)\s*(?:<[^;>()]*>\s*)?\(",
            rb"surf(?:[123]D\w*|Cubemap\w*)\s*(?:<[^;>()]*>\s*)?\(",
        ),
        "texture/surface fetch: HIP supports only part of these (formats, layered/cubemap variants)",
        "check the HIP texture API for this call, or use global-memory loads",
        False,
        "word",
    ),
    "coop-groups": (
        tuple(
            name + rb"\b"
            for name in (
                b"this_cluster",
                b"cluster_group",
                b"memcpy_async",
                b"labeled_partition",
                b"binary_partition",
                b"invoke_one",
                b"reduce_update_async",
                b"wait_prior",
                b"block_tile_memory",
            )
        ),
        "cooperative-groups feature that HIP does not provide",
        "restructure with thread_block / tiled_partition, or guard with __HIP_PLATFORM_NVIDIA__",
        True,
        "word",
    ),
    "grid-sync": (
        (rb"this_grid\s*\(\s*\)\s*\.\s*sync\s*\(", rb"grid\.sync\s*\("),
        "grid-wide sync needs a cooperative launch and device support",
        "launch with hipLaunchCooperativeKernel and check hipDeviceAttributeCooperativeLaunch",
        False,
        "word",
    ),
}

# lane-math runs before warp-size-literal: a "% 32" is one hazard, not two.
_ORDER = ["lane-math", *(r for r in _RULES if r != "lane-math")]
# Rules about warps, lanes and cooperative groups only run on files with device code.
_DEVICE_RULES = frozenset(
    {
        "warp-size-literal",
        "lane-math",
        "warp-reduce-16",
        "ballot-32",
        "coop-groups",
        "grid-sync",
        "texture-fetch",
    }
)
_DEVICE_MARKERS = (b"__global__", b"__device__", b"__shared__", b"threadIdx")


_LITERAL = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_&%<>~")


def _needle(pattern: bytes) -> bytes:
    """The literal bytes a pattern starts with (a fast ``in`` test before running the regex): its leading
    literal bytes and escaped punctuation (``grid\\.sync``), up to the first class escape or group."""
    out = bytearray()
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c in _LITERAL:
            out.append(c)
            i += 1
        elif c == 0x5C and i + 1 < len(pattern) and pattern[i + 1] not in b"swbdSWBD":  # an escaped byte
            out.append(pattern[i + 1])
            i += 2
        else:
            break
    return bytes(out)


# (rule, pattern source, needle, spec); patterns are compiled on first use (re caches them), so start-up
# does not pay for the rules a run never needs.
_COMPILED = [(rule, pattern, _needle(pattern), _RULES[rule]) for rule in _ORDER for pattern in _RULES[rule][0]]
# what _candidates tries, per pattern: (index, whether it needs device code, needle, pattern)
_TRIES = [(i, rule in _DEVICE_RULES, needle, pattern) for i, (rule, pattern, needle, _spec) in enumerate(_COMPILED)]
# A line is "warp context" when it mentions thread/lane/warp indexing, shared memory or a shuffle.
# (compiled where used, through re's cache: most files never need them, and start-up time counts)
_CONTEXT = rb"threadIdx|blockDim|lane|[wW]arp|WARP|\btid\b|__shared__|__shfl|\bfor\s*\("
_CONTEXT_NO_LOOP = rb"threadIdx|blockDim|lane|[wW]arp|WARP|\btid\b|__shared__|__shfl"
_BALLOT_LHS = rb"(?:\b(?:unsigned(?:\s+int)?|int|uint32_t|int32_t|uint)\s+\w+\s*=|\b__(?:popc|ffs|clz|brev)\s*\()\s*\Z"
_IGNORE = rb"hipify:\s*ignore(?:\(([^)]*)\))?"
_WORD_BYTES = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_"  # regex \w, bytes
_IDC = frozenset(_WORD_BYTES) | frozenset(range(0x80, 0x100))
_BLANK = bytes(b if b == 0x0A else 0x20 for b in range(256))


def mask(data: bytes, spans: list[tuple[int, int]]) -> bytes:
    """``data`` with every span (comments, literals) blanked to spaces; newlines and offsets kept."""
    if not spans:
        return data
    parts: list[bytes] = []
    pos = 0
    for start, end in spans:
        parts.append(data[pos:start])
        parts.append(data[start:end].translate(_BLANK))
        pos = end
    parts.append(data[pos:])
    return b"".join(parts)


def silenced(data: bytes, offset: int, rule: str) -> bool:
    """Whether a ``hipify: ignore`` comment on the line of ``offset`` silences ``rule`` (also used for the
    translator's hazards: tools/hipify/tree.py)."""
    return _silenced(data, offset, rule)


def _silenced(data: bytes, offset: int, rule: str) -> bool:
    start = data.rfind(b"\n", 0, offset) + 1
    end = data.find(b"\n", offset)
    line = data[start : end if end >= 0 else len(data)]
    if b"hipify:" not in line:
        return False
    for m in re.finditer(_IGNORE, line):
        if m.group(1) is None:
            return True
        rules = {r.strip().decode("latin-1") for r in m.group(1).split(b",")}
        if rule in rules:
            return True
    return False


def _line(code: bytes, offset: int) -> tuple[int, bytes]:
    ls = code.rfind(b"\n", 0, offset) + 1
    le = code.find(b"\n", offset)
    return ls, code[ls : le if le >= 0 else len(code)]


def _candidates(code: bytes) -> tuple[bool, bool, list[tuple[int, int, int]]]:
    """(any ``hipify:`` marker?, __global__/__device__/__shared__?, matches as (rule index, start, end),
    grouped by rule in rule order; rules about device code only run in files that have some)."""
    device_file = any(map(code.__contains__, _DEVICE_MARKERS[:3]))  # (map: no generator frame per marker)
    device = device_file or _DEVICE_MARKERS[3] in code
    out: list[tuple[int, int, int]] = []
    for i, device_only, needle, pattern in _TRIES:  # (compiled by re where used)
        if (device_only and not device) or (needle and needle not in code):
            continue
        out += [(i, *m.span()) for m in re.finditer(pattern, code)]
    return b"hipify:" in code, device_file, out


def lint_bytes(data: bytes, spans: list[tuple[int, int]]) -> list[RawFinding]:
    """Hazards in one file. ``spans``: comments and literals (from the translator's scan), sorted.

    The patterns run on the raw bytes; a match that starts inside a comment or literal is dropped (cheaper
    than blanking them first: matches are few, comments many)."""
    code = data
    may_silence, device_file, matches = _candidates(code)
    starts = [a for a, _b in spans]

    def in_literal(offset: int) -> bool:
        i = bisect_right(starts, offset) - 1
        return i >= 0 and offset < spans[i][1]

    out: list[RawFinding] = []
    idc = _IDC
    lane_math_ends: set[int] = set()
    context = re.compile(_CONTEXT if device_file else _CONTEXT_NO_LOOP).search
    context_no_loop = re.compile(_CONTEXT_NO_LOOP).search
    for index, match_start, end in matches:
        start = match_start  # the rule checks may move it back (ballot, asm)
        rule, _pattern, _needle, (_p, reason, suggestion, blocking, check) = _COMPILED[index]
        if in_literal(start):
            continue
        if rule == "lane-math":
            lane_math_ends.add(end)
        elif rule == "warp-size-literal" and end in lane_math_ends:
            continue
        prev = code[start - 1] if start else 0x20
        if check == "word" and prev in idc:
            continue
        if check in ("ctx", "ctx-any"):
            if check == "ctx" and (prev in idc or prev == 0x2E):  # int32_t, 1.32
                continue
            ls, line = _line(code, start)
            if (context if check == "ctx" else context_no_loop)(line) is None:
                continue
        elif check == "ballot":
            if prev in idc:
                continue
            ls, line = _line(code, start)
            lhs = re.compile(_BALLOT_LHS).search(code, ls, start)
            if lhs is None:
                continue
            start = lhs.start()
        elif check == "asm":
            underscored = code[max(0, start - 2) : start] == b"__"
            if underscored:
                start -= 2
                prev = code[start - 1] if start else 0x20
            if prev in idc:
                continue
        if may_silence and _silenced(data, start, rule):
            continue
        text = code[start:end].decode("latin-1").strip()
        name = text if len(text) <= 60 else text[:57] + "..."
        out.append(RawFinding(start, name, "hazard", reason, suggestion, blocking, rule))
    out.sort(key=lambda f: f.offset)
    return out
