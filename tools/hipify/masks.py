"""The lane mask of a warp ``*_sync`` call: what it is, so the translation can widen it or say why it cannot.

CUDA's masks are 32-bit (a warp has 32 lanes). HIP >= 6.2 takes 64-bit masks only (its ``*_sync`` builtins
``static_assert`` that the mask is an 8-byte integer) and checks that every lane named by the mask calls the
builtin with the same mask; a CDNA wavefront has 64 lanes (RDNA: 32, where HIP ignores the mask's upper half).
So a mask that names the whole 32-lane warp means "the whole wavefront" and becomes the full 64-bit mask; a
mask naming part of the warp, or one computed at run time, cannot be widened by a rule and is reported.

``classify(data, call_start, mask, known)`` looks at the mask's text (bytes of one file) and, for a name, at its
``#define`` or its declaration before the call in the same file, else at ``known``: the constant masks the
project's headers define (``header_masks``). A name found nowhere is "computed at run time" and recorded
(``Mask.unresolved``): the tree pass then looks for it in the headers it translates and translates the file again
with what it found (see docs/hipify.md).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from functools import lru_cache


class _LazyRe:
    """A bytes regex compiled on first use (start-up time counts: most runs never see a lane mask)."""

    __slots__ = ("_args", "_rx")

    def __init__(self, pattern: bytes, flags: int = 0) -> None:
        self._args = (pattern, flags)
        self._rx: re.Pattern[bytes] | None = None

    def _get(self) -> re.Pattern[bytes]:
        if self._rx is None:
            self._rx = re.compile(*self._args)
        return self._rx

    def match(self, data: bytes, pos: int = 0) -> re.Match[bytes] | None:
        return self._get().match(data, pos)

    def fullmatch(self, data: bytes) -> re.Match[bytes] | None:
        return self._get().fullmatch(data)

    def finditer(self, data: bytes) -> Iterator[re.Match[bytes]]:
        return self._get().finditer(data)

    def sub(self, repl: bytes, data: bytes) -> bytes:
        return self._get().sub(repl, data)


# The CUDA builtins whose first parameter is the lane mask (CUDA C++ Programming Guide, warp functions).
MASKED = frozenset(
    {
        b"__shfl_sync",
        b"__shfl_up_sync",
        b"__shfl_down_sync",
        b"__shfl_xor_sync",
        b"__ballot_sync",
        b"__any_sync",
        b"__all_sync",
        b"__match_any_sync",
        b"__match_all_sync",
        b"__syncwarp",
        b"__reduce_add_sync",
        b"__reduce_min_sync",
        b"__reduce_max_sync",
        b"__reduce_and_sync",
        b"__reduce_or_sync",
        b"__reduce_xor_sync",
    }
)
#: every name HIP declares only with the warp-sync macro on HIP 6.2-6.x (amd_warp_sync_functions.h, and
#: __activemask in amd_warp_functions.h)
SYNC_NAMES = MASKED | {b"__activemask"}
# HIP builtins that return the 64-bit lane masks (amd_warp_functions.h, amd_warp_sync_functions.h)
_MASK64_CALLS = frozenset({b"__ballot", b"__ballot64", b"__ballot_sync", b"__match_any_sync", b"__match_all_sync"})

# classes
FULL32 = "full32"  # names all 32 lanes of a CUDA warp, in a 32-bit value (or 0xffffffff in a 64-bit one)
FULL64 = "full64"  # all ones in 64 bits: already the full wavefront
ACTIVE = "active"  # __activemask() (64-bit in HIP)
ACTIVE32 = "active32"  # __activemask() kept in a 32-bit variable
WIDE = "wide"  # a 64-bit value computed at run time (HIP's own mask type): compiles, its lanes are the code's
PARTIAL = "partial"  # a constant naming only some lanes
RUNTIME = "runtime"  # computed at run time, not visibly 64-bit

# integer types: (width, signed) on LP64 Linux
_TYPES: dict[bytes, tuple[int, bool]] = {}
for _name, _spec in (
    ((b"int", b"signed", b"signed int", b"int32_t", b"std::int32_t", b"short", b"short int"), (32, True)),
    (
        (b"unsigned", b"unsigned int", b"uint", b"uint32_t", b"std::uint32_t", b"__uint32_t", b"unsigned short"),
        (32, False),
    ),
    ((b"long", b"long int", b"long long", b"long long int", b"signed long", b"signed long long"), (64, True)),
    ((b"int64_t", b"std::int64_t", b"__int64_t", b"ptrdiff_t", b"intptr_t"), (64, True)),
    (
        (
            b"unsigned long",
            b"unsigned long int",
            b"unsigned long long",
            b"unsigned long long int",
            b"ulong",
            b"ulonglong",
            b"uint64_t",
            b"std::uint64_t",
            b"__uint64_t",
            b"size_t",
            b"std::size_t",
            b"uintptr_t",
        ),
        (64, False),
    ),
):
    for _n in _name:
        _TYPES[_n] = _spec
_QUALIFIERS = {
    b"const",
    b"constexpr",
    b"static",
    b"volatile",
    b"inline",
    b"__device__",
    b"__host__",
    b"__constant__",
    b"__shared__",
    b"__forceinline__",
    b"register",
}
_IDENT = _LazyRe(rb"(?:::\s*)?[A-Za-z_]\w*\Z")
_LITERAL = _LazyRe(rb"(0[xX][0-9a-fA-F']+|0[bB][01']+|[0-9][0-9']*)([uUlL]*)")
_CAST_C = _LazyRe(rb"\(\s*((?:(?:std::)?[A-Za-z_]\w*\s*)+)\)")
_CAST_CPP = _LazyRe(rb"static_cast\s*<\s*((?:(?:std::)?[A-Za-z_]\w*\s*)+)>\s*\(")
_CALL = _LazyRe(rb"([A-Za-z_]\w*)\s*\(")
_NAME = _LazyRe(rb"[A-Za-z_]\w*")
_IDC_BYTES = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") | frozenset(
    range(0x80, 0x100)
)
#: lanes 32-63: OR-ed into a full-warp mask held by a name, so the name stays (and stays used)
UPPER_LANES = "0xffffffff00000000ULL"
_WS = _LazyRe(rb"\s+")
_KEYWORDS_BEFORE_PAREN = (b"for", b"if", b"while", b"switch")
# words before a name that do not make it a declaration ("return mask;", "case X:", ...)
_NOT_TYPES = frozenset(
    {b"return", b"case", b"else", b"goto", b"throw", b"sizeof", b"new", b"delete", b"co_return", b"co_yield", b"do"}
)

Value = tuple[int, int, bool]  # (value as unsigned bits, width, signed)


def is_name(text: bytes) -> bool:
    """Whether ``text`` is one identifier (a mask held in a variable or macro)."""
    return re.fullmatch(rb"\s*[A-Za-z_]\w*\s*", text) is not None


def _norm_type(words: bytes) -> bytes:
    return _WS.sub(b" ", words.strip())


def int_type(words: bytes) -> tuple[int, bool] | None:
    """(width, signed) of the integer type spelled ``words`` (qualifiers allowed); None when unknown."""
    kept = [w for w in _norm_type(words).split(b" ") if w and w not in _QUALIFIERS]
    return _TYPES.get(b" ".join(kept))


def _convert(value: Value, width: int, signed: bool) -> Value:
    """C's conversion of ``value`` to an integer type of ``width`` bits (a signed value is sign-extended)."""
    v, w, s = value
    if width > w and s and (v >> (w - 1)) & 1:
        v |= ((1 << width) - 1) ^ ((1 << w) - 1)
    return v & ((1 << width) - 1), width, signed


class _Expr:
    """A tiny evaluator of integer constant expressions: literals, ( ), unary ~ - +, binary * + - << >> & ^ |,
    with C's literal types (LP64) and usual arithmetic conversions; None when the text is not such a constant."""

    #: the deepest nesting of parentheses and unary operators evaluated (deeper: not a constant, and never a
    #: RecursionError): far below Python's recursion limit (~8 frames a level)
    MAX_NESTING = 64

    def __init__(self, text: bytes, resolve: Callable[[bytes], Value | None] | None = None) -> None:
        self.toks = re.findall(
            rb"0[xX][0-9a-fA-F']+[uUlL]*|0[bB][01']+[uUlL]*|\d[\d']*[uUlL]*|[A-Za-z_]\w*|<<|>>|\S", text
        )
        self.i = 0
        self.nesting = 0
        self.resolve = resolve

    def parse(self) -> Value | None:
        try:
            value = self._level(0)
        except (ValueError, IndexError, RecursionError):
            return None
        return value if self.i == len(self.toks) else None

    def _peek(self) -> bytes:
        return self.toks[self.i] if self.i < len(self.toks) else b""

    _LEVELS = ((b"|",), (b"^",), (b"&",), (b"<<", b">>"), (b"+", b"-"), (b"*",))

    def _level(self, k: int) -> Value:
        if k == len(self._LEVELS):
            return self._unary()
        left = self._level(k + 1)
        while self._peek() in self._LEVELS[k]:
            op = self.toks[self.i]
            self.i += 1
            right = self._level(k + 1)
            if op in (b"<<", b">>"):
                width, signed = left[1], left[2]  # a shift has the left operand's type
            else:
                width = max(left[1], right[1])
                signed = left[2] and right[2] if left[1] == right[1] else (left if left[1] > right[1] else right)[2]
            a = _convert(left, width, signed)[0]
            b = right[0] if op in (b"<<", b">>") else _convert(right, width, signed)[0]
            if op == b"|":
                v = a | b
            elif op == b"^":
                v = a ^ b
            elif op == b"&":
                v = a & b
            elif op == b"<<":  # bits at or above width are masked off below: a count that big leaves none (and
                v = a << b if b < width else 0  # shifting by it would build a huge int: `x << (0 - 1)`, 2**64-1)
            elif op == b">>":
                v = a >> b
            elif op == b"+":
                v = a + b
            elif op == b"-":
                v = a - b
            else:
                v = a * b
            left = (v & ((1 << width) - 1), width, signed)
        return left

    def _unary(self) -> Value:
        self.nesting += 1
        if self.nesting > self.MAX_NESTING:
            raise ValueError("nested too deeply")
        value = self._unary_inner()
        self.nesting -= 1
        return value

    def _unary_inner(self) -> Value:
        tok = self._peek()
        if tok in (b"~", b"-", b"+"):
            self.i += 1
            v, width, signed = self._unary()
            mask = (1 << width) - 1
            if tok == b"~":
                return (~v) & mask, width, signed
            return ((-v) & mask if tok == b"-" else v), width, signed
        if tok == b"(":
            self.i += 1
            inner = self._level(0)
            if self._peek() != b")":
                raise ValueError("unbalanced")
            self.i += 1
            return inner
        m = _LITERAL.fullmatch(tok)
        if m is None:
            named = self.resolve(tok) if self.resolve is not None and _NAME.fullmatch(tok) else None
            if named is None:
                raise ValueError("not a constant")
            self.i += 1
            return named
        self.i += 1
        digits = m.group(1).replace(b"'", b"")
        suffix = m.group(2).lower()
        base = 16 if digits[:2] in (b"0x", b"0X") else 2 if digits[:2] in (b"0b", b"0B") else 10
        v = int(digits[2:] if base != 10 else digits, base)
        unsigned = b"u" in suffix
        # C's literal types on LP64 Linux: the first of int, unsigned int (not for decimals), long, unsigned long
        # that holds the value, starting at the suffix's type
        if b"l" not in suffix and v <= 0x7FFFFFFF:
            return v, 32, not unsigned
        if b"l" not in suffix and v <= 0xFFFFFFFF and (unsigned or base != 10):
            return v, 32, False
        return v & 0xFFFFFFFFFFFFFFFF, 64, not unsigned and v <= 0x7FFFFFFFFFFFFFFF


def _strip_parens(text: bytes) -> bytes:
    text = text.strip()
    while text.startswith(b"(") and text.endswith(b")") and _balanced_inside(text[1:-1]):
        text = text[1:-1].strip()
    return text


def _balanced_inside(text: bytes) -> bool:
    depth = 0
    for c in text:
        if c == 0x28:
            depth += 1
        elif c == 0x29:
            depth -= 1
            if depth < 0:
                return False
    return depth == 0


def _of_value(value: Value) -> str:
    v, width, _signed = value
    if width == 64 and v == 0xFFFFFFFFFFFFFFFF:
        return FULL64
    if v == 0xFFFFFFFF:
        return FULL32
    return PARTIAL


class Mask:
    """What a mask argument is: ``cls`` (one of the classes above), ``how`` (a short explanation for findings)."""

    __slots__ = ("cls", "how", "unresolved")

    def __init__(self, cls: str, how: str, unresolved: bytes = b"") -> None:
        self.cls = cls
        self.how = how
        self.unresolved = unresolved  # a name defined neither in the file nor in ``known`` (see the tree pass)

    def __repr__(self) -> str:
        return f"Mask({self.cls}, {self.how!r})"


def _casts(text: bytes) -> tuple[bytes, list[tuple[int, bool]]]:
    """``text`` without its leading casts, and the casts' types, outermost first."""
    casts: list[tuple[int, bool]] = []
    while True:
        m = _CAST_C.match(text)
        if m is not None and m.end() < len(text):
            spec = int_type(m.group(1))
            if spec is not None:
                casts.append(spec)
                text = _strip_parens(text[m.end() :])
                continue
        m = _CAST_CPP.match(text) or _CALL.match(text)  # static_cast<T>(x), and functional casts T(x)
        if m is not None and text.endswith(b")") and _balanced_inside(text[m.end() : -1]):
            spec = int_type(m.group(1))
            if spec is not None:
                casts.append(spec)
                text = _strip_parens(text[m.end() - 1 :])
                continue
        return text, casts


def constant(text: bytes, resolve: Callable[[bytes], Value | None] | None = None) -> Value | None:
    """The value of an integer constant expression (casts included; names through ``resolve``), or None."""
    inner, casts = _casts(_strip_parens(text))
    value = _Expr(inner, resolve).parse()
    if value is None:
        return None
    for width, signed in reversed(casts):
        value = _convert(value, width, signed)
    return value


Known = Mapping[bytes, tuple[str, Value]]  # the project headers' constant masks: name -> (how, value)
_NO_KNOWN: Known = {}


def _top_level_parts(text: bytes) -> list[bytes]:
    """``text`` split at its top-level commas (a comma expression's operands)."""
    parts: list[bytes] = []
    depth = 0
    start = 0
    for i, c in enumerate(text):
        if c in b"([{":
            depth += 1
        elif c in b")]}":
            depth -= 1
        elif c == 0x2C and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


@lru_cache(maxsize=1024)
def _literal_mask(text: bytes) -> Mask | None:
    """``classify`` of a mask made of literals only (no names: the context does not matter), memoised."""
    return classify_literal(text) if _NUMERIC_CAST.fullmatch(text) or text == b"__activemask()" else None


def classify_literal(text: bytes) -> Mask | None:
    value = constant(text)
    if value is None:
        return Mask(ACTIVE, "__activemask()") if text == b"__activemask()" else None
    shown = _WS.sub(b" ", _strip_parens(text)).decode("latin-1")
    cls = _of_value(value)
    return Mask(cls, f"{shown} = {value[0]:#x}" if cls == PARTIAL else shown)


def classify(data: bytes, call_start: int, mask: bytes, known: Known = _NO_KNOWN, depth: int = 0) -> Mask:
    """The class of ``mask`` (the argument's text) of a call at ``call_start`` of the file ``data``."""
    if depth == 0 and len(mask) < 64:
        hit = _literal_mask(mask)
        if hit is not None:
            return hit
    text = _strip_parens(mask)
    parts = _top_level_parts(text)
    if len(parts) > 1:  # a comma expression: its value is the last operand's ("((void)m, __activemask())")
        return classify(data, call_start, parts[-1], known, depth)
    shown = _WS.sub(b" ", text).decode("latin-1")
    hows: list[str] = []

    def resolve(name: bytes) -> Value | None:
        found = value_of(data, call_start, name, known, depth + 1)
        if found is None:
            return None
        hows.append(found[0])
        return found[1]

    value = constant(text, resolve)
    if value is not None:
        cls = _of_value(value)
        how = f"{shown} ({'; '.join(hows)})" if hows else shown
        return Mask(cls, f"{how} = {value[0]:#x}" if cls == PARTIAL else how)
    inner, casts = _casts(text)
    width = casts[0][0] if casts else None
    call = _CALL.match(inner)
    if call is not None and inner.endswith(b")") and _balanced_inside(inner[call.end() : -1]):
        name = call.group(1)
        if name == b"__activemask":
            return Mask(ACTIVE32 if width == 32 else ACTIVE, shown)
        if name in _MASK64_CALLS and width != 32:
            return Mask(WIDE, shown)
        return Mask(RUNTIME, f"{shown} is computed at run time")
    if _IDENT.match(inner) and depth < 4:
        found = _named(data, call_start, inner.lstrip(b": \t"), shown, known, depth)
        if found.unresolved:
            return found
        if width == 32 and found.cls in (ACTIVE, FULL64, WIDE):
            return Mask(ACTIVE32 if found.cls == ACTIVE else RUNTIME, f"{shown}: a 32-bit cast of {found.how}")
        return found
    return Mask(RUNTIME, f"{shown} is computed at run time")


def value_of(data: bytes, call_start: int, name: bytes, known: Known, depth: int) -> tuple[str, Value] | None:
    """The constant value of ``name`` at ``call_start``, with how it is defined: its #define, or a declaration
    before the call (the nearest) that is const or not assigned again, or a project header's constant."""
    if depth > 4:
        return None
    word = re.escape(name)

    def resolve(inner: bytes) -> Value | None:
        found = value_of(data, call_start, inner, known, depth + 1)
        return None if found is None else found[1]

    define = None
    for m in re.finditer(rb"^[ \t]*#[ \t]*define[ \t]+" + word + rb"[ \t]+([^\r\n]*)", data[:call_start], re.M):
        define = m
    if define is not None:
        body = define.group(1).split(b"//")[0].split(b"/*")[0].strip()
        value = constant(body, resolve) if body and not body.endswith(b"\\") else None
        text = _WS.sub(b" ", body).decode("latin-1")
        return None if value is None else (f"#define {name.decode('latin-1')} {text}", value)
    decl = _declaration(data, call_start, word)
    if decl is not None:
        spec = int_type(decl.words)
        tokens = _norm_type(decl.words).split(b" ")
        if spec is None or decl.after not in (b"=", b"{") or _is_parameter(data, decl):
            return None
        if not (b"const" in tokens or b"constexpr" in tokens) and _assigned(data, decl.end, call_start, word):
            return None
        init = _initializer(data, decl.end)
        value = constant(init, resolve)
        if value is None:
            return None
        how = f"{_norm_type(decl.words).decode('latin-1')} {name.decode('latin-1')} = "
        return how + _WS.sub(b" ", _strip_parens(init)).decode("latin-1"), _convert(value, *spec)
    hit = known.get(name)
    return None if hit is None else (f"{hit[0]}, in a project header", hit[1])


class _Decl:
    """A declaration found by ``_declaration``: its type ``words``, what follows the name (``after``), and where
    it starts (the type words) and ends (after ``after``)."""

    __slots__ = ("after", "end", "start", "words")

    def __init__(self, words: bytes, after: bytes, start: int, end: int) -> None:
        self.words = words
        self.after = after
        self.start = start
        self.end = end


_AFTER_NAME = _LazyRe(rb"\s*(=|\{|;|,|\))")
_TYPE_WORDS = _LazyRe(rb"[ \t]*(?:[A-Za-z_][\w:]*[ \t]+)+\Z")
_BOUNDARIES = (b"\n", b";", b"{", b"}", b"(", b",")


def _declaration(data: bytes, call_start: int, word: bytes) -> _Decl | None:
    """The nearest declaration of the name (``word``, escaped) before ``call_start``: type words, then the name,
    then ``=``, ``{``, ``;``, ``,`` or ``)``; the type words start after a line start or ``; { } ( ,``."""
    name = re.sub(rb"\\(.)", rb"\1", word)  # (re.escape undone: names are identifiers)
    n = len(name)
    decl = None
    find = data.find
    i = find(name, 0, call_start)
    while i >= 0:
        end = i + n
        if (i == 0 or data[i - 1] not in _IDC_BYTES) and (end >= len(data) or data[end] not in _IDC_BYTES):
            after = _AFTER_NAME.match(data, end)
            if after is not None:
                lo = max(data.rfind(b, max(0, i - 256), i) for b in _BOUNDARIES) + 1
                if lo == 0 and i > 256:
                    lo = i - 256
                words = data[lo:i]
                if _TYPE_WORDS.match(words):
                    split = words.split()
                    if int_type(words) is not None or (
                        after.group(1) in (b"=", b"{") and not _NOT_TYPES.intersection(split)
                    ):
                        decl = _Decl(words, after.group(1), lo, after.end())
        i = find(name, end, call_start)
    return decl


def _is_parameter(data: bytes, decl: _Decl) -> bool:
    """Whether the declaration follows ``(`` or ``,`` of a parameter list (not ``for (``/``if (``...)."""
    opener = data[decl.start - 1 : decl.start] if decl.start > 0 else b""
    before = data[max(0, decl.start - 64) : decl.start - 1].rstrip()
    return opener == b"," or (opener == b"(" and not before.endswith(_KEYWORDS_BEFORE_PAREN))


def _assigned(data: bytes, start: int, end: int, word: bytes) -> bool:
    """Whether the name is assigned (``=``, ``op=``, ``++``, ``--``) in ``data[start:end]``."""
    rest = data[start:end]
    before = rb"(?<![\w.>])" + word
    return (
        re.search(before + rb"\s*(?:[-+*/%&|^]|<<|>>)?=(?!=)", rest) is not None
        or re.search(rb"(?:\+\+|--)\s*" + word + rb"\b", rest) is not None
        or re.search(before + rb"\s*(?:\+\+|--)", rest) is not None
    )


def _named(data: bytes, call_start: int, name: bytes, shown: str, known: Known, depth: int) -> Mask:  # noqa: PLR0917
    """A mask given by a name that is not a constant: its #define, or its declaration before the call."""
    word = re.escape(name)
    define = None
    for m in re.finditer(rb"^[ \t]*#[ \t]*define[ \t]+" + word + rb"[ \t]+([^\r\n]*)", data[:call_start], re.M):
        define = m
    if define is not None:
        body = define.group(1).split(b"//")[0].split(b"/*")[0].strip()
        if body and not body.endswith(b"\\"):
            inner = classify(data, call_start, body, known, depth + 1)
            return Mask(inner.cls, f"{shown} (#define {shown} {_WS.sub(b' ', body).decode('latin-1')})")
    decl = _declaration(data, call_start, word)
    if decl is None:
        if name in known:
            return Mask(_of_value(known[name][1]), f"{shown} ({known[name][0]}, in a project header)")
        return Mask(RUNTIME, f"{shown} is defined neither in this file nor as a constant in a project header", name)
    words = decl.words
    spec = int_type(words)
    tokens = _norm_type(words).split(b" ")
    const = b"const" in tokens or b"constexpr" in tokens
    width = spec[0] if spec is not None else None
    if _is_parameter(data, decl):
        return _typed_runtime(shown, width, "a function parameter (its callers' values are not known here)")
    if decl.after in (b";", b",", b")"):
        return _typed_runtime(shown, width, "declared without a value and assigned at run time")
    init = _initializer(data, decl.end)
    if not const and _assigned(data, decl.end, call_start, word):
        return _typed_runtime(shown, width, "assigned again before the call")
    init_text = _WS.sub(b" ", _strip_parens(init)).decode("latin-1")
    decl_text = f"{_norm_type(words).decode('latin-1')} {shown} = {init_text}"
    inner = classify(data, call_start, init, known, depth + 1)
    if inner.cls == ACTIVE:
        if width == 32:
            return Mask(ACTIVE32, decl_text)
        if width == 64 or b"auto" in tokens:
            return Mask(ACTIVE, decl_text)
        return Mask(RUNTIME, f"{decl_text}: a type of unknown width")
    if inner.cls in (FULL32, FULL64, PARTIAL, ACTIVE32):
        return Mask(FULL32 if inner.cls == FULL64 and width == 32 else inner.cls, decl_text)
    if inner.cls == WIDE:
        if width == 32:
            return Mask(RUNTIME, f"{decl_text}: a 64-bit lane mask kept in 32 bits")
        return Mask(WIDE if width == 64 or b"auto" in tokens else RUNTIME, decl_text)
    return _typed_runtime(shown, width, f"{decl_text}, computed at run time")


def _typed_runtime(shown: str, width: int | None, why: str) -> Mask:
    return Mask(WIDE if width == 64 else RUNTIME, f"{shown} is {why}")


def _initializer(data: bytes, at: int) -> bytes:
    """The initializer after ``=``/``{`` at ``at``: up to the ``;``/``,``/``}`` that ends it at depth 0."""
    depth = 0
    i = at
    n = len(data)
    while i < n:
        c = data[i]
        if c in b"([{":
            depth += 1
        elif c in b")]}":
            if depth == 0:
                break
            depth -= 1
        elif c in b";," and depth == 0:
            break
        i += 1
    return data[at:i]


def first_argument(data: bytes, end: int) -> tuple[int, int] | None:
    """For a name ending at ``end``: the span of its call's first argument, stripped of blanks, or None when
    the name is not called with arguments (``__syncwarp()``, a function pointer, a template-id)."""
    i = end
    n = len(data)
    while i < n and data[i] in b" \t\r\n":
        i += 1
    if i >= n or data[i] != 0x28:
        return None
    depth = 0
    j = i + 1
    while j < n:
        c = data[j]
        if c in b"([{":
            depth += 1
        elif c in b")]}":
            if depth == 0:
                break
            depth -= 1
        elif c == 0x2C and depth == 0:
            break
        elif c in b"\"'":
            k = j + 1
            while k < n and data[k] != c and data[k] != 0x0A:
                k += 2 if data[k] == 0x5C else 1
            j = k
        elif c == 0x3B:
            return None
        j += 1
    if j >= n:
        return None
    a, b = i + 1, j
    while a < b and data[a] in b" \t\r\n":
        a += 1
    while b > a and data[b - 1] in b" \t\r\n":
        b -= 1
    return (a, b) if a < b else None


# what a constant integer expression made of literals can contain (a cheap test before evaluating one)
_NUMERIC = _LazyRe(rb"[\s()~+\-*|&^<>0-9a-fA-FxXuUlL']+")
_NUMERIC_CAST = _LazyRe(rb"(?:static_cast\s*<[\w\s:]+>|\(\s*[\w\s:]+\))?[\s()~+\-*|&^<>0-9a-fA-FxXuUlL']+")


@lru_cache(maxsize=4096)
def _literal_constant(text: bytes) -> Value | None:
    return constant(text)


# (\r? before the end: "$" under re.M is before "\n" only, and a CRLF header's lines end in "\r")
_HEADER_DEFINE = _LazyRe(rb"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)[ \t]+([^\r\n]+)\r?$", re.M)
_HEADER_CONST = _LazyRe(
    rb"^[ \t]*((?:(?:static|inline|__device__|__constant__|__host__)[ \t]+)*(?:constexpr|const)[ \t]+[^=;(){}\n]*?)"
    rb"[ \t]+([A-Za-z_]\w*)[ \t]*=[ \t]*([^;\n]+);",
    re.M,
)


def header_masks(data: bytes, wanted: frozenset[bytes]) -> dict[bytes, tuple[str, Value]]:
    """The integer constants among ``wanted`` a header defines (``#define`` and const/constexpr integers at line
    start): name -> (how, value)."""
    out: dict[bytes, tuple[str, Value]] = {}
    if not any(name in data for name in wanted):
        return out
    if b"define" in data:
        for m in _HEADER_DEFINE.finditer(data):
            if m.group(1) not in wanted:
                continue
            body = m.group(2).split(b"//")[0].split(b"/*")[0].strip()
            value = _literal_constant(body) if body and _NUMERIC.fullmatch(body) else None
            if value is not None:
                out[m.group(1)] = (f"#define {m.group(1).decode('latin-1')} {body.decode('latin-1')}", value)
    if b"const" in data:
        for m in _HEADER_CONST.finditer(data):
            if m.group(2) not in wanted:
                continue
            spec = int_type(m.group(1))
            init = m.group(3).strip()
            value = _literal_constant(init) if spec is not None and _NUMERIC_CAST.fullmatch(init) else None
            if value is not None and spec is not None:
                words = _norm_type(m.group(1)).decode("latin-1")
                init = _WS.sub(b" ", m.group(3).strip()).decode("latin-1")
                out[m.group(2)] = (f"{words} {m.group(2).decode('latin-1')} = {init}", _convert(value, *spec))
    return out


ProjectMasks = tuple[tuple[str, str, int, int, bool], ...]  # (name, how, value, width, signed), sorted


def merge_header_masks(tables: Iterable[dict[bytes, tuple[str, Value]]]) -> ProjectMasks:
    """One table for the project (sorted, hashable): a name defined with different values is left out (which one
    a file sees depends on its includes)."""
    merged: dict[bytes, tuple[str, Value]] = {}
    conflicting: set[bytes] = set()
    for table in tables:
        for name, (how, value) in table.items():
            old = merged.get(name)
            if old is not None and old[1] != value:
                conflicting.add(name)
            merged.setdefault(name, (how, value))
    return tuple(
        (name.decode("latin-1"), how, *value)
        for name, (how, value) in sorted(merged.items())
        if name not in conflicting
    )


def known_masks(table: ProjectMasks) -> Known:
    """``merge_header_masks``'s table as ``classify`` takes it."""
    return {name.encode("latin-1"): (how, (v, w, sgn)) for name, how, v, w, sgn in table}
