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
inline-asm            inline PTX ``asm(...)`` (no translation exists; AMD GPU and CPU assembly and empty templates are
                      not PTX)
cuda-arch-compare     every comparison of ``__CUDA_ARCH__`` (with a number or a macro; in ``#if``/``#elif`` and in
                      code), named as written, with the branch HIP takes (``__HIP_DEVICE_COMPILE__`` is 1 in device
                      code)
texture-reference     ``texture<...>``/``surface<...>`` references (removed from HIP)
texture-fetch         texture/surface fetch functions (partial support in HIP; check each)
coop-groups           cooperative-groups features HIP lacks (clusters, memcpy_async, labeled partitions, ...)
grid-sync             ``this_grid().sync()`` needs a cooperative launch (hipLaunchCooperativeKernel)
cuda-only-header      a CUDA-only header (cuda/pipeline, cuda/barrier, ...), reported by the translator
"""

from __future__ import annotations

import re
from bisect import bisect_right

from tools.hipify import cond
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
                b"reduce_store_async",
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


# What a PTX template starts with: an instruction with a type or state suffix (mov.u32, ld.global, cp.async,
# bfind.u32), a directive (.reg), or one of the few PTX instructions without one; or it reads a PTX special register.
# AMD GPU assembly (v_, s_, ds_, buffer_, global_, flat_ ...: a HIP branch's) and CPU assembly (cpuid, fldcw,
# mtfsf, sethi: x86, PowerPC, SPARC, Alpha) are not PTX; nor is an empty template (a compiler barrier).
_TEMPLATE_HEAD = rb'\s*"((?:[^"\\]|\\.)*)"'
_FIRST_INSTRUCTION = r"(?:\s|\\[ntr]|[{;])*([.A-Za-z_][\w.]*)"
_PTX_WITHOUT_SUFFIX = frozenset({"trap", "exit", "brkpt", "ret", "pmevent", "membar"})
_PTX_REGISTERS = ("%%laneid", "%%lanemask", "%%warpid", "%%smid", "%%clock", "%%globaltimer", "%%tid", "%%ctaid")


def _ptx_template(code: bytes, end: int) -> bool:
    """Whether the asm statement whose ``(`` ends at ``end`` holds PTX (or may: a template that is not a string
    literal, a macro say, is taken to)."""
    m = re.match(_TEMPLATE_HEAD, code[end : end + 4096], re.S)
    if m is None:
        return True
    text = m.group(1).decode("latin-1")
    if any(r in text for r in _PTX_REGISTERS):
        return True
    first = re.match(_FIRST_INSTRUCTION, text)
    if first is None:
        return False  # an empty template: asm volatile("" ::: "memory")
    token = first.group(1)
    return "." in token or token in _PTX_WITHOUT_SUFFIX


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
            if prev in idc or not _ptx_template(code, end):
                continue
        if may_silence and _silenced(data, start, rule):
            continue
        text = code[start:end].decode("latin-1").strip()
        name = text if len(text) <= 60 else text[:57] + "..."
        out.append(RawFinding(start, name, "hazard", reason, suggestion, blocking, rule))
    if b"__CUDA_ARCH__" in code:
        out += [
            f
            for f in arch_comparisons(data, spans, in_literal)
            if not (may_silence and _silenced(data, f.offset, f.rule))
        ]
    out.sort(key=lambda f: f.offset)
    return out


# -- __CUDA_ARCH__ comparisons ------------------------------------------------------------------------------------
ARCH = "__CUDA_ARCH__"
ARCH_RULE = "cuda-arch-compare"
_HIP_ARCH = "__HIP_DEVICE_COMPILE__"
_OP = rb"(?:<=|>=|==|!=|<(?![<=])|>(?![>=]))"
_OPERAND = rb"(?:[A-Za-z_]\w*(?:\s*::\s*[A-Za-z_]\w*)*|\d[\w']*|\([^()\n]*\))"
_AFTER = rb"\s*" + _OP + rb"\s*" + _OPERAND  # __CUDA_ARCH__ >= 800
_BEFORE = rb"(?<![\w<>])" + _OPERAND + rb"\s*" + _OP + rb"\s*\Z"  # 800 <= __CUDA_ARCH__
_ARCH_SUGGESTION = (
    "decide the AMD path explicitly: before this test, a branch for AMD (#if defined(__HIP_PLATFORM_AMD__), or per "
    "target: defined(__gfx942__) ...) that selects the code AMD GPUs should run"
)


def _arch_in(node: cond.Node) -> bool:
    """Whether ``__CUDA_ARCH__`` is a value in ``node`` (not under defined(), not inside another comparison)."""
    op = node[0]
    if op == "id":
        return node[3] == ARCH
    if op in ("num", "defined", "call") or op in cond.COMPARISONS:
        return False
    return any(_arch_in(c) for c in node[3:] if isinstance(c, tuple))


def arch_comparisons_of(node: cond.Node) -> list[cond.Node]:
    """The comparisons in a condition that have ``__CUDA_ARCH__`` on one side, innermost first-come."""
    out: list[cond.Node] = []
    if node[0] in cond.COMPARISONS and any(_arch_in(c) for c in node[3:5] if isinstance(c, tuple)):
        out.append(node)
    for child in node[3:]:
        if isinstance(child, tuple):
            out += arch_comparisons_of(child)
    return out


def _device(name: str) -> cond.Value | None:
    return 1 if name == ARCH else None


def _host(name: str) -> cond.Value | None:
    return cond.UNDEF if name == ARCH else None


def _other_side(node: cond.Node, text: str) -> tuple[str, list[str]]:
    """The comparison's other operand as written, and the macro names in it."""
    left, right = node[3], node[4]
    assert isinstance(left, tuple) and isinstance(right, tuple)
    other = right if _arch_in(left) else left
    return " ".join(text[int(str(other[1])) : int(str(other[2]))].split()), [n for n in cond.names(other) if n != ARCH]


def arch_reason(expr: str, node: cond.Node | None, text: str, whole: cond.Node | None, directive: str) -> str:
    """What HIP makes of the comparison ``expr`` (its node in the condition ``text``; ``whole``: the condition of
    the ``#if``/``#elif``, None in code)."""
    hip_expr = expr.replace(ARCH, _HIP_ARCH)
    head = f"{expr} becomes {hip_expr}, which HIP-Clang defines as 1 in device code and leaves undefined on the host"
    if node is None:
        return head + " (in code: a device-only test, as with CUDA)"
    value = cond.evaluate(node, _device)
    other, macros = _other_side(node, text)
    host = cond.evaluate(node, _host)
    host_text = "" if host is None else f" (on the host, as with CUDA, it is {'true' if host else 'false'})"
    if value is None:
        which = ", ".join(macros) or other
        part = (
            f": in device code HIP compares 1 against {other}, so it depends on {which} (a compute capability such "
            f"as 700 there makes it false on every AMD GPU){host_text}"
        )
    else:
        part = (
            f": in device code it is {hip_expr.replace(_HIP_ARCH, '1')}, {'true' if value else 'false'} for every AMD "
            f"GPU{host_text}"
        )
    if whole is None:
        return head + part
    taken = cond.evaluate(whole, _device)
    if taken is None:
        rest = sorted({n for n in cond.names(whole) if n != ARCH})
        verdict = f"whether HIP takes this {directive}'s branch in device code depends on {', '.join(rest)}"
    else:
        verdict = f"HIP {'takes' if taken else 'skips'} this {directive}'s branch in device code"
    return f"{head}{part}; {verdict}"


def arch_comparisons(data: bytes, spans: list[tuple[int, int]], in_literal: object = None) -> list[RawFinding]:
    """Every comparison of ``__CUDA_ARCH__``: in ``#if``/``#elif`` conditions (read as expressions, so the whole
    comparison is named: ``__CUDA_ARCH__ >= GGML_CUDA_CC_VOLTA``, ``__CUDA_ARCH__ != 610``) and in code
    (``if constexpr (__CUDA_ARCH__ >= 800)``)."""
    out: list[RawFinding] = []
    directive_lines: list[tuple[int, int]] = []  # (start, end) offsets of the conditions read here
    for _line, at, text in cond.conditions(data, spans):
        directive_lines.append((at, at + len(text)))
        if ARCH not in text:
            continue
        kind = "#elif" if data[data.rfind(b"#", 0, at) : at].lstrip(b"# \t").startswith(b"elif") else "#if"
        whole = cond.parse(text)
        if whole is None:
            continue
        for node in arch_comparisons_of(whole):
            start, end = int(str(node[1])), int(str(node[2]))
            expr = " ".join(text[start:end].split())
            out.append(
                RawFinding(
                    at + start + (len(text[start:end]) - len(text[start:end].lstrip())),
                    expr if len(expr) <= 120 else expr[:117] + "...",
                    "hazard",
                    arch_reason(expr, node, text, whole, kind),
                    _ARCH_SUGGESTION,
                    True,
                    ARCH_RULE,
                )
            )
    starts = [a for a, _b in spans]
    at = data.find(b"__CUDA_ARCH__")
    while at >= 0:
        here, name_end = at, at + 13
        at = data.find(b"__CUDA_ARCH__", name_end)
        if any(a <= here < b for a, b in directive_lines) or (here and data[here - 1] in _IDC):
            continue
        k = bisect_right(starts, here) - 1
        if (k >= 0 and here < spans[k][1]) or (name_end < len(data) and data[name_end] in _IDC):
            continue
        after = re.compile(_AFTER).match(data, name_end)
        window = data[max(0, here - 80) : here]
        before = None if after else re.compile(_BEFORE).search(window)
        if after is not None:
            start, end = here, after.end()
        elif before is not None:
            start, end = here - len(window) + before.start(), name_end
        else:
            continue
        expr = " ".join(data[start:end].decode("latin-1").split())
        parsed = cond.parse(expr)
        reason = (
            arch_reason(expr, parsed, expr, None, "") if parsed is not None else arch_reason(expr, None, "", None, "")
        )
        out.append(RawFinding(start, expr, "hazard", reason, _ARCH_SUGGESTION, True, ARCH_RULE))
    return out
