"""Portability hazards the mapping tables cannot see.

Runs over the code of a file with comments and literals blanked out (same offsets), so a rule never fires
inside a comment or string. Each rule has an id; a hazard is silenced on its line by a comment containing
``hipify: ignore`` (all rules) or ``hipify: ignore(rule-id, other-id)``.

Rules (see docs/hipify.md for the full text):

warp-size-literal     32 hard-coded as warp size: index math, shared-memory sizes, loop bounds, constants
lane-math             ``& 31``, ``% 32``, ``>> 5`` on thread/lane indices (assume 32 lanes)
warp-reduce-16        a shuffle reduction loop starting at offset 16 (covers only 32 lanes)
lane-mask-32          32-bit lane mask ``0xffffffff`` passed to ``*_sync`` intrinsics (HIP masks are 64-bit)
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

from tools.hipify.translate import RawFinding

MARKER = b"hipify: ignore"

# name -> (pattern, reason, suggestion, blocking, needs_context)
_RULES: dict[str, tuple[bytes, str, str, bool, bool]] = {
    "warp_size_literal": (
        rb"(?<![\w.])32(?:[uU]|[uU]?[lL]{1,2})?(?![\w.'])",
        "literal 32 used as the warp size; AMD CDNA GPUs run 64-lane wavefronts",
        "use warpSize (device code) or a constant from __AMDGCN_WAVEFRONT_SIZE / hipDeviceProp_t::warpSize",
        True,
        True,
    ),
    "lane_math": (
        rb"&\s*(?:31|0x1[fF])(?![\w.])|%\s*32(?![\w.])|>>\s*5(?![\w.])",
        "lane/warp index computed assuming 32 lanes (& 31, % 32, >> 5)",
        "use warpSize: lane = tid % warpSize, warp = tid / warpSize",
        True,
        True,
    ),
    "warp_reduce_16": (
        rb"\bfor\s*\([^;)]*=\s*16\s*;[^;]*;[^)]*(?:/=\s*2|>>=\s*1)",
        "shuffle-reduction loop starting at offset 16 reduces only 32 lanes",
        "start at warpSize / 2",
        True,
        False,
    ),
    "lane_mask_32": (
        rb"\b__\w+_sync\s*\(\s*(?:0[xX][fF]{8}[uU]?[lL]{0,2}|~0[uU]?)(?![\w])",
        "32-bit lane mask passed to a *_sync intrinsic; HIP lane masks are 64-bit",
        "pass __activemask() or a 64-bit mask (0xffffffffffffffffull)",
        True,
        False,
    ),
    "ballot_32": (
        rb"\b(?:unsigned(?:\s+int)?|int|uint32_t|int32_t|uint)\s+\w+\s*=\s*(?:__ballot(?:_sync)?|__activemask)\b"
        rb"|\b__(?:popc|ffs|clz|brev)\s*\(\s*(?:__ballot(?:_sync)?|__activemask)\b",
        "__ballot/__activemask return 64 bits on AMD; a 32-bit variable or __popc/__ffs drops half the lanes",
        "keep the result in uint64_t / unsigned long long and use __popcll / __ffsll",
        True,
        False,
    ),
    "inline_asm": (
        rb"\b(?:asm|__asm__|__asm)\s*(?:volatile\s*|__volatile__\s*)?\(",
        "inline assembly (PTX) cannot be translated",
        "replace with HIP intrinsics or guard with #ifdef __HIP_PLATFORM_NVIDIA__",
        True,
        False,
    ),
    "cuda_arch_compare": (
        rb"\b__CUDA_ARCH__\s*(?:[<>]=?|==|!=)\s*\d",
        "__CUDA_ARCH__ compared with a compute capability; AMD targets have no such number",
        "test features instead (e.g. __HIP_DEVICE_COMPILE__, __gfx90a__) or guard with __HIP_PLATFORM_AMD__",
        True,
        False,
    ),
    "texture_reference": (
        rb"\b(?:texture|surface)\s*<",
        "texture/surface references are not supported by HIP (removed in CUDA 12 too)",
        "use texture objects (hipTextureObject_t) or plain global-memory loads",
        True,
        False,
    ),
    "texture_fetch": (
        rb"\b(?:tex[123]D\w*|tex1Dfetch|texCubemap\w*|surf[123]D\w*|surfCubemap\w*)\s*(?:<[^;>()]*>\s*)?\(",
        "texture/surface fetch: HIP supports only part of these (formats, layered/cubemap variants)",
        "check the HIP texture API for this call, or use global-memory loads",
        False,
        False,
    ),
    "coop_groups": (
        rb"\b(?:this_cluster|cluster_group|memcpy_async|labeled_partition|binary_partition|invoke_one"
        rb"|reduce_update_async|wait_prior|block_tile_memory)\b",
        "cooperative-groups feature that HIP does not provide",
        "restructure with thread_block / tiled_partition, or guard with __HIP_PLATFORM_NVIDIA__",
        True,
        False,
    ),
    "grid_sync": (
        rb"\bthis_grid\s*\(\s*\)\s*\.\s*sync\s*\(|\bgrid\.sync\s*\(",
        "grid-wide sync needs a cooperative launch and device support",
        "launch with hipLaunchCooperativeKernel and check hipDeviceAttributeCooperativeLaunch",
        False,
        False,
    ),
}

_COMBINED = re.compile(b"|".join(b"(?P<" + k.encode() + b">" + v[0] + b")" for k, v in _RULES.items()))
# A line is "warp context" when it mentions thread/lane/warp indexing, shared memory or a shuffle.
_CONTEXT = re.compile(
    rb"threadIdx|blockDim|\blane\w*|\w*[wW]arp\w*|\w*WARP\w*|\btid\b|__shared__|__shfl|\bfor\s*\("
)
_LOOP = re.compile(rb"\bfor\s*\(")
_IGNORE = re.compile(rb"hipify:\s*ignore(?:\(([^)]*)\))?")
_DEVICE = re.compile(rb"__global__|__device__|__shared__")


def mask(data: bytes, spans: list[tuple[int, int]]) -> bytes:
    """``data`` with every span (comments, literals) blanked to spaces; newlines and offsets kept."""
    if not spans:
        return data
    parts: list[bytes] = []
    pos = 0
    for start, end in spans:
        parts.append(data[pos:start])
        chunk = data[start:end]
        parts.append(re.sub(rb"[^\n]", b" ", chunk) if b"\n" in chunk else b" " * (end - start))
        pos = end
    parts.append(data[pos:])
    return b"".join(parts)


def _silenced(data: bytes, offset: int, rule: str) -> bool:
    start = data.rfind(b"\n", 0, offset) + 1
    end = data.find(b"\n", offset)
    line = data[start : end if end >= 0 else len(data)]
    if MARKER not in line and b"hipify:" not in line:
        return False
    for m in _IGNORE.finditer(line):
        if m.group(1) is None:
            return True
        rules = {r.strip().decode("latin-1") for r in m.group(1).split(b",")}
        if rule in rules:
            return True
    return False


def lint_bytes(data: bytes, spans: list[tuple[int, int]]) -> list[RawFinding]:
    """Hazards in one file. ``spans``: comments and literals (from the translator's scan)."""
    code = mask(data, spans)
    device_file = _DEVICE.search(code) is not None
    out: list[RawFinding] = []
    for m in _COMBINED.finditer(code):
        key = m.lastgroup
        assert key is not None
        _pattern, reason, suggestion, blocking, needs_context = _RULES[key]
        start = m.start()
        if needs_context:
            ls = code.rfind(b"\n", 0, start) + 1
            le = code.find(b"\n", start)
            line = code[ls : le if le >= 0 else len(code)]
            ctx = _CONTEXT.search(line)
            if ctx is None:
                continue
            if key == "warp_size_literal" and not device_file:
                continue
            if key == "warp_size_literal" and _LOOP.match(ctx.group()) and not device_file:
                continue
        rule = key.replace("_", "-")
        if _silenced(data, start, rule):
            continue
        name = m.group().decode("latin-1").strip()
        if len(name) > 60:
            name = name[:57] + "..."
        out.append(RawFinding(start, name, "hazard", reason, suggestion, blocking, rule))
    return out
