"""Byte-exact CUDA -> HIP translation of one file's contents.

The input is never decoded: one compiled ``bytes`` regex walks the file and stops only at comments,
string/character literals, ``#include`` directives and identifiers that may be CUDA names (the identifier
alternative is restricted to the prefixes that occur in the mapping database). Everything between those
tokens is copied verbatim, so no byte outside a translated identifier or include path can change, in any
encoding (Latin-1, invalid UTF-8, CRLF, BOM).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterable

from tools.errors import ToolError
from tools.hipify import cond, insert, masks, simd
from tools.hipify.downgrade import Downgrade, load_downgrades, rewrite_call
from tools.hipify.headers import table_row
from tools.hipify.mapping import Entry, MappingDatabase, Version, format_version
from tools.hipify.scope import load_macros
from tools.hipify.targets import Target, load_target

Edit = tuple[int, int, bytes]  # put bytes in place of data[start:end]
# a call whose kernel argument the HIP function takes as const void*: (output offset of the text that replaced the
# CUDA name, the name's input offset, that text, (the kernel argument's index, the fewest and most arguments))
_Cast = tuple[int, int, bytes, tuple[int, int, int]]


class _Lazy:
    """A bytes regex compiled on first use: Python's regex compiler is slow, and start-up time counts."""

    __slots__ = ("_flags", "_pattern", "_rx")

    def __init__(self, pattern: bytes, flags: int = 0) -> None:
        self._pattern = pattern
        self._flags = flags
        self._rx: re.Pattern[bytes] | None = None

    def __call__(self) -> re.Pattern[bytes]:
        rx = self._rx
        if rx is None:
            rx = self._rx = re.compile(self._pattern, self._flags)
        return rx


# Bytes that continue an identifier. Bytes >= 0x80 count as identifier bytes so that a CUDA name glued to
# a UTF-8 (or Latin-1) identifier character is never split.
_IDC = rb"A-Za-z0-9_\x80-\xff"

# Names that look like CUDA API names; reported when the database does not know them.
_CUDA_LOOKING = _Lazy(
    rb"(?:cuda[A-Z]\w*|cu[A-Z][a-z]\w*|cu(?:blas|rand|sparse|fft|solver|dnn|tensor)\w+"
    rb"|CU_[A-Z0-9_]+|CU(?:BLAS|RAND|SPARSE|FFT|SOLVER|DNN|DA_ERROR)_\w+|nvrtc[A-Z]\w*)\Z"
)

_BOM = b"\xef\xbb\xbf"


class RawFinding:
    """A finding at a byte offset of the input (turned into line/column by the tree pass)."""

    __slots__ = ("blocking", "kind", "name", "offset", "reason", "rule", "suggestion")

    def __init__(  # noqa: PLR0917 - built in hot loops; positional on purpose
        self, offset: int, name: str, kind: str, reason: str, suggestion: str, blocking: bool, rule: str = ""
    ) -> None:
        self.offset = offset  # byte offset in the input
        self.name = name
        self.kind = kind  # unsupported | version | unmapped | hazard | deprecated | error | note
        self.reason = reason
        self.suggestion = suggestion
        self.blocking = blocking
        self.rule = rule

    def __repr__(self) -> str:
        return f"RawFinding({self.offset}, {self.name!r}, {self.kind!r}, rule={self.rule!r})"


class Include:
    """An ``#include`` for the tree pass (a project header, or a mapped header the project may have itself):
    where its path sits in the *output* bytes."""

    __slots__ = ("angled", "in_offset", "mapped", "out_end", "out_start", "spelling")

    def __init__(  # noqa: PLR0917
        self, out_start: int, out_end: int, spelling: str, angled: bool, in_offset: int, mapped: bool = False
    ) -> None:
        self.out_start = out_start
        self.out_end = out_end
        self.spelling = spelling  # the path as written (Latin-1 decoded: lossless)
        self.angled = angled
        self.in_offset = in_offset
        self.mapped = mapped  # the output has the database's HIP header there (a project file of that name wins)

    def __repr__(self) -> str:
        return f"Include({self.spelling!r}, out={self.out_start}:{self.out_end})"


class FileResult:
    __slots__ = (
        "changed",
        "comment_spans",
        "cuda_changed",
        "data",
        "defines",
        "device",
        "directives",
        "facts",
        "findings",
        "includes",
        "simd_defined",
        "simd_used",
        "unresolved",
    )

    def __init__(  # noqa: PLR0917
        self,
        data: bytes,
        changed: bool,
        findings: list[RawFinding],
        includes: list[Include],
        defines: list[str],
        comment_spans: list[tuple[int, int]],
        facts: int = 0,
    ) -> None:
        self.data = data
        self.changed = changed
        self.findings = findings
        self.includes = includes
        self.defines = defines  # macro names #define'd in this file (project macros are not CUDA names)
        self.comment_spans = comment_spans  # comments and literals in the input (the lint skips them)
        self.facts = facts  # what the file uses and includes (tools/hipify/insert.py's bits), for the tree pass
        self.unresolved: list[str] = []  # lane-mask names defined neither here nor in the known project masks
        # whether the translation changed the file's CUDA content: anything but the renaming of CUDA
        # compiler-identification macros (__CUDACC__ -> __HIPCC__: data/macros.tsv); the tree pass names files by it
        self.cuda_changed = changed
        self.device = False  # it has __global__/__device__ code outside comments and literals (insert.has_device_code)
        self.directives: list[cond.Directive] = []  # its conditionals and #define/#undef lines (tools/hipify/scope.py)
        self.simd_used: list[str] = []  # the compat header's functions it uses (tools/hipify/simd.py) ...
        self.simd_defined: list[str] = []  # ... and those it defines itself


class _FileState:
    """What one file's pass collects besides the output."""

    __slots__ = (
        "defines",
        "device_hazards",
        "discarded",
        "facts",
        "findings",
        "includes",
        "simd_defined",
        "simd_used",
        "unresolved",
    )

    def __init__(self) -> None:
        self.findings: list[RawFinding] = []
        self.simd_used: set[bytes] = set()
        self.simd_defined: set[bytes] = set()
        self.includes: list[Include] = []
        self.defines: list[str] = []
        self.facts = 0
        self.discarded: list[tuple[int, bytes]] = []  # calls that discard a nodiscard result: offset, CUDA name
        self.device_hazards: list[RawFinding] = []  # device-only name hazards: blocking if the file has device code
        self.unresolved: set[bytes] = set()  # lane-mask names not defined in the file (masks.Mask.unresolved)


_FindingSpec = tuple[str, str, str, bool]  # (kind, reason, suggestion, blocking)
# a qualified namespace row (thrust::cuda -> thrust::hip) for its last component: (the qualifier's components, the
# new last component or None, the finding when the target has none)
_Qualified = tuple[tuple[bytes, ...], "bytes | None", "_FindingSpec | None"]


class _Action:
    __slots__ = (
        "compiler_id",
        "downgrade",
        "finding",
        "hazard",
        "kernel_arg",
        "namespace_only",
        "qualified",
        "replacement",
        "simd",
        "simple",
        "stmt",
        "sync",
    )

    def __init__(  # noqa: PLR0917
        self,
        replacement: bytes | None,
        finding: _FindingSpec | None,
        namespace_only: bool = False,
        downgrade: Downgrade | None = None,
        sync: bool = False,
        stmt: bool = False,
        *,
        kernel_arg: tuple[int, int, int] | None = None,
        hazard: tuple[str, bool] | None = None,
        qualified: tuple[_Qualified, ...] = (),
        simd: bool = False,
        compiler_id: bool = False,
    ) -> None:
        self.replacement = replacement  # None: leave the name
        self.finding = finding
        self.namespace_only = namespace_only
        self.downgrade = downgrade  # a call rewrite for an older HIP target (tried first)
        self.sync = sync  # a warp *_sync builtin (or __activemask) on a target that changes them (mask, macro)
        self.stmt = stmt  # returns the nodiscard error type: a call whose result is discarded is reported
        self.kernel_arg = kernel_arg  # the HIP function takes the kernel as const void*: (index, fewest, most args)
        self.hazard = hazard  # why the translation is not faithful everywhere (targets.tsv name-hazard)
        self.qualified = qualified  # (qualifier, new last component) of qualified namespace rows (thrust::cuda)
        self.simd = simd  # a function of the compat header (tools/hipify/simd.py): its use is recorded
        self.compiler_id = compiler_id  # a CUDA compiler-identification macro: renaming it is no CUDA content change
        # the replacement when nothing else is to be done (no finding, no context check, no downgrade)
        plain = (
            finding is None
            and not namespace_only
            and downgrade is None
            and not sync
            and not stmt
            and kernel_arg is None
            and hazard is None
            and not qualified
            and not compiler_id
        )
        self.simple = replacement if plain else None

    def but(self, **changes: object) -> _Action:
        """This action with some fields changed."""
        fields: dict[str, object] = {name: getattr(self, name) for name in self.__slots__ if name != "simple"}
        fields.update(changes)
        return _Action(**fields)  # type: ignore[arg-type]


_NO_ACTION = _Action(None, None)


def _trie(words: Iterable[bytes]) -> bytes:
    """A regex matching any of ``words`` (an empty word matches the empty string), as a trie."""
    tree: dict[int, set[bytes]] = {}
    ends = False
    for w in words:
        if not w:
            ends = True
            continue
        tree.setdefault(w[0], set()).add(w[1:])
    alts = [re.escape(bytes([c])) + _trie(rest) for c, rest in sorted(tree.items())]
    if not alts:
        return b""
    body = alts[0] if len(alts) == 1 and not ends else b"(?:" + b"|".join(alts) + b")"
    return body + b"?" if ends and len(alts) == 1 else (body if not ends else b"(?:" + b"|".join(alts) + b")?")


def _build_scanner_source(prefixes: Iterable[bytes], with_launch: bool) -> bytes:
    """One regex whose top-level alternatives each start with a different literal byte.

    That lets the regex engine skip with a byte-set search to the next possible token start and try a
    single alternative there, instead of trying every alternative at every offset (the difference between
    ~2 and >30 MB/s). Context that would need a look-behind (identifier boundary, start of line, digit
    separators, raw-string prefixes) is checked in Python at the few places the engine stops.
    Identifier alternatives have no group (``lastgroup is None``).
    """
    idc = rb"[" + _IDC + rb"]*"
    by_first: dict[int, list[bytes]] = {
        # "Unrolled" loops (a plain character class repeated, escapes in between): twice as fast in
        # Python's backtracking engine as per-character alternation. "\\" + CRLF continues a line.
        ord("/"): [
            rb"(?P<lc>/[^\n\\]*(?:\\(?:\r\n|.)[^\n\\]*)*)",
            rb"(?P<bc>\*[^*]*\*+(?:[^/*][^*]*\*+)*/|\*.*)",
        ],
        ord('"'): [rb"(?P<str>[^\"\\\n]*(?:\\(?:\r\n|.)[^\"\\\n]*)*\"?)"],
        ord("'"): [rb"(?P<chr>[^'\\\n]*(?:\\.[^'\\\n]*)*'?)"],
        ord("#"): [
            rb"(?P<inc>[ \t]*include(?:_next)?[ \t]*(?P<open>[<\"])(?P<path>[^>\"\r\n]*)[>\"])",
            # (the name after the keyword is looked at, not consumed: it may be a CUDA name to translate)
            rb"(?P<cond>[ \t]*(?P<ck>if|ifdef|ifndef|elif|elifdef|elifndef|else|endif|define|undef)\b"
            rb"(?=[ \t]*(?P<cn>[A-Za-z_][A-Za-z0-9_]*)|))",
        ],
        ord("R"): [rb"(?P<raw>\"(?P<delim>[^()\\ \t\r\n\"]{0,16})\(.*?\)(?P=delim)\")"],
    }
    if with_launch:
        by_first.setdefault(ord("<"), []).append(rb"(?P<launch><<)")
    tails: dict[int, set[bytes]] = {}
    for p in prefixes:
        tails.setdefault(p[0], set()).add(p[1:])
    for first, rests in tails.items():
        by_first.setdefault(first, []).append(_trie(rests) + idc)
    parts = []
    for first, alts in sorted(by_first.items()):
        head = re.escape(bytes([first]))
        parts.append(head + (alts[0] if len(alts) == 1 else b"(?:" + b"|".join(alts) + b")"))
    return b"|".join(parts)


# Short prefixes every CUDA name the scanner must see starts with (plus the few other names, whole).
# (Look-aheads after the prefix to skip "current" or "__global__" measured slower, not faster.)
_CORE_PREFIXES = (b"cu", b"CU", b"__", b"nv", b"NV", b"Cu")

_IDENT_NAME = r"[A-Za-z_][A-Za-z0-9_]+\Z"
_IDC_SET = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") | frozenset(range(0x80, 0x100))
_DIGITS = frozenset(b"0123456789")
_DEFINE = _Lazy(rb"\#[ \t]*define[ \t]+([A-Za-z_][A-Za-z0-9_]*)")
# CUDA-looking names the project defines itself (a helper "cudaCheck(...) { ... }", "struct cudaThing"), so
# that they are not reported as unmapped CUDA API names. Literal-led, so the scan is cheap.
_NOT_TYPES = frozenset(
    {
        b"return",
        b"case",
        b"else",
        b"goto",
        b"throw",
        b"sizeof",
        b"new",
        b"delete",
        b"co_return",
        b"co_yield",
        b"default",
        b"public",
        b"private",
        b"protected",
        b"do",
        b"and",
        b"or",
        b"not",
    }
)
_DECL_NEXT = frozenset(b"=;,)[{:(<")
_LITERAL_PREFIXES = (b"", b"u8", b"u", b"U", b"L")


def _token_start(data: bytes, end: int) -> int:
    """Start of the run of identifier bytes that ends at ``end``."""
    i = end
    while i > 0 and data[i - 1] in _IDC_SET:
        i -= 1
    return i


class Translator:
    """Translation rules for one database, target HIP version and option set (immutable, reusable)."""

    def __init__(
        self,
        db: MappingDatabase,
        hip_version: Version | None,
        *,
        translate_comments_and_strings: bool = False,
        report_unmapped: bool = True,
        launch: bool = False,
        project_masks: masks.ProjectMasks = (),
        void_discarded: bool = False,
    ) -> None:
        """``project_masks``: the constant lane masks the project's headers define (``masks.merge_header_masks``);
        ``void_discarded``: write ``(void)`` before calls that discard a [[nodiscard]] result (default: report them)."""
        self.db = db
        self.hip_version = hip_version
        self.translate_comments_and_strings = translate_comments_and_strings
        self.report_unmapped = report_unmapped
        self.void_discarded = void_discarded
        self._cache: dict[bytes, _Action] = {}
        self.target: Target = load_target(hip_version)
        # an included header -> the facts' bits of the runtime includes it provides (insert.has_include)
        self.runtime_include_bits: dict[bytes, int] = {}
        for i, row in enumerate(self.target.runtime_includes):
            for spelling in row.provided_by:
                self.runtime_include_bits[spelling] = self.runtime_include_bits.get(spelling, 0) | insert.has_include(i)
        self._qualified: dict[bytes, tuple[_Qualified, ...]] = {}  # filled by _derive_prefixes
        self.project_masks: masks.Known = masks.known_masks(project_masks)
        self._header_cache: dict[bytes, tuple[bytes | None, _FindingSpec | None]] = {}
        self.simd_names = simd.names()
        self.compiler_ids = frozenset(n.encode("latin-1") for n in load_macros().compiler_ids)
        # The names the scanner must stop on: they depend on the database, the target and the options.
        prefixes = self._derive_prefixes(db, hip_version)
        # A downgrade applies only where the (possibly user-overridden) entry is unavailable at the target.
        self.downgrades = {
            name: dg
            for name, dg in load_downgrades(hip_version).items()
            if (entry := db.lookup(dg.cuda_name)) is not None and not entry.available_in(hip_version)
        }
        self.launch = launch
        self.scanner = re.compile(_build_scanner_source(prefixes, with_launch=launch), re.S)
        self._ident = _Lazy(rb"(?<![" + _IDC + rb"])[A-Za-z_][" + _IDC + rb"]*")  # comments and strings

    def _derive_prefixes(self, db: MappingDatabase, hip_version: Version | None) -> set[bytes]:
        prefixes = set(_CORE_PREFIXES)
        core = ("cu", "CU", "__", "nv", "NV", "Cu")
        ident = re.compile(_IDENT_NAME).match
        for name in db.names():
            if "::" in name:
                self._add_qualified(name, prefixes)
                continue
            if name[:2] in core or not ident(name):
                continue  # covered already, or a header path
            cells = db.raw_cells(name)
            # cells: hip_name kind library supported hip_added hip_deprecated hip_removed ...
            if cells is not None and cells[0] == name and cells[3] == "1" and not cells[6]:
                added = [*cells[4].split("."), "0"]
                if hip_version is None or not added[0] or (int(added[0]), int(added[1])) <= hip_version:
                    continue  # identity and available: nothing to do, do not even stop on it
            # Other names are few: match them whole (so that e.g. "int" does not stop the scanner), and only
            # those that are renamed or blocking; a non-blocking note on a bare helper name like "umin"
            # (often the project's own function) is not worth slowing every file down.
            act = self._decide(name.encode("latin-1"))
            if act.replacement is not None or (act.finding is not None and act.finding[3]):
                prefixes.add(name.encode("latin-1"))
        return prefixes

    def _add_qualified(self, name: str, prefixes: set[bytes]) -> None:
        """A qualified namespace row (``thrust::cuda`` -> ``thrust::hip``): a rule for its last component."""
        entry = self.db.lookup(name)
        if entry is None or entry.kind != "namespace":
            return
        *qualifier, last = name.split("::")
        act = self._decide_entry(entry)
        new_last: bytes | None = None
        if act.replacement is not None:
            *hip_qualifier, hip_last = act.replacement.decode("latin-1").split("::")
            if hip_qualifier != qualifier or not hip_last:
                raise ToolError(
                    f"mapping {name} -> {entry.hip_name}: a qualified namespace row may rename only its last "
                    "component (the qualifiers must be the same)"
                )
            new_last = hip_last.encode("latin-1")
        rule: _Qualified = (tuple(q.encode("latin-1") for q in qualifier), new_last, act.finding)
        key = last.encode("latin-1")
        self._qualified[key] = (*self._qualified.get(key, ()), rule)
        prefixes.add(key)

    # -- per-name decision -------------------------------------------------------------------------
    def action(self, name: bytes) -> _Action:
        act = self._cache.get(name)
        if act is None:
            act = self._decide(name)
            dg = self.downgrades.get(name)
            usable = act.finding is None or act.finding[0] == "deprecated"
            if dg is not None:
                act = act.but(downgrade=dg)
            elif usable and name in masks.SYNC_NAMES and (self.target.mask64 or self.target.sync_define):
                act = act.but(sync=True)
            elif usable and act.replacement is not None and self._nodiscard(name, act.replacement):
                act = act.but(stmt=True)
            elif act.simple is not None and name in self.compiler_ids:
                act = act.but(finding=None, compiler_id=True)
            if usable and act.replacement is not None:
                target = self.target
                kernel_arg = target.kernel_args.get(act.replacement.decode("latin-1"))
                if kernel_arg is not None:
                    act = act.but(kernel_arg=kernel_arg)
                hazard = target.name_hazards.get(name.decode("latin-1"))
                if hazard is not None:
                    act = act.but(hazard=hazard)
            qualified = self._qualified.get(name)
            if qualified is not None:
                act = act.but(qualified=qualified)
            self._cache[name] = act
        return act

    def hip_name(self, name: str) -> str:
        """The name the translation writes for the identifier ``name`` (itself when it is left)."""
        act = self.action(name.encode("latin-1"))
        if act.replacement is None or act.namespace_only:
            return name
        return act.replacement.decode("latin-1")

    def undefined_in_hip(self, name: str) -> bool:
        """Whether ``name`` is a CUDA macro HIP does not define (the database: a ``define`` with no HIP name)."""
        entry = self.db.lookup(name)
        return entry is not None and entry.kind == "define" and not (entry.supported and entry.hip_name)

    def _nodiscard(self, name: bytes, replacement: bytes) -> bool:
        """Whether the HIP function ``name`` becomes returns the target's [[nodiscard]] error type."""
        target = self.target
        if target.nodiscard is None or not replacement.startswith(b"hip"):
            return False
        entry = self.db.lookup(name.decode("latin-1"))
        return (
            entry is not None
            and entry.kind == "function"
            and entry.library in ("runtime", "driver")
            and replacement.decode("latin-1") not in target.nodiscard_exempt
        )

    def _decide(self, raw: bytes) -> _Action:
        name = raw.decode("latin-1")
        if raw in self.simd_names:
            target = f"HIP {format_version(self.hip_version)}" if self.hip_version else "HIP"
            reason, suggestion = simd.family(raw).unsupported(name, target)
            return _Action(None, ("unsupported", reason, suggestion, True), simd=True)
        entry = self.db.lookup(name)
        if entry is None or entry.kind == "header":
            if self.report_unmapped and _CUDA_LOOKING().match(raw):
                return _Action(
                    None,
                    (
                        "unmapped",
                        "CUDA name not in the mapping database (HIPIFY has no entry for it)",
                        "check HIP's API for an equivalent and add it with --mappings FILE",
                        True,
                    ),
                )
            return _NO_ACTION
        return self._decide_entry(entry)

    def _decide_entry(self, e: Entry) -> _Action:
        ns = e.kind == "namespace"
        if ns and not e.supported:
            return _Action(
                None,
                (
                    "unsupported",
                    f"HIP has no namespace {e.cuda_name}::" + (f" ({e.section})" if e.section else ""),
                    "rewrite without it, or guard it with #ifndef __HIP_PLATFORM_AMD__",
                    True,
                ),
                ns,
            )
        if not e.supported or not e.hip_name:
            device_helper = e.library == "device" and not e.cuda_name.startswith("__")
            return _Action(
                None,
                (
                    "unsupported",
                    f"HIP has no equivalent of {e.cuda_name} ({e.library} API"
                    + (f", {e.section}" if e.section else "")
                    + ")",
                    "rewrite without it, guard it with #ifdef __HIP_PLATFORM_AMD__, or map it with --mappings FILE",
                    not device_helper,  # a bare device helper name may just be the project's own function
                ),
                ns,
            )
        v = self.hip_version
        if v is not None and e.hip_added is not None and e.hip_added[:2] > v[:2]:
            return _Action(
                None,
                (
                    "version",
                    f"{e.cuda_name} -> {e.hip_name} needs HIP >= {format_version(e.hip_added[:2])}"
                    f" (target {format_version(v)})",
                    f"raise --hip-version to {format_version(e.hip_added[:2])} or avoid {e.cuda_name}",
                    True,
                ),
                ns,
            )
        if e.hip_removed is not None and (v is None or e.hip_removed[:2] <= v[:2]):
            return _Action(
                None,
                (
                    "version",
                    f"{e.hip_name} was removed in HIP {format_version(e.hip_removed)}",
                    f"replace {e.cuda_name} with a current API",
                    True,
                ),
                ns,
            )
        repl = e.hip_name.encode("latin-1") if e.hip_name != e.cuda_name else None
        if e.hip_deprecated is not None and (v is None or e.hip_deprecated[:2] <= v[:2]):
            return _Action(
                repl,
                (
                    "deprecated",
                    f"{e.hip_name} is deprecated since HIP {format_version(e.hip_deprecated)}",
                    "prefer the replacement API",
                    False,
                ),
                ns,
            )
        return _Action(repl, None, ns) if repl is not None else _NO_ACTION

    def header_action(self, path: bytes) -> tuple[bytes | None, _FindingSpec | None]:
        """For an include path: (replacement path or b"" to drop the include, finding). Cached."""
        hit = self._header_cache.get(path)
        if hit is None:
            hit = self._header_cache[path] = self._decide_header(path)
        return hit

    def _decide_header(self, path: bytes) -> tuple[bytes | None, _FindingSpec | None]:
        name = path.decode("latin-1")
        by_target = self.target.headers.get(name)
        if by_target is not None:
            hip, lowest = by_target
            if hip:
                return hip.encode("latin-1"), None
            v = format_version(self.hip_version)
            since = f"HIP >= {format_version(lowest[:2])}" if lowest is not None else "a newer HIP"
            return None, (
                "version",
                f"<{name}>: HIP {v} has no counterpart (it comes with {since}; data/targets.tsv)",
                f"raise --hip-version to {format_version(lowest[:2])} or guard the include with #ifndef "
                "__HIP_PLATFORM_AMD__"
                if lowest is not None
                else "guard the include with #ifndef __HIP_PLATFORM_AMD__",
                True,
            )
        entry = self.db.header(name)
        if entry is not None and entry.hip_name == name:
            return None, None  # a header the project usually has itself (data/extra.tsv): left to the tree pass
        if entry is not None:
            if not entry.supported:
                return None, (
                    "unsupported",
                    f"HIP has no counterpart of header <{name}>",
                    "remove the include or guard it with #ifndef __HIP_PLATFORM_AMD__",
                    True,
                )
            return entry.hip_name.encode("latin-1"), None
        row = table_row(name)
        if row is not None:
            return None, (
                "hazard",
                row.reason(name, self.hip_version),
                f"{row.instead}; or guard the include and the code that needs it with #ifndef __HIP_PLATFORM_AMD__ "
                "(data/cuda_only_headers.tsv)",
                True,
            )
        return None, None

    # -- the file pass -----------------------------------------------------------------------------
    def translate(self, data: bytes) -> FileResult:
        """Translate one file's bytes. A UTF-8 byte-order mark is kept and not taken for an identifier."""
        if not data.startswith(_BOM):
            return self._translate(data)
        res = self._translate(data[3:])
        for f in res.findings:
            f.offset += 3
        res.data = _BOM + res.data
        res.includes = [
            Include(i.out_start + 3, i.out_end + 3, i.spelling, i.angled, i.in_offset + 3, i.mapped)
            for i in res.includes
        ]
        res.comment_spans = [(a + 3, b + 3) for a, b in res.comment_spans]
        return res

    def _translate(self, data: bytes) -> FileResult:
        out: list[bytes] = []
        # Length of out[:counted_items], extended only at includes and launches (amortised O(n): summing
        # all of `out` at each one made large files quadratic).
        counted_len = 0
        counted_items = 0
        # Output offsets (for includes and launches) are computed on demand: emitted(pos) is the output
        # length once everything before input offset ``pos`` is emitted (the hot path does no bookkeeping).
        pos = 0
        st = _FileState()
        spans: list[tuple[int, int]] = []
        launches: list[tuple[int, int]] = []  # (offset in output, offset in input) of each <<<
        casts: list[_Cast] = []  # calls whose kernel argument needs a cast (_finish)
        action = self.action
        cache = self._cache
        tcs = self.translate_comments_and_strings
        skip_until = 0  # input consumed by a downgrade rewrite (e.g. a dropped lane mask)
        cuda_edit = False  # an edit other than a compiler-identification macro's (see FileResult.cuda_changed)
        # the conditional and macro directives: where they start (their '#'), the keyword, the name after it
        directive_at: list[tuple[int, bytes, bytes | None]] = []
        idc = _IDC_SET
        scan_from = 0
        while scan_from >= 0:
            restart = -1
            for m in self.scanner.finditer(data, scan_from):
                kind = m.lastgroup
                if kind is None:  # a candidate identifier: the hot path
                    start, end = m.span()
                    if (start and data[start - 1] in idc) or start < skip_until:
                        continue  # inside a longer identifier (or a number like 0x1CU): not a name
                    name = m.group()
                    act = cache.get(name)
                    if act is None:
                        act = action(name)
                    if act is _NO_ACTION:
                        continue
                    simple = act.simple
                    if simple is not None:  # a plain rename: the common case
                        out.append(data[pos:start])
                        out.append(simple)
                        pos = end
                        cuda_edit = True
                        continue
                    edit = self._name_occurrence(data, start, end, act, st)
                    if edit is not None:
                        text, resume, consumed = edit
                        out.append(data[pos:start])
                        if act.kernel_arg is not None:  # its kernel argument is cast in _finish (rare)
                            counted_len += sum(map(len, out[counted_items:]))
                            counted_items = len(out)
                            casts.append((counted_len, start, text, act.kernel_arg))
                        out.append(text)
                        pos = resume
                        if consumed:
                            skip_until = resume
                        if not act.compiler_id:
                            cuda_edit = True
                    continue
                if kind in ("lc", "bc") and not tcs:  # comments: the next most common token
                    span = m.span()
                    if span[0] >= skip_until:
                        spans.append(span)
                    continue
                mstart = m.start()
                if mstart < skip_until:
                    continue
                if kind == "cond":  # a conditional or #define/#undef (tools/hipify/cond.py reads them)
                    line_start = data.rfind(b"\n", 0, mstart) + 1
                    if not data[line_start:mstart].strip(b" \t\r\f\v"):
                        directive_at.append((mstart, m.group("ck"), m.group("cn")))
                    continue
                if kind in ("lc", "bc"):
                    spans.append(m.span())
                    new = self._retranslated(m.group())
                    if new is not None:
                        out.append(data[pos:mstart])
                        out.append(new)
                        pos = m.end()
                        cuda_edit = True
                    continue
                if kind == "chr":
                    if mstart and data[mstart - 1] in idc and data[_token_start(data, mstart)] in _DIGITS:
                        restart = mstart + 1  # C++14 digit separator (1'000): not a character literal
                        break
                elif kind == "inc":
                    line_start = data.rfind(b"\n", 0, mstart) + 1
                    if data[line_start:mstart].strip(b" \t\r\f\v"):
                        continue  # a '#' that does not start a directive
                if kind in ("str", "raw", "chr"):
                    start, end = m.span()
                    if kind == "raw":
                        start = _token_start(data, start)
                    elif kind in ("str", "chr") and start and data[start - 1] in idc:
                        ts = _token_start(data, start)
                        if data[ts:start] in _LITERAL_PREFIXES:
                            start = ts  # u8"...", L'x': the prefix belongs to the literal
                    spans.append((start, end))
                    if tcs and kind != "chr":
                        new = self._retranslated(m.group())
                        if new is not None:  # the literal from its quote (or R): a prefix is kept
                            out.append(data[pos:mstart])
                            out.append(new)
                            pos = end
                            cuda_edit = True
                elif kind == "inc":
                    pstart, pend = m.span("path")
                    counted_len += sum(map(len, out[counted_items:]))
                    counted_items = len(out)
                    inc_edit = self._include_occurrence(
                        data,
                        mstart,
                        pstart,
                        pend,
                        m.group("open") == b"<",
                        counted_len + (pstart - pos),
                        st,
                    )
                    if inc_edit is not None:
                        estart, eend, text = inc_edit
                        out.append(data[pos:estart])
                        out.append(text)
                        pos = eend
                        cuda_edit = True
                elif kind == "launch":
                    counted_len += sum(map(len, out[counted_items:]))
                    counted_items = len(out)
                    launches.append((counted_len + (mstart - pos), mstart))
            scan_from = restart
        if pos == 0:
            result = None
        else:
            out.append(data[pos:])
            result = b"".join(out)
        return self._finish(data, result, st, spans, launches, casts, cuda_edit=cuda_edit, directive_at=directive_at)

    def _name_occurrence(
        self, data: bytes, start: int, end: int, act: _Action, st: _FileState
    ) -> tuple[bytes, int, bool] | None:
        """A name that is not a plain rename, at ``data[start:end]``: records its finding (or, for a name the
        project declares, the define) and returns (text, resume, consumed) to put ``text`` in place of
        ``data[start:resume]`` (consumed: the call's arguments were rewritten too: a dropped or widened lane
        mask), or None."""
        findings = st.findings
        if act.qualified or act.namespace_only:
            ns = self._namespace_occurrence(data, start, end, act, st)
            if ns is None or isinstance(ns, tuple):
                return ns
        if act.hazard is not None:
            findings.append(self._hazard_finding(data, start, end, act.hazard, st))
        if act.compiler_id and act.replacement is not None:
            return act.replacement, end, False
        if act.simd:
            name = data[start:end]
            if _defines_function(data, start, end):
                # the project's own (a hand port's compat header): not CUDA's; of a family of templates, only a
                # template is the same function (a non-template one is an overload beside the header's)
                if not simd.family(name).overloadable or _is_template(data, start):
                    st.simd_defined.add(name)
                return None
            st.simd_used.add(name)
            assert act.finding is not None
            fk, reason, sugg, blocking = act.finding
            rule = simd.family(name).rule
            findings.append(RawFinding(start, name.decode("latin-1"), fk, reason, sugg, blocking, rule))
            return None
        dg = act.downgrade
        if dg is not None:
            rewrite = rewrite_call(data, end, dg)
            if rewrite is not None:
                text, resume = rewrite
                findings.append(self._downgrade_finding(data, start, end, dg, st))
                return text, resume, True
        if act.sync:
            st.facts |= insert.USES_SYNC
            if self.target.mask64 is not None and data[start:end] in masks.MASKED:
                edit = self._mask_occurrence(data, start, end, act, st)
                if edit is not None:
                    return edit
        if act.stmt:
            if _maybe_statement(data, start) and self._discards(data, start, end, st) and self.void_discarded:
                assert act.replacement is not None
                return b"(void)" + act.replacement, end, False
            if act.finding is None and act.replacement is not None:
                return act.replacement, end, False
        if act.namespace_only and not _namespace_context(data, start, end):
            return None
        if act.finding is not None:
            fk, reason, sugg, blocking = act.finding
            if fk != "unmapped":
                findings.append(RawFinding(start, data[start:end].decode("latin-1"), fk, reason, sugg, blocking))
            elif _is_declaration(data, start, end):
                st.defines.append(data[start:end].decode("latin-1"))  # the project's own name (see tree pass)
            elif not _is_member(data, start):
                findings.append(RawFinding(start, data[start:end].decode("latin-1"), fk, reason, sugg, blocking))
        if act.replacement is not None:
            return act.replacement, end, False
        return None

    def _namespace_occurrence(
        self, data: bytes, start: int, end: int, act: _Action, st: _FileState
    ) -> tuple[bytes, int, bool] | bool | None:
        """A namespace name: a qualified row's rename (``thrust::cuda`` -> ``thrust::hip``), a top-level namespace
        (``cub::``, ``cuda::std``), or neither. Returns the edit, None (leave it), or True: go on as for other
        names (a top-level namespace HIP has under its own name: ``cub`` -> ``hipcub``)."""
        qualifier = _qualifier(data, start)
        for components, new_last, finding in act.qualified:
            if qualifier[len(qualifier) - len(components) :] == list(components) and len(qualifier) >= len(components):
                if new_last is not None:
                    return new_last, end, False
                if finding is not None:
                    shown = b"::".join((*components, data[start:end])).decode("latin-1")
                    st.findings.append(RawFinding(start, shown, *finding, rule="namespace"))
                return None
        if qualifier or not act.namespace_only:
            return None  # another namespace of that name (at::cuda, cv::cuda), or not a namespace use at all
        if not _namespace_context(data, start, end):
            return None
        if act.finding is not None and act.replacement is None:  # a namespace HIP lacks
            if _declares_namespace(data, start):
                st.defines.append(data[start:end].decode("latin-1"))  # the project's own (see the tree pass)
                return None
            fk, reason, sugg, blocking = act.finding
            shown = _qualified_name(data, start, end)
            st.findings.append(RawFinding(start, shown, fk, reason, sugg, blocking, "namespace"))
            return None
        return True

    def _hazard_finding(
        self, data: bytes, start: int, end: int, hazard: tuple[str, bool], st: _FileState
    ) -> RawFinding:
        """A name whose translation is not faithful on every GPU of the target (targets.tsv name-hazard): blocking;
        a device-only one in files with device code only."""
        why, device_only = hazard
        target = format_version(self.target.version) or "(newest)"
        finding = RawFinding(
            start,
            data[start:end].decode("latin-1"),
            "hazard",
            f"HIP {target}: {why}",
            "keep the translation for other GPUs and write the gfx942 path by hand (guard it with "
            "#if defined(__gfx942__)), or leave this code out of gfx942 builds"
            if device_only
            else "check the values this code can meet, or convert by hand",
            True,
            "name-hazard",
        )
        if device_only:
            st.device_hazards.append(finding)  # its blocking is decided by the whole file (_finish)
        return finding

    def _discards(self, data: bytes, start: int, end: int, st: _FileState) -> bool:
        """Whether the call at ``data[start:end]`` (where ``_maybe_statement`` holds) discards its result; if so
        it is recorded (one note per file: see _finish), and gets ``(void)`` with ``void_discarded``."""
        if _discarded_call(data, start, end):
            st.discarded.append((start, data[start:end]))
            return True
        return False

    def _downgrade_finding(self, data: bytes, start: int, end: int, dg: Downgrade, st: _FileState) -> RawFinding:
        """The finding of a downgrade: a dropped mask that named every lane is a note-worthy hazard, one that
        named some lanes or is computed at run time blocks (the mask-less form involves every active lane)."""
        mask = None
        if dg.action in ("drop-first-arg", "replace-call") and data[start:end] in masks.MASKED:
            span = masks.first_argument(data, end)
            if span is not None:
                mask = masks.classify(data, start, data[span[0] : span[1]], self.project_masks)
                if mask.unresolved:
                    st.unresolved.add(mask.unresolved)
        return _downgrade_finding(start, dg, mask)

    def _mask_occurrence(
        self, data: bytes, start: int, end: int, act: _Action, st: _FileState
    ) -> tuple[bytes, int, bool] | None:
        """A ``*_sync`` call for a target with 64-bit masks: a full-warp mask becomes the full-wavefront one (and
        ``__activemask()`` kept in 32 bits becomes ``__activemask()``); a partial or run-time 32-bit mask is a
        blocking finding; a 64-bit mask is left. Returns the edit, as ``_name_occurrence`` does, or None."""
        span = masks.first_argument(data, end)
        if span is None:
            return None
        a, b = span
        name = data[start:end].decode("latin-1")
        findings = st.findings
        mask = masks.classify(data, start, data[a:b], self.project_masks)
        if mask.unresolved:
            st.unresolved.add(mask.unresolved)
        target = f"HIP {format_version(self.target.version) or '(newest)'}"
        if mask.cls in (masks.FULL32, masks.ACTIVE32):
            if mask.cls == masks.FULL32 and masks.is_name(data[a:b]):  # the name stays: a macro, or a constant
                new = f"({data[a:b].decode('latin-1')} | {masks.UPPER_LANES})"  # that must stay used (-Wunused)
            elif mask.cls == masks.FULL32:
                new = self.target.mask64 or ""
            elif masks.is_name(data[a:b]):  # the variable stays used (-Wunused-variable), its 32 bits do not
                new = f"((void){data[a:b].decode('latin-1')}, __activemask())"
            else:
                new = "__activemask()"
            why = (
                "names the whole 32-lane warp"
                if mask.cls == masks.FULL32
                else "holds __activemask() in 32 bits (the lanes of the call, at the call)"
            )
            findings.append(
                RawFinding(
                    start,
                    name,
                    "note",
                    f"lane mask {mask.how} {why}: {target} takes 64-bit masks (lanes 32-63 of a CDNA wavefront) and "
                    f"checks that they name exactly the calling lanes, so it becomes {new}",
                    "the code's other 32-lane assumptions are reported by the lint (warp-size-literal, lane-math, "
                    "ballot-32, ...)",
                    False,
                    "sync-mask-widened",
                )
            )
            head = act.replacement if act.replacement is not None else data[start:end]
            return head + data[end:a] + new.encode("latin-1"), b, True
        if mask.cls in (masks.PARTIAL, masks.RUNTIME):
            what = (
                "names only some lanes of the 32-lane warp"
                if mask.cls == masks.PARTIAL
                else "is not a constant the translation can follow"
            )
            findings.append(
                RawFinding(
                    start,
                    name,
                    "hazard",
                    f"lane mask {mask.how}: it {what}; {target} takes a 64-bit mask that names exactly the calling "
                    "lanes of a wavefront (64 lanes on CDNA), so a 32-bit mask does not compile (static_assert) and "
                    "leaves lanes 32-63 out; which of them should join cannot be decided by a rule",
                    "compute the mask as a 64-bit value for the wavefront (unsigned long long from __activemask() or "
                    "__ballot_sync), or pass __activemask() when every calling lane takes part",
                    True,
                    "lane-mask-32",
                )
            )
        return None

    def _include_occurrence(  # noqa: PLR0917
        self,
        data: bytes,
        mstart: int,
        pstart: int,
        pend: int,
        angled: bool,
        out_pstart: int,
        st: _FileState,
    ) -> Edit | None:
        """An ``#include`` at ``mstart`` whose path is ``data[pstart:pend]`` (``out_pstart`` in the output):
        a mapped header is renamed, one HIP does not need is commented out, a project header is recorded
        for the tree pass. Returns (start, end, text) to put in place of ``data[start:end]``, or None."""
        findings = st.findings
        includes = st.includes
        path = data[pstart:pend]
        repl, finding = self.header_action(path)
        included = path if repl is None else repl
        if not st.facts & insert.SEEN_INCLUDE:
            st.facts |= insert.SEEN_INCLUDE
            if included == insert.RUNTIME_HEADER:
                st.facts |= insert.RUNTIME_FIRST
        if included == insert.RUNTIME_HEADER:
            st.facts |= insert.HAS_RUNTIME
        elif included == insert.RUNTIME_API_HEADER:
            st.facts |= insert.HAS_RUNTIME_API
        else:
            st.facts |= self.runtime_include_bits.get(included, 0)
        if repl is not None or finding is not None or self.db.header(path.decode("latin-1")) is not None:
            st.facts |= insert.INCLUDES_CUDA
        if finding is not None and finding[0] == "hazard" and not angled:
            row = table_row(path.decode("latin-1"))
            if row is not None and row.header.endswith("/"):
                finding = None  # "cuda/x.cuh": a directory of the project's more likely than CUDA's (<cuda/...>)
        compat: tuple[str, ...] = ()
        if finding is not None:
            fk, reason, sugg, blocking = finding
            rule = "cuda-only-header" if fk == "hazard" else ""
            findings.append(RawFinding(pstart, path.decode("latin-1"), fk, reason, sugg, blocking, rule))
            if rule:
                row = table_row(path.decode("latin-1"))
                compat = row.compat if row is not None else ()
        if compat:
            # the compat header provides it (the row's compat column): the tree pass includes that at the top
            # (and reports the finding as a note); the CUDA header itself does not exist for HIP
            st.simd_used.update(c.encode("latin-1") for c in compat)
            line_start = data.rfind(b"\n", 0, mstart) + 1
            directive = data[line_start : pend + 1].lstrip(b" \t")
            return line_start, pend + 1, f"// [hipify] provided by {simd.OUTPUT_NAME}: ".encode() + directive
        if repl is None:
            includes.append(Include(out_pstart, out_pstart + (pend - pstart), path.decode("latin-1"), angled, pstart))
            return None
        if repl:
            # a header of the project's own with this name (cuda-samples' helper_cuda.h, ...) wins: the tree pass
            # puts its path back when the spelling resolves to a source file
            macro = self.target.header_defines.get(repl.decode("latin-1"))
            if macro is not None:  # the macro the target's header needs first (HIPBLAS_V2), right before it
                line_start = data.rfind(b"\n", 0, mstart) + 1
                nl = data.find(b"\n", pend)
                eol = b"\r\n" if nl > 0 and data[nl - 1] == 0x0D else b"\n"
                guard = f"#ifndef {macro}  // [hipify] the API the translation writes needs it".encode()
                prefix = eol.join((guard, b"#define " + macro.encode(), b"#endif")) + eol
                findings.append(self._header_define_note(pstart, repl, macro))
                shifted = out_pstart + len(prefix)
                includes.append(Include(shifted, shifted + len(repl), path.decode("latin-1"), angled, pstart, True))
                return line_start, pend, prefix + data[line_start:pstart] + repl
            includes.append(Include(out_pstart, out_pstart + len(repl), path.decode("latin-1"), angled, pstart, True))
            return pstart, pend, repl
        # HIP needs no such header: comment the directive out
        line_start = data.rfind(b"\n", 0, mstart) + 1
        dend = pend + 1  # the closing > or "
        return line_start, dend, b"// [hipify] not needed with HIP: " + data[line_start:dend].lstrip(b" \t")

    def _header_define_note(self, offset: int, header: bytes, macro: str) -> RawFinding:
        target = format_version(self.target.version) or "(newest)"
        return RawFinding(
            offset,
            header.decode("latin-1"),
            "note",
            f"#define {macro} added before <{header.decode('latin-1')}>: HIP {target}'s header declares the API the "
            "translation writes only with it (data/targets.tsv: hipBLAS 2.x takes hipDataType, hipblasComputeType_t "
            "and hipComplex only with HIPBLAS_V2)",
            f"none needed; or build with -D{macro}",
            False,
            "header-define",
        )

    def _retranslated(self, text: bytes) -> bytes | None:
        """A comment or literal with its names translated (the option), or None when nothing changes."""
        new = self._ident().sub(self._sub_in_text, text)
        return new if new != text else None

    def _finish(  # noqa: PLR0917
        self,
        data: bytes,
        result: bytes | None,
        st: _FileState,
        spans: list[tuple[int, int]],
        launches: list[tuple[int, int]],
        casts: list[_Cast],
        *,
        cuda_edit: bool = True,
        directive_at: list[tuple[int, bytes, bytes | None]] | None = None,
    ) -> FileResult:
        findings = st.findings
        includes = st.includes
        defines = st.defines
        if self.report_unmapped:
            defines += [d.decode("latin-1") for d in _DEFINE().findall(data)]
        changed = result is not None
        out = data if result is None else result
        if casts:
            out, includes, launches, failed_casts = cast_kernel_arguments(out, casts, includes, launches)
            findings += [_cast_finding(data, in_off, why) for in_off, why in failed_casts]
        if launches:
            out, includes, failed = convert_launches(out, launches, includes, spans_out=None)
            for in_off in failed:
                findings.append(
                    RawFinding(
                        in_off,
                        "<<<",
                        "hazard",
                        "kernel launch not converted: could not parse it",
                        "convert it to hipLaunchKernelGGL by hand (or keep <<<>>>: HIP-Clang accepts it)",
                        False,
                        "launch-syntax",
                    )
                )
            changed = changed or len(failed) < len(launches)
            cuda_edit = cuda_edit or len(failed) < len(launches)
        if st.discarded:
            findings.append(self._discarded_note(data, st.discarded))
        facts = st.facts | insert.defines_and_lines(data, self.target.sync_define)
        fr = FileResult(out, changed, findings, includes, defines, spans, facts)
        fr.device = insert.has_device_code(data, spans)
        for f in st.device_hazards:
            f.blocking = fr.device
        fr.unresolved = sorted(n.decode("latin-1") for n in st.unresolved)
        fr.cuda_changed = changed and cuda_edit
        fr.directives = cond.directives(data, spans, directive_at)
        fr.simd_used = sorted(n.decode("latin-1") for n in st.simd_used)
        fr.simd_defined = sorted(n.decode("latin-1") for n in st.simd_defined)
        return fr

    def _discarded_note(self, data: bytes, calls: list[tuple[int, bytes]]) -> RawFinding:
        """One note for every call of the file that discards its hipError_t result, at the first one: left as
        written (the compiler's warning is HIP's check), or given (void) with ``void_discarded``."""
        pos = positions(data, [off for off, _ in calls])
        names = sorted({name.decode("latin-1") for _, name in calls})
        lines = ", ".join(str(pos[off][0]) for off, _ in calls[:20]) + (", ..." if len(calls) > 20 else "")
        shown = ", ".join(names[:6]) + (", ..." if len(names) > 6 else "")
        target = format_version(self.target.version) or "(newest)"
        kind = self.target.nodiscard
        many = len(calls) > 1
        where = f"({shown}; line{'s' if many else ''} {lines})"
        why = f"{kind} is [[nodiscard]] in HIP {target} (C++17)"
        if self.void_discarded:
            return RawFinding(
                calls[0][0],
                calls[0][1].decode("latin-1"),
                "note",
                f"{len(calls)} call{'s' if many else ''} whose {kind} result the CUDA code discards {where} got "
                f"(void): {why}, so an unchecked call warns (an error under -Werror)",
                "check the errors instead of discarding them",
                False,
                "nodiscard-void",
            )
        return RawFinding(
            calls[0][0],
            calls[0][1].decode("latin-1"),
            "note",
            f"{len(calls)} call{'s' if many else ''} discard{'' if many else 's'} {'their' if many else 'its'} {kind} "
            f"result {where}, left as written: {why}, so the compiler warns (-Wunused-result; an error under -Werror)",
            "check the errors (an unchecked error is a bug on CUDA too), or translate with --void-discarded to write "
            "(void) before such calls",
            False,
            "nodiscard-discarded",
        )

    def _sub_in_text(self, m: re.Match[bytes]) -> bytes:
        act = self.action(m.group())
        if act.replacement is None or act.namespace_only:
            return m.group()
        return act.replacement


def _cast_finding(data: bytes, offset: int, why: str) -> RawFinding:
    """A call whose kernel argument needs ``reinterpret_cast<const void*>`` the translation could not write."""
    end = offset
    while end < len(data) and data[end] in _IDC_SET:
        end += 1
    name = data[offset:end].decode("latin-1")
    return RawFinding(
        offset,
        name,
        "hazard",
        f"HIP's counterpart of {name} takes the kernel as const void* only (CUDA's runtime API also takes the kernel "
        f"itself, a template overload HIP lacks), but {why}: its kernel argument is left as it was",
        "write reinterpret_cast<const void*>(kernel) around the kernel argument",
        True,
        "kernel-cast",
    )


def _downgrade_finding(offset: int, dg: Downgrade, mask: masks.Mask | None = None) -> RawFinding:
    below = format_version(dg.below)
    replacement = dg.replacement.decode("latin-1")
    if mask is not None and mask.cls not in (masks.FULL32, masks.FULL64, masks.ACTIVE, masks.ACTIVE32):
        what = "names only some lanes" if mask.cls == masks.PARTIAL else "is not known before run time"
        return RawFinding(
            offset,
            dg.cuda_name,
            "hazard",
            f"HIP < {below} has no {dg.cuda_name}: rewritten to {replacement} without the lane mask, which involves "
            f"every active lane, but the mask {what} ({mask.how})",
            f"make the mask-less call correct for every active lane, or raise --hip-version to {below} to keep the "
            "mask",
            True,
            "lane-mask-32",
        )
    return RawFinding(
        offset,
        dg.cuda_name,
        "hazard",
        f"HIP < {below} has no {dg.cuda_name}: rewritten to {replacement}"
        + (" without the lane mask" if mask is not None else ""),
        f"correct only when every lane of the mask is active; raise --hip-version to {below} to keep the mask",
        False,
        "sync-mask-dropped",
    )


_DISCARD_WS = b" \t\r\n\f\v"
_WORD_BYTES = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")
_STMT_BEFORE = frozenset(b"\n\r;{}):/") | _WORD_BYTES


def _maybe_statement(data: bytes, start: int) -> bool:
    """The cheap test made before asking whether the call at ``start`` is a statement of its own: the byte
    before it on its line (blanks and a leading ``::`` skipped) may end what precedes a statement."""
    j = start
    while j > 0 and data[j - 1] in b" \t":
        j -= 1
    if j >= 2 and data[j - 2] == 0x3A and data[j - 1] == 0x3A:
        j -= 2
        while j > 0 and data[j - 1] in b" \t":
            j -= 1
    return j == 0 or data[j - 1] in _STMT_BEFORE


def _line_comment_at(line: bytes) -> int:
    """Where a ``//`` comment starts in ``line`` (outside string and character literals), or -1."""
    at = line.find(b"//")
    if at < 0:
        return -1
    if b'"' not in line[:at] and b"'" not in line[:at]:
        return at
    quote = 0
    i = 0
    n = len(line)
    while i < n:
        c = line[i]
        if quote:
            if c == 0x5C:
                i += 1
            elif c == quote:
                quote = 0
        elif c in b"\"'":
            quote = c
        elif c == 0x2F and i + 1 < n and line[i + 1] == 0x2F:
            return i
        i += 1
    return -1


def _prev_code(data: bytes, j: int) -> int:
    """The end of the code before ``j`` (comments and blanks skipped); 0 at the start of the file, -1 when a
    preprocessor line before ``j``'s own line comes first (a statement boundary)."""
    # the common cases first: code before it on its line, or a plain line of code before its line
    k = j
    while k and data[k - 1] in b" \t":
        k -= 1
    if k and data[k - 1] not in b"\n/":
        return k
    if k and data[k - 1] == 0x0A:
        ls = data.rfind(b"\n", 0, k - 1) + 1
        line = data[ls : k - 1].rstrip()
        if line and b"/" not in line and not line.lstrip().startswith(b"#"):
            return ls + len(line)
    own_line = data.rfind(b"\n", 0, j) + 1
    while True:
        while j > 0 and data[j - 1] in _DISCARD_WS:
            j -= 1
        if j == 0:
            return 0
        ls = data.rfind(b"\n", 0, j) + 1
        line = data[ls:j]
        if ls < own_line and line.lstrip().startswith(b"#"):
            return -1
        k = _line_comment_at(line)
        if k >= 0:
            j = ls + k
            continue
        if data[j - 2 : j] == b"*/":
            opening = data.rfind(b"/*", 0, j - 2)
            if opening >= 0:
                j = opening
                continue
        return j


_CALL_TOKENS = _Lazy(rb"[()\";']|//[^\n]*|/\*.*?(?:\*/|\Z)", re.S)


def _call_end(data: bytes, end: int) -> int:
    """After the name ending at ``end``: the offset just past its call's closing parenthesis, or -1."""
    n = len(data)
    i = end
    while i < n and data[i] in _DISCARD_WS:
        i += 1
    if i >= n or data[i] != 0x28:
        return -1
    depth = 0
    rx = _CALL_TOKENS()
    while True:
        m = rx.search(data, i)
        if m is None:
            return -1
        c = data[m.start()]
        i = m.end()
        if c == 0x28:
            depth += 1
        elif c == 0x29:
            depth -= 1
            if depth == 0:
                return i
        elif c in b"\"'" and m.end() - m.start() == 1:
            k = i
            while k < n and data[k] != c and data[k] != 0x0A:
                k += 2 if data[k] == 0x5C else 1
            i = k + 1
        elif c == 0x3B and depth == 1:
            return -1  # a ';' in the arguments: not a plain call


_SIMPLE_STATEMENT = _Lazy(rb"\s*\((?:[^()\"'/;]|\((?:[^()\"'/;]|\([^()\"'/;]*\))*\))*\)\s*;")


def _discarded_call(data: bytes, start: int, end: int) -> bool:
    """Whether the call of the name at ``data[start:end]`` is a statement of its own (its result discarded):
    ``name(...);`` after ``;``, ``{``, ``}``, ``else``, ``do``, a label, the ``)`` of an if/for/while, a
    preprocessor line or the start of the file (comments and a leading ``::`` aside)."""
    if _SIMPLE_STATEMENT().match(data, end) is None:  # the common case in one match; else, the whole way
        close = _call_end(data, end)
        if close < 0:
            return False
        n = len(data)
        k = close
        while True:
            while k < n and data[k] in _DISCARD_WS:
                k += 1
            if data[k : k + 2] == b"/*":
                c = data.find(b"*/", k + 2)
                if c < 0:
                    return False
                k = c + 2
                continue
            break
        if k >= n or data[k] != 0x3B:
            return False
    j = _prev_code(data, start)
    if j > 1 and data[j - 2 : j] == b"::":
        return False  # ::name(...): "(void)" cannot go between "::" and the name (kept as is: it warns)
    if j <= 0:
        return True
    c = data[j - 1]
    if c in b";{}":
        return True
    if c == 0x3A:  # case x: / default: / label:, not a ?: or a ::
        ls = data.rfind(b"\n", 0, j) + 1
        return data[j - 2 : j - 1] != b":" and b"?" not in data[ls:j]
    if c == 0x29:  # if (...) / for (...) / while (...), not a cast
        depth = 0
        i = j - 1
        while i >= 0:
            if data[i] == 0x29:
                depth += 1
            elif data[i] == 0x28:
                depth -= 1
                if depth == 0:
                    break
            i -= 1
        w = i
        while w > 0 and data[w - 1] in _DISCARD_WS:
            w -= 1
        ws = w
        while ws > 0 and data[ws - 1] in _WORD_BYTES:
            ws -= 1
        return data[ws:w] in (b"if", b"for", b"while")
    if c in _WORD_BYTES:
        ws = j
        while ws > 0 and data[ws - 1] in _WORD_BYTES:
            ws -= 1
        return data[ws:j] in (b"else", b"do")
    return False


def _is_declaration(data: bytes, start: int, end: int) -> bool:
    """Whether the name at ``start:end`` is declared here: right after a type and followed by one of
    ``= ; , ) [ { : ( <`` ("CUresult cuStatus = ...", "void cudaCheck(...)", "struct cudaThing {",
    "float cuGet<float>(int)"). Such project names are not CUDA API names."""
    nxt = data[end : end + 64].lstrip(b" \t\r\n")
    if not nxt or nxt[0] not in _DECL_NEXT or nxt[:2] in (b"==", b"::"):
        return False
    prev = _prev_token(data, max(0, start - 64), start)
    return prev is not None and prev not in _NOT_TYPES


def _defines_function(data: bytes, start: int, end: int) -> bool:
    """Whether the name at ``start:end`` is a function declared or defined here: a type before it, and after its
    parameter list a ``{`` (a definition) or, after a type that is a word, a ``;`` (a prototype). The type is not
    looked for in a ``//`` comment ending the line before (``x = 1;  // the last word\n  __stcs(p, v);`` is a call)."""
    lo, hi = max(0, start - 64), start
    nl = data.rfind(b"\n", lo, start)
    if nl >= 0 and not data[nl + 1 : start].strip():  # the name begins its line: the line before may end in a comment
        cut = data.find(b"//", data.rfind(b"\n", lo, nl) + 1, nl)
        if cut >= 0:
            hi = cut
    prev = _prev_token(data, lo, hi)
    if prev is None or prev in _NOT_TYPES:
        return False
    close = _call_end(data, end)
    if close < 0:
        return False
    after = data[close : close + 64].lstrip()
    if after[:1] == b"{" or after[:8].startswith((b"const", b"noexcept")):
        return True
    return after[:1] == b";" and prev[-1:] not in (b"&", b"*", b">")


def _is_template(data: bytes, start: int) -> bool:
    """Whether the declaration of the name at ``start`` is a template's: ``template`` in it, that is after the end of
    the statement, block or directive before it (a look back of at most 200 bytes)."""
    lo = max(0, start - 200)
    head = data[lo:start]
    cut = max(head.rfind(b";"), head.rfind(b"}"), head.rfind(b"{"), head.rfind(b"#"))
    return b"template" in head[cut + 1 :]


_WORD = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")


def _prev_token(data: bytes, lo: int, hi: int) -> bytes | None:
    """The token before a declared name: a type (an identifier, or a type ending in ``*``, ``&``, ``>``)
    ending ``data[lo:hi]`` before white space; ``None`` when there is none.

    Exactly the group of the regex ``([A-Za-z_][A-Za-z0-9_]*|[*&>])`` + white space + end, searched in the
    window, without the regex (whose search tries every offset of the window): the leftmost match is the
    identifier run (from its first non-digit) or the single ``*``/``&``/``>`` before the white space."""
    q = len(data[lo:hi].rstrip())  # the regex's white space and bytes.rstrip()'s are the same six bytes
    if q == 0:
        return None
    q += lo
    c = data[q - 1]
    if c in b"*&>":
        return data[q - 1 : q]
    if c not in _WORD:
        return None
    p = q - 1
    while p > lo and data[p - 1] in _WORD:
        p -= 1
    while p < q and data[p] in _DIGITS:
        p += 1
    return data[p:q] if p < q else None


def _is_member(data: bytes, start: int) -> bool:
    """Whether the name at ``start`` follows ``.`` or ``->`` (a member: never a CUDA API name)."""
    before = data[max(0, start - 8) : start].rstrip()
    return before.endswith((b".", b"->"))


def _word_before(data: bytes, j: int) -> tuple[bytes, int]:
    """The identifier ending at ``j`` (blanks before ``j`` skipped) and where it starts; b"" when there is none."""
    while j > 0 and data[j - 1] in b" \t\r\n":
        j -= 1
    i = j
    while i > 0 and data[i - 1] in _WORD_BYTES:
        i -= 1
    return data[i:j], i


def _qualifier(data: bytes, start: int) -> list[bytes]:
    """The namespaces qualifying the name at ``start``, outermost first: ``thrust::system::cuda`` -> [thrust,
    system]; a leading ``::`` (the global namespace) is no qualifier."""
    out: list[bytes] = []
    j = start
    while True:
        k = j
        while k > 0 and data[k - 1] in b" \t":
            k -= 1
        if data[k - 2 : k] != b"::" or k < 2:
            break
        word, j = _word_before(data, k - 2)
        if not word or word[0] in _DIGITS:
            break
        out.append(word)
    out.reverse()
    return out


def _declares_namespace(data: bytes, start: int) -> bool:
    """Whether the name at ``start`` is declared here: ``namespace cuda {`` or ``namespace cuda = ...`` (not
    ``using namespace cuda``)."""
    word, i = _word_before(data, start)
    return word == b"namespace" and _word_before(data, i)[0] != b"using"


def _qualified_name(data: bytes, start: int, end: int) -> str:
    """The name at ``start:end`` with up to two components after it: ``cuda::std::atomic``."""
    m = _QUALIFIED_TAIL().match(data, end)
    return (data[start:end] + (m.group().replace(b" ", b"") if m else b"")).decode("latin-1")


_QUALIFIED_TAIL = _Lazy(rb"(?:[ \t]*::[ \t]*[A-Za-z_][A-Za-z0-9_]*){1,2}")


def _namespace_context(data: bytes, start: int, end: int) -> bool:
    """``cub`` is rewritten only as a namespace: ``cub::``, ``namespace cub``, ``using namespace cub``."""
    after = data[end : end + 8].lstrip(b" \t")
    if after.startswith(b"::"):
        return True
    return data[max(0, start - 16) : start].rstrip().endswith(b"namespace")


def line_starts(data: bytes) -> list[int]:
    """Offsets where lines start (``\\n`` ends a line; CRLF works unchanged)."""
    starts = [0]
    find = data.find
    i = find(b"\n")
    while i >= 0:
        starts.append(i + 1)
        i = find(b"\n", i + 1)
    return starts


def positions(data: bytes, offsets: Iterable[int]) -> dict[int, tuple[int, int]]:
    """Byte offsets -> (line, column), both 1-based; columns count bytes (CRLF and CR-free alike)."""
    out: dict[int, tuple[int, int]] = {}
    line = 1
    last = 0
    count = data.count
    rfind = data.rfind
    for off in sorted(set(offsets)):
        line += count(b"\n", last, off)
        last = off
        out[off] = (line, off - (rfind(b"\n", 0, off) + 1) + 1)
    return out


_KERNEL_TAIL = _Lazy(rb"(?:::\s*)?[A-Za-z_][A-Za-z0-9_]*(?:\s*::\s*[A-Za-z_][A-Za-z0-9_]*)*\s*\Z")
_OPEN = {ord("("): ord(")"), ord("["): ord("]"), ord("{"): ord("}")}
_CLOSE = {v: k for k, v in _OPEN.items()}


def _match_back_angle(data: bytes, end: int) -> int:
    """``data[end-1]`` is ``>``: the index of the matching ``<`` (or -1)."""
    depth = 0
    i = end - 1
    while i >= 0:
        c = data[i]
        if c == ord(">"):
            depth += 1
        elif c == ord("<"):
            depth -= 1
            if depth == 0:
                return i
        elif c in (ord(";"), ord("{"), ord("}")):
            return -1
        i -= 1
    return -1


def _split_top(data: bytes, start: int, stop_at: bytes) -> tuple[list[tuple[int, int]], int] | None:
    """Split ``data[start:]`` at top-level commas until ``stop_at`` at depth 0.

    Returns (pieces, index of stop), or None when a ``;`` or an unbalanced bracket comes first."""
    depth = 0
    pieces: list[tuple[int, int]] = []
    piece_start = start
    i = start
    n = len(data)
    while i < n:
        if depth == 0 and data.startswith(stop_at, i):
            pieces.append((piece_start, i))
            return pieces, i
        c = data[i]
        if c in _OPEN:
            depth += 1
        elif c in _CLOSE:
            if depth == 0:
                return None
            depth -= 1
        elif c == ord(",") and depth == 0:
            pieces.append((piece_start, i))
            piece_start = i + 1
        elif c == ord(";") and depth == 0:
            return None
        elif c in (ord('"'), ord("'")):
            j = i + 1
            while j < n and data[j] != c:
                j += 2 if data[j] == ord("\\") else 1
            i = j
        i += 1
    return None


# a kernel argument that is a void-pointer cast already, or a null pointer: left as it is
_VOID_CAST = _Lazy(
    rb"(?:(?:reinterpret|static|const)_cast\s*<\s*(?:const\s+)?void\s*(?:const\s*)?\*\s*>"
    rb"|\(\s*(?:const\s+)?void\s*(?:const\s*)?\*\s*\))"
)
_NULL_ARGUMENT = frozenset({b"nullptr", b"NULL", b"0"})
KERNEL_CAST = b"reinterpret_cast<const void*>("
_ARG_WS = b" \t\r\n\\"


def call_arguments(data: bytes, i: int) -> list[tuple[int, int]] | None:
    """The arguments of the call whose name ends at ``i``, as spans from their first byte that is not blank to the
    end of their last token that is no comment (so text put after one never lands in a ``//`` comment); ``[]`` when
    no ``(`` follows (not a call) or the call has none; None when they cannot be parsed (unbalanced, a ``;`` first).

    A ``<`` right after an identifier at the call's top level opens a template argument list (``k<T, 4>``): its
    commas do not separate arguments. A misread comparison can only join arguments, which the caller's arity check
    reports."""
    n = len(data)
    while i < n and data[i] in _ARG_WS:
        i += 1
    if i >= n or data[i] != 0x28:
        return []
    depth = 0  # brackets inside the arguments
    angle = 0  # template argument lists at the top level
    spans: list[tuple[int, int]] = []
    arg_start = i + 1
    code_end = -1  # the end of the current argument's last token (-1: none yet)
    j = i + 1
    while j < n:
        c = data[j]
        if c in b"\"'":
            k = j + 1
            while k < n and data[k] != c and data[k] != 0x0A:
                k += 2 if data[k] == 0x5C else 1
            j = k + 1
            code_end = j
            continue
        if c == 0x2F and data[j + 1 : j + 2] == b"/":
            nl = data.find(b"\n", j)
            j = n if nl < 0 else nl
            continue
        if c == 0x2F and data[j + 1 : j + 2] == b"*":
            close = data.find(b"*/", j + 2)
            if close < 0:
                return None
            j = close + 2
            continue
        if c in b"([{":
            depth += 1
        elif c in b")]}":
            if depth == 0:
                if c != 0x29 or angle:
                    return None
                spans.append((arg_start, code_end))
                break
            depth -= 1
        elif c == 0x3B:
            return None
        elif depth == 0:
            if c == 0x3C and data[j + 1 : j + 2] not in (b"<", b"="):
                k = j
                while k > arg_start and data[k - 1] in b" \t":
                    k -= 1
                if k > arg_start and data[k - 1] in _WORD_BYTES and data[k - 1] not in _DIGITS:
                    angle += 1
            elif c == 0x3E and angle and data[j - 1 : j] != b"-":
                angle -= 1
            elif c == 0x2C and not angle:
                spans.append((arg_start, code_end))
                arg_start = j + 1
                code_end = -1
                j += 1
                continue
        if c not in _ARG_WS:
            code_end = j + 1
        j += 1
    else:
        return None
    out = []
    for first, last in spans:
        a = first
        while a < last and data[a] in _ARG_WS:
            a += 1
        out.append((a, max(a, last)))
    if len(out) == 1 and out[0][0] == out[0][1]:
        return []  # no arguments
    return out


def cast_kernel_arguments(
    data: bytes, casts: list[_Cast], includes: list[Include], launches: list[tuple[int, int]]
) -> tuple[bytes, list[Include], list[tuple[int, int]], list[tuple[int, str]]]:
    """Put ``reinterpret_cast<const void*>(...)`` around the kernel argument of each call in ``casts`` (HIP
    functions that take the kernel as ``const void*`` only), unless it is a void-pointer cast or a null pointer
    already. Returns the new bytes, the includes and launches moved by the insertions, and (input offset, why) for
    each call whose kernel argument could not be found (left as it was)."""
    inserts: list[tuple[int, bytes]] = []
    failed: list[tuple[int, str]] = []
    for at, in_off, text, (index, fewest, most) in casts:
        name = text[6:] if text.startswith(b"(void)") else text
        name_at = data.find(name, at, at + len(text))
        if name_at < 0:
            continue
        args = call_arguments(data, name_at + len(name))
        if args is None:
            failed.append((in_off, "its arguments could not be parsed"))
            continue
        if not args and data[name_at + len(name) :].lstrip(_ARG_WS)[:1] != b"(":
            continue  # not a call (a function pointer, a declaration's name)
        if not fewest <= len(args) <= most:
            wanted = f"{fewest}-{most}" if most > fewest else str(fewest)
            failed.append((in_off, f"the call has {len(args)} arguments where {wanted} were expected"))
            continue
        a, b = args[index]
        arg = data[a:b]
        if arg in _NULL_ARGUMENT or _VOID_CAST().match(arg):
            continue
        inserts += [(a, KERNEL_CAST), (b, b")")]
    if not inserts:
        return data, includes, launches, failed
    inserts.sort(key=lambda x: x[0])
    parts: list[bytes] = []
    pos = 0
    for off, text in inserts:
        parts.append(data[pos:off])
        parts.append(text)
        pos = off
    parts.append(data[pos:])
    offsets = [off for off, _ in inserts]
    sizes = [0]
    for _off, text in inserts:
        sizes.append(sizes[-1] + len(text))

    def moved(offset: int) -> int:
        """``offset`` in the new bytes: moved by every insertion at or before it."""
        return offset + sizes[bisect_right(offsets, offset)]

    new_includes = [
        Include(moved(i.out_start), moved(i.out_end), i.spelling, i.angled, i.in_offset, i.mapped) for i in includes
    ]
    new_launches = [(moved(out_off), in_off) for out_off, in_off in launches]
    return b"".join(parts), new_includes, new_launches, failed


def convert_launches(
    data: bytes, launches: list[tuple[int, int]], includes: list[Include], spans_out: None = None
) -> tuple[bytes, list[Include], list[int]]:
    """Rewrite ``k<<<g, b, s, st>>>(args)`` to ``hipLaunchKernelGGL(k, dim3(g), dim3(b), s, st, args)``.

    Templated kernels are parenthesised: ``hipLaunchKernelGGL((k<T, 4>), ...)``; namespace-qualified names
    are kept. Returns the new bytes, includes with shifted offsets, and the input offsets of launches that
    could not be parsed (left as they were).
    """
    edits: list[tuple[int, int, bytes]] = []
    failed: list[int] = []
    for at, in_off in launches:
        # kernel expression before <<<
        k_end = at
        while k_end > 0 and data[k_end - 1] in b" \t":
            k_end -= 1
        k_start = k_end
        templated = False
        if k_end > 0 and data[k_end - 1] == ord(">"):
            lt = _match_back_angle(data, k_end)
            if lt < 0:
                failed.append(in_off)
                continue
            k_start = lt
            templated = True
        m = _KERNEL_TAIL().search(data, max(0, k_start - 256), k_start)
        if m is None:
            failed.append(in_off)
            continue
        k_start = m.start()
        kernel = data[k_start:k_end].strip()
        cfg = _split_top(data, at + 3, b">>>")
        if cfg is None:
            failed.append(in_off)
            continue
        cfg_pieces, cfg_end = cfg
        j = cfg_end + 3
        while j < len(data) and data[j] in b" \t\r\n":
            j += 1
        if j >= len(data) or data[j] != ord("("):
            failed.append(in_off)
            continue
        args = _split_top(data, j + 1, b")")
        if args is None or len(cfg_pieces) < 2 or len(cfg_pieces) > 4:
            failed.append(in_off)
            continue
        _arg_pieces, args_end = args
        cfg_text = [data[a:b].strip() for a, b in cfg_pieces]
        while len(cfg_text) < 4:
            cfg_text.append(b"0")
        arg_text = data[j + 1 : args_end].strip()
        head = b"(" + kernel + b")" if templated else kernel
        call = (
            b"hipLaunchKernelGGL("
            + head
            + b", dim3("
            + cfg_text[0]
            + b"), dim3("
            + cfg_text[1]
            + b"), "
            + cfg_text[2]
            + b", "
            + cfg_text[3]
            + (b", " + arg_text if arg_text else b"")
            + b")"
        )
        if edits and edits[-1][1] > k_start:  # overlapping (nested) launch: leave it
            failed.append(in_off)
            continue
        edits.append((k_start, args_end + 1, call))
    if not edits:
        return data, includes, failed
    parts: list[bytes] = []
    pos = 0
    for start, end, repl in edits:
        parts.append(data[pos:start])
        parts.append(repl)
        pos = end
    parts.append(data[pos:])
    new_includes = []
    for inc in includes:
        shift = sum(len(r) - (e - s) for s, e, r in edits if e <= inc.out_start)
        new_includes.append(
            Include(inc.out_start + shift, inc.out_end + shift, inc.spelling, inc.angled, inc.in_offset, inc.mapped)
        )
    return b"".join(parts), new_includes, failed
