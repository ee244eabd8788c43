"""Why a translation unit does not compile with HIP-Clang: the root error, classified.

A failed ROCm compile is reduced to its first error (clang's first error is the root one: later ones follow
from it), whose message is matched against ``data/diagnostics.tsv``; the row's handler then examines the
message's subject (a header, a name, a member, a call) against what is known about it:

- the mapping database (tools/hipify: HIPIFY's tables, which say which CUDA names HIP lacks),
- ``data/headers.tsv`` (which ROCm or third-party package provides a header) and hipify's table of CUDA headers
  with no HIP counterpart (tools/hipify/headers.py: the one table hipify's finding comes from too),
- the names HIP's own headers declare (the ROCm root's ``include/hip``),
- the project: which files include the unit, where a name is defined, under which ``#if``.

The result is a ``Cause``: one of ``CLASSES``, the subject, a one-sentence reason and a fix, and the
error it was read from. ``other`` keeps the first error line with its position; every other class is an
explanation. ``port``/``check`` turn each cause into a blocking finding on its unit; bench/port_quality.py
counts them per engine.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from tools.errors import ToolError
from tools.hipify.headers import by_path, cuda_only_header
from tools.hipify.mapping import Entry, MappingDatabase, format_version
from tools.port.linemap import LineMap

DATA_DIR = Path(__file__).resolve().parent / "data"

#: class id -> what it means (report order)
CLASSES: Mapping[str, str] = {
    "missing-header": "missing header (the package that provides it is named)",
    "not-standalone": "not a standalone unit (a fragment meant to be #included, or it needs its includer's names)",
    "untranslated": "a CUDA name left untranslated",
    "hip-lacks": "an API HIP lacks (or has with another signature, or not on this target)",
    "missing-include": "the header that declares the name is not included (HIP's runtime, or one the translation lost)",
    "hip-conflict": "the code clashes with HIP's own definitions",
    "compiler-dialect": "C++ that nvcc accepts and HIP-Clang rejects (a language extension)",
    "other": "other (the first error is shown)",
}
#: the classes that explain a failure ("other" only shows it)
EXPLAINED = frozenset(c for c in CLASSES if c != "other")

_DIAG_LINE = re.compile(
    r"^(?P<file>[^\s:][^:\n]*):(?P<line>\d+):(?:(?P<col>\d+):)? (?P<sev>fatal error|error|warning|note): (?P<msg>.*)$",
    re.M,
)
_CUDA_NAME = re.compile(
    r"^(?:cuda|cu[A-Z]|CU_|CUDA_|CUDART|cublas|CUBLAS_|cufft|CUFFT_|curand|CURAND_|cusparse|CUSPARSE_|cusolver|CUSOLVER_|"
    r"nvrtc|NVRTC_|nccl|cudnn|CUDNN_|nvtx|__nv_|nv_bfloat|__cuda|cooperative_groups::.*(?:memcpy_async|reduce))"
)
_CUDA_HEADER = re.compile(r"^(?:cuda|cu[a-z]+[_.]|nv|sm_\d|crt/|cooperative_groups)")
_HIP_NAME = re.compile(
    r"^(?:hip[A-Z_]|HIP_|__hip|hipblas|HIPBLAS_|hipfft|HIPFFT_|hiprand|HIPRAND_|hipsparse|hipsolver|rccl)"
)
# The headers that declare the HIP runtime (blockIdx, __syncthreads, hipMalloc, the vector types ...).
_RUNTIME_HEADERS = ("hip/hip_runtime.h",)
_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*([<"])([^>"\r\n]+)[>"]', re.M)
_CONDITIONAL = re.compile(r"^[ \t]*#[ \t]*(if|ifdef|ifndef|elif|else|endif)\b(.*)$")
_IDENT = re.compile(r"[A-Za-z_]\w*")
# Words of the language and compiler keywords CUDA's headers mention too: never "a CUDA name".
_KEYWORDS = frozenset(
    "alignas alignof asm auto bool break case catch char class const constexpr const_cast continue decltype default "
    "delete do double dynamic_cast else enum explicit extern false float for friend goto if inline int long mutable "
    "namespace new noexcept nullptr operator private protected public register reinterpret_cast return short signed "
    "sizeof static static_assert static_cast struct switch template this throw true try typedef typeid typename union "
    "unsigned using virtual void volatile while __restrict __restrict__ __attribute__ __inline__ __inline __asm__ "
    "__volatile__ __extension__ __typeof__ __declspec __forceinline __builtin_expect __FILE__ __LINE__ __func__".split()
)


@dataclass(frozen=True)
class Cause:
    """Why one unit does not compile."""

    cls: str  # a key of CLASSES
    subject: str  # the header, name, member ... the error is about ("" when none)
    reason: str  # one sentence
    suggestion: str
    message: str  # the root error's message
    file: str = ""  # where the root error is (as the compiler output names it, mapped to CUDA by port/check)
    line: int = 0
    column: int = 0
    reported: str = ""  # where hipify had already reported the subject ("" when it had not)

    @property
    def explained(self) -> bool:
        return self.cls in EXPLAINED

    @property
    def label(self) -> str:
        return CLASSES[self.cls].split(" (")[0]

    def location(self) -> str:
        if not self.file:
            return ""
        return f"{self.file}:{self.line}:{self.column}" if self.column else f"{self.file}:{self.line}"

    def to_json(self) -> dict[str, object]:
        return {
            "class": self.cls,
            "subject": self.subject,
            "reason": self.reason,
            "suggestion": self.suggestion,
            "message": self.message,
            "file": self.file,
            "line": self.line,
            "column": self.column,
            "reported": self.reported,
        }


@dataclass(frozen=True)
class Message:
    """One compiler message (notes included), as printed."""

    severity: str
    file: str
    line: int
    column: int
    text: str

    def location(self) -> str:
        if not self.file:
            return ""
        return f"{self.file}:{self.line}:{self.column}" if self.column else f"{self.file}:{self.line}"


def parse_messages(output: str) -> list[Message]:
    return [
        Message(m["sev"], m["file"].strip(), int(m["line"]), int(m["col"] or 0), m["msg"].strip())
        for m in _DIAG_LINE.finditer(output)
    ]


# -- data tables -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class HeaderInfo:
    header: str  # as in the table: a path or a prefix ending in "/"
    provider: str  # rocm | third-party | windows (CUDA-only headers: tools/hipify/headers.py)
    debian: str
    amd: str
    instead: str

    def packages(self) -> str:
        names = [
            f"{self.debian} (Debian)" if self.debian != "-" else "",
            f"{self.amd} (AMD ROCm)" if self.amd != "-" else "",
        ]
        return " / ".join(n for n in names if n)


def _rows(path: Path) -> list[dict[str, str]]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise ToolError(f"cannot read {path}: {err}") from None
    header: list[str] | None = None
    rows: list[dict[str, str]] = []
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        cells = line.split("\t")
        if header is None:
            header = cells
            continue
        rows.append(dict(zip(header, [*cells, *[""] * (len(header) - len(cells))])))
    return rows


@lru_cache(maxsize=1)
def header_table() -> dict[str, HeaderInfo]:
    return {
        r["header"]: HeaderInfo(r["header"], r["provider"], r["debian"], r["amd"], r["instead"])
        for r in _rows(DATA_DIR / "headers.tsv")
    }


@dataclass(frozen=True)
class Rule:
    pattern: re.Pattern[str]
    handler: str
    cls: str = ""  # for the "known" handler: the class and reason the table gives
    reason: str = ""


@lru_cache(maxsize=1)
def diagnostic_rules() -> tuple[Rule, ...]:
    out = []
    where = DATA_DIR / "diagnostics.tsv"
    for r in _rows(where):
        handler = r["handler"]
        if handler != "known" and handler not in _HANDLERS:
            raise ToolError(f"{where}: unknown handler {handler!r}")
        if handler == "known" and (r.get("class") not in CLASSES or not r.get("reason")):
            raise ToolError(
                f"{where}: the known rule {r['pattern']!r} needs a class of {', '.join(CLASSES)} and a reason"
            )
        out.append(Rule(re.compile(r["pattern"]), handler, r.get("class", ""), r.get("reason", "")))
    return tuple(out)


def lookup_header(spelling: str) -> HeaderInfo | None:
    """The table's row for ``spelling``: the exact path, else the longest prefix ("dir/") that holds it."""
    return by_path(header_table(), spelling)


# -- what HIP declares -------------------------------------------------------------------------------------
@lru_cache(maxsize=4)
def _hip_identifiers(hip_include: str) -> frozenset[str]:
    """Every identifier in HIP's headers (``<root>/include/hip``): a name HIP declares appears there."""
    names: set[str] = set()
    for dirpath, _dirs, files in os.walk(hip_include):
        if "nvidia_detail" in dirpath:  # the NVIDIA platform's half maps hip* onto cuda*
            continue
        for name in files:
            try:
                data = (Path(dirpath) / name).read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            names.update(_IDENT.findall(data))
    return frozenset(names)


@lru_cache(maxsize=4)
def _cuda_identifiers(cuda_include: str) -> frozenset[str]:
    """The identifiers of CUDA's own headers (``<CUDA>/include/*.h`` and ``crt/``; not the libraries' C++
    trees): what tells a CUDA name HIPIFY's tables miss (``atomicInc_system``, ``__grid_constant__``)."""
    names: set[str] = set()
    base = Path(cuda_include)
    for path in [*base.glob("*.h"), *base.glob("*.hpp"), *(base / "crt").glob("*.h*")]:
        try:
            names.update(_IDENT.findall(path.read_text(encoding="utf-8", errors="replace")))
        except OSError:
            continue
    return frozenset(names)


# -- the project as compiled ------------------------------------------------------------------------------
class Project:
    """The files a unit was compiled from (the HIP side: hipified outputs), with the includes between them.

    ``origin`` maps a compiled file to the file the user edits (its CUDA source): messages name that file
    and line (through a line map of the two)."""

    def __init__(
        self, files: Iterable[Path], origin: Mapping[Path, Path] | None = None, include_dirs: Sequence[Path] = ()
    ) -> None:
        self.files = sorted({Path(os.path.normpath(f)) for f in files})
        self._set = set(self.files)
        self._by_name: dict[str, list[Path]] = {}
        for f in self.files:
            self._by_name.setdefault(f.name, []).append(f)
        self.origin = {Path(os.path.normpath(k)): v for k, v in (origin or {}).items()}
        self._maps: dict[Path, LineMap | None] = {}
        self.include_dirs = [Path(os.path.normpath(d)) for d in include_dirs]
        self._text: dict[Path, str] = {}
        self._includes: dict[Path, list[tuple[str, Path | None]]] = {}
        self._includers: dict[Path, list[Path]] | None = None

    def shown(self, path: Path) -> str:
        """The file the user edits, relative to the current directory when under it."""
        p = self.origin.get(Path(os.path.normpath(path)), path)
        cwd = Path.cwd()
        if cwd == Path(cwd.anchor):
            return str(p)
        try:
            return p.relative_to(cwd).as_posix()
        except ValueError:
            return str(p)

    def _map(self, path: Path) -> LineMap | None:
        if path not in self._maps:
            source = self.origin.get(path)
            lm = None
            if source is not None:
                try:
                    lm = LineMap(source.read_bytes(), path.read_bytes())
                except OSError:
                    lm = None
            self._maps[path] = lm
        return self._maps[path]

    def source_position(self, file: str, line: int, column: int = 0) -> tuple[str, int, int]:
        """(the CUDA file as shown, line, column) for a position in a compiled file; unchanged otherwise."""
        path = Path(os.path.normpath(file)) if file else Path()
        lm = self._map(path) if file else None
        if lm is None:
            return (self.shown(path) if file else ""), line, column
        return self.shown(path), lm.source_line(line), lm.source_column(line, column) if column else 0

    def where(self, path: Path, line: int) -> str:
        file, line, _col = self.source_position(str(path), line)
        return f"{file}:{line}"

    def source_text(self, file: str, line: int) -> str:
        """The CUDA source's line for a position in a compiled file (the file's own line otherwise)."""
        path = Path(os.path.normpath(file))
        lm = self._map(path)
        source = self.origin.get(path)
        if lm is not None and source is not None:
            return _line(str(source), lm.source_line(line))
        return _line(file, line)

    def included_before(self, unit: Path, target: Path, spellings: Sequence[str]) -> bool:
        """Whether ``unit`` includes one of ``spellings`` before it first reaches ``target`` (textual order)."""
        seen: set[Path] = set()

        def walk(f: Path) -> bool | None:  # True: a spelling first; False: the target first; None: neither
            if f in seen:
                return None
            seen.add(f)
            for spelling, found in self.includes(f):
                if spelling in spellings:
                    return True
                if found == target:
                    return False
                if found is not None:
                    below = walk(found)
                    if below is not None:
                        return below
            return None

        return walk(Path(os.path.normpath(unit))) is True

    def text(self, path: Path) -> str:
        if path not in self._text:
            try:
                self._text[path] = path.read_bytes().decode("utf-8", errors="replace")
            except OSError:
                self._text[path] = ""
        return self._text[path]

    def find(self, spelling: str, includer: Path | None, extra_dirs: Sequence[Path] = ()) -> Path | None:
        """The project file an include spelling names: beside the includer, in the include directories,
        else the one file whose path ends in the spelling (as hipify resolves it)."""
        bases = ([includer.parent] if includer is not None else []) + list(extra_dirs) + self.include_dirs
        for base in bases:
            candidate = Path(os.path.normpath(base / spelling))
            if candidate in self._set:
                return candidate
        parts = spelling.split("/")
        if ".." in parts or "." in parts:
            return None
        hits = [f for f in self._by_name.get(parts[-1], ()) if f.as_posix().endswith("/" + spelling)]
        return hits[0] if len(hits) == 1 else None

    def includes(self, path: Path) -> list[tuple[str, Path | None]]:
        """(spelling, the project file it names or None) for each #include of ``path``."""
        if path not in self._includes:
            self._includes[path] = [
                (m.group(2), self.find(m.group(2), path)) for m in _INCLUDE.finditer(self.text(path))
            ]
        return self._includes[path]

    def includers(self, path: Path) -> list[Path]:
        """The project files that #include ``path``."""
        if self._includers is None:
            self._includers = {}
            for f in self.files:
                for _spelling, target in self.includes(f):
                    if target is not None and target != f:
                        self._includers.setdefault(target, []).append(f)
        return self._includers.get(Path(os.path.normpath(path)), [])

    def closure(self, path: Path) -> tuple[list[Path], list[str]]:
        """Every project file ``path`` includes, transitively (itself first), and every include spelling seen."""
        seen: dict[Path, None] = {}
        spellings: list[str] = []
        todo = [Path(os.path.normpath(path))]
        while todo:
            f = todo.pop()
            if f in seen:
                continue
            seen[f] = None
            for spelling, target in self.includes(f):
                spellings.append(spelling)
                if target is not None:
                    todo.append(target)
        return list(seen), spellings

    def _defining_lines(self, name: str, path: Path, functions_only: bool) -> list[int]:
        """Lines of ``path`` that define ``name``: a macro, a type (struct/class/union/enum/typedef/using) or a
        function. Line by line with unambiguous patterns (no nested quantifiers over overlapping classes: a long
        line of ``*``/``&`` must not make them backtrack)."""
        text = self.text(path)
        if name not in text:
            return []
        word = re.compile(rf"\b{re.escape(name)}\b")
        function = re.compile(rf"[ \t]*(?:[A-Za-z_][\w:<>,]*[ \t*&]+)+{re.escape(name)}[ \t]*\(")
        out = []
        for number, line in enumerate(text.splitlines(), 1):
            if name not in line or word.search(line) is None:
                continue
            if function.match(line):
                out.append(number)
            elif not functions_only and (
                re.match(rf"[ \t]*#[ \t]*define[ \t]+{re.escape(name)}\b", line)
                or re.search(rf"\b(?:struct|class|union|enum|typedef|using)\b.*\b{re.escape(name)}\b", line)
            ):
                out.append(number)
        return out

    def definition(self, name: str, among: Sequence[Path]) -> tuple[Path, int] | None:
        """Where ``name`` is defined (a macro, type, function or variable) in one of ``among``: (file, line)."""
        for f in among:
            lines = self._defining_lines(name, f, functions_only=False)
            if lines:
                return f, lines[0]
        return None

    def definitions(self, name: str) -> list[tuple[Path, int]]:
        """Every line of the project that defines a function ``name`` (its overloads): (file, line)."""
        return [(f, n) for f in self.files for n in self._defining_lines(name, f, functions_only=True)]

    def condition_at(self, path: Path, line: int) -> str:
        """The innermost ``#if``/``#ifdef``/``#ifndef`` open at ``line`` of ``path`` ("" when none)."""
        stack: list[str] = []  # "" for an include guard (#ifndef X / #define X): it says nothing
        lines = self.text(path).splitlines()
        for number, text in enumerate(lines[: max(line - 1, 0)], 1):
            m = _CONDITIONAL.match(text)
            if m is None:
                continue
            word, rest = m.group(1), m.group(2).strip()
            if word == "ifndef" and number < len(lines):
                following = next((t.strip() for t in lines[number:] if t.strip()), "")
                if re.fullmatch(rf"#\s*define\s+{re.escape(rest)}(\s.*)?", following):
                    stack.append("")
                    continue
            if word in ("if", "ifdef", "ifndef"):
                stack.append(f"#{word} {rest}")
            elif word == "endif" and stack:
                stack.pop()
            elif word in ("elif", "else") and stack and stack[-1]:
                stack[-1] = f"#{word} {rest}".strip() + f" (of {stack[-1]})"
        open_conditions = [c for c in stack if c]
        return open_conditions[-1] if open_conditions else ""


# -- the classifier ------------------------------------------------------------------------------------------
@dataclass
class Classifier:
    """Classifies failed HIP compiles of units of one project (see the module docstring)."""

    db: MappingDatabase
    hip_version: tuple[int, int] | None
    hip_include: Path | None  # <ROCm root>/include/hip as the compiler sees it (None: unknown)
    project: Project
    findings: Sequence[object] = ()  # hipify's findings (tools.hipify.Finding), to say where it reported a name
    arch: str = ""
    cuda_include: Path | None = None  # CUDA's include directory, when known: names CUDA declares
    _reported: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for f in self.findings:
            name, kind, line = getattr(f, "name", ""), getattr(f, "kind", ""), getattr(f, "line", 0)
            if getattr(f, "blocking", False) and name and name not in self._reported:
                self._reported[name] = f"{self.project.shown(Path(getattr(f, 'file', '')))}:{line} ({kind})"

    # what HIP declares
    def hip_declares(self, name: str) -> bool:
        if self.hip_include is None or not self.hip_include.is_dir():
            return False
        return name in _hip_identifiers(str(self.hip_include))

    def cuda_declares(self, name: str) -> bool:
        if self.cuda_include is None or not self.cuda_include.is_dir():
            return False
        return name in _cuda_identifiers(str(self.cuda_include))

    def _in_hip_headers(self, file: str) -> bool:
        if not file:
            return False
        p = os.path.normpath(file)
        if self.hip_include is not None and p.startswith(str(self.hip_include.parent) + os.sep):
            return True
        return "/include/hip/" in p or "/lib/clang/" in p or "/include/c++/" in p

    def classify(self, unit: Path, compiled: Path, output: str, command: Sequence[str] = ()) -> Cause:
        """The cause of the failed compile of ``unit`` (its HIP file ``compiled``; ``output``: the compiler's
        messages; ``command``: the compile command, for its -I directories)."""
        messages = parse_messages(output)
        first = next((i for i, m in enumerate(messages) if m.severity in ("error", "fatal error")), None)
        if first is None:
            tail = [ln.strip() for ln in output.splitlines() if ln.strip()]
            text = tail[-1] if tail else "no error message"
            return Cause(
                "other", "", f"the compiler failed without an error message: {text}", "see the full output", text
            )
        root = messages[first]
        notes = []
        for m in messages[first + 1 :]:
            if m.severity != "note":
                break
            notes.append(m)
        compiled = Path(os.path.normpath(compiled))
        handled: Cause | None = None  # a handler's own "other" (it says more than the bare error)
        for rule in diagnostic_rules():
            hit = rule.pattern.match(root.text)
            if hit is not None:
                groups = {k: v or "" for k, v in hit.groupdict().items()}
                if rule.handler == "known":
                    subject = groups.get("subject", "")
                    reason = f"{rule.reason.format(subject=subject)} ({self._at(root)})"
                    return self._cause(rule.cls, subject, reason, "rewrite this construct for HIP", root)
                handled = _HANDLERS[rule.handler](self, root, notes, groups, compiled, list(command))
                if handled is not None and handled.cls != "other":
                    return handled
                break
        # Nothing more precise: a file another project file #includes is a fragment of that one's unit (a
        # dual-use file that fails for a precise reason, a missing header say, is classified by it above).
        includers = [f for f in self.project.includers(compiled) if f != compiled]
        if includers:
            names = ", ".join(self.project.shown(f) for f in includers[:3])
            return self._cause(
                "not-standalone",
                compiled.name,
                f"{self.project.shown(compiled)} is #included by {names}: it is part of that unit, not a unit of "
                f"its own (first error: {root.text})",
                f"compile {self.project.shown(includers[0])} instead, and leave this file out of the units",
                root,
            )
        fallback = self.scan(root, compiled)
        if fallback is not None:
            return fallback
        if handled is not None:
            return handled
        where = "in HIP's own headers, " if self._in_hip_headers(root.file) else ""
        return self._cause(
            "other",
            "",
            f"{where}{self._at(root)}: {root.text}",
            "read the first error in the compiler output",
            root,
        )

    def _at(self, m: Message) -> str:
        file, line, column = self.project.source_position(m.file, m.line, m.column)
        return f"{file}:{line}:{column}" if column else f"{file}:{line}"

    def _cuda_only(self, name: str) -> Entry | bool:
        """A CUDA name: its database entry, True when only CUDA's headers or the naming say so, else False."""
        entry = self.db.lookup(name)
        if entry is not None and entry.kind != "header" and (entry.hip_name != name or not entry.supported):
            return entry
        if self.hip_declares(name):
            return False
        return self.cuda_declares(name) or bool(_CUDA_NAME.match(name))

    def scan(self, root: Message, compiled: Path) -> Cause | None:
        """For an error no rule explains: a CUDA name on the error's line or in the #if around it, or a HIP
        runtime name on a line of a unit that never includes the HIP runtime (it was read before any)."""
        text = _line(root.file, root.line)
        runtime_names = [n for n in dict.fromkeys(_IDENT.findall(text)) if n.startswith("__") and self.hip_declares(n)]
        if runtime_names and not self.project.included_before(compiled, Path("/nonexistent"), _RUNTIME_HEADERS):
            name = runtime_names[0]
            return self._cause(
                "missing-include",
                name,
                f"{name} on the failing line is defined by HIP's runtime header, which the unit does not include "
                "before it (nvcc includes cuda_runtime.h implicitly; HIP-Clang does not)",
                "#include <hip/hip_runtime.h> first (hipify should insert it into every CUDA unit)",
                root,
            )
        condition = self.project.condition_at(Path(os.path.normpath(root.file)), root.line) if root.file else ""
        # a CUDA macro in the #if only explains the error when its absence selected this branch
        negated = condition.startswith(("#else", "#elif", "#ifndef")) or "!" in condition
        for where, source in (("line", text), ("condition", condition if negated else "")):
            for name in dict.fromkeys(_IDENT.findall(_strip_strings(source))):
                if name in _KEYWORDS:
                    continue
                cuda = self._cuda_only(name)
                if cuda is False or (cuda is True and not _CUDA_NAME.match(name) and not name.startswith("__")):
                    continue
                if where == "condition":
                    return self._cause(
                        "untranslated",
                        name,
                        f"the error is inside `{condition}`, which tests CUDA's {name}: HIP does not define it, so "
                        f"this branch is compiled on HIP ({self._at(root)}: {root.text})",
                        f"test a HIP macro instead of {name} (or __HIP_PLATFORM_AMD__)",
                        root,
                    )
                if isinstance(cuda, Entry):
                    cause = self._entry_cause(name, cuda, root, "")
                    if cause is not None:
                        return cause
                if self.cuda_declares(name) and not self.hip_declares(name) and not _CUDA_NAME.match(name):
                    return self._cause(
                        "hip-lacks",
                        name,
                        f"CUDA's {name} (on the failing line) has no HIP counterpart; HIPIFY's tables do not list it",
                        "port this use by hand",
                        root,
                    )
                return self._cause(
                    "untranslated",
                    name,
                    f"CUDA name {name} is still on the failing line ({self._at(root)}: {root.text}); HIPIFY's "
                    "tables do not map it",
                    "port this use by hand (or add a mapping with --mappings)",
                    root,
                )
        return None

    def _cause(self, cls: str, subject: str, reason: str, suggestion: str, root: Message) -> Cause:
        reported = self._reported.get(subject, "") if subject else ""
        file, line, column = self.project.source_position(root.file, root.line, root.column)
        return Cause(cls, subject, reason, suggestion, root.text, file, line, column, reported)

    # -- handlers ------------------------------------------------------------------------------------------
    def _search_dirs(self, compiled: Path, command: Sequence[str]) -> list[Path]:
        dirs = [compiled.parent]
        dirs += [Path(a[2:]) for a in command if a.startswith("-I") and len(a) > 2]
        dirs += [Path(command[i + 1]) for i, a in enumerate(command[:-1]) if a in ("-I", "-isystem")]
        if self.hip_include is not None:
            dirs.append(self.hip_include.parent)
        return dirs

    def on_header(
        self, root: Message, notes: list[Message], g: dict[str, str], compiled: Path, command: list[str]
    ) -> Cause | None:
        header = g["subject"]
        info = lookup_header(header)
        entry = self.db.header(header)
        target = f" for {self.arch}" if self.arch else ""
        if info is not None and info.provider == "rocm":
            if info.instead.startswith("moved:"):
                moved = info.instead[len("moved:") :]
                there = any((d / moved).is_file() for d in self._search_dirs(compiled, command))
                installed = "installed" if there else f"provided by {info.packages()}"
                return self._cause(
                    "missing-header",
                    header,
                    f"'{header}' is not where ROCm 6 and later put it: the library installs <{moved}> ({installed})",
                    f"include <{moved}> (hipify should write it for HIP >= 6)",
                    root,
                )
            packages = info.packages() or "no package"
            extra = f"; {info.instead}" if info.instead else ""
            return self._cause(
                "missing-header",
                header,
                f"'{header}' belongs to a ROCm library that is not installed: {packages}{extra}",
                f"install {packages} (or point -I at the library's include directory)",
                root,
            )
        only = cuda_only_header(header, self.hip_version)
        if only is not None:  # (tools/hipify/data/cuda_only_headers.tsv and targets.tsv: the table hipify reports from)
            if only.since is not None:
                since = format_version(only.since)
                why = f"HIP {self._version()} has no counterpart; HIP >= {since} has <{only.counterpart}>"
            else:
                why = "a CUDA header with no HIP counterpart"
            return self._cause(
                "hip-lacks",
                header,
                f"'{header}' is {why}; {only.instead}",
                "guard the code that needs it with #if !defined(__HIP_PLATFORM_AMD__), or port it by hand",
                root,
            )
        if entry is not None:
            if entry.hip_name and entry.hip_name != header and entry.supported:
                return self._cause(
                    "untranslated",
                    header,
                    f"CUDA header '{header}' was left as is; the mapping database maps it to <{entry.hip_name}>",
                    f"include <{entry.hip_name}> (a translation defect: report it)",
                    root,
                )
            return self._cause(
                "hip-lacks",
                header,
                f"CUDA header '{header}' has no HIP counterpart (HIPIFY lists it as unsupported)",
                "guard the code that needs it, or port it by hand",
                root,
            )
        if info is not None:  # third-party, windows
            if info.provider == "windows":
                return self._cause(
                    "missing-header",
                    header,
                    f"'{header}' exists only on Windows ({info.instead}): this unit cannot be built on Linux",
                    "leave the unit out of Linux builds",
                    root,
                )
            packages = info.packages() or "no package known"
            extra = f" ({info.instead})" if info.instead else ""
            return self._cause(
                "missing-header",
                header,
                f"'{header}' is a third-party header, not part of ROCm: {packages}{extra}",
                f"install {packages}",
                root,
            )
        in_project = self.project.find(header, None)
        if in_project is not None:
            # the directory to give with -I: the user's (the CUDA source's) when its path ends in the spelling too
            original = self.project.origin.get(in_project, in_project).as_posix()
            base = original if original.endswith("/" + header) else in_project.as_posix()
            rel = base[: -len(header) - 1] or "/"
            return self._cause(
                "missing-header",
                header,
                f"'{header}' is the project's own {self.project.shown(in_project)}, but not on the include path",
                f"add -I {rel} (tools port -I DIR; or include it with a path relative to the includer)",
                root,
            )
        if _CUDA_HEADER.match(header):
            return self._cause(
                "hip-lacks",
                header,
                f"'{header}' looks like a CUDA header that HIPIFY does not know and HIP does not provide{target}",
                "guard the code that needs it, or port it by hand",
                root,
            )
        return self._cause(
            "missing-header",
            header,
            f"'{header}' was found nowhere on the include path, and no known package provides it",
            "install the package that provides it, or add its directory with -I DIR (tools port -I DIR)",
            root,
        )

    def _entry_cause(self, name: str, entry: Entry, root: Message, suggestion_hint: str) -> Cause | None:
        """A name the mapping database knows."""
        if not entry.supported or (not entry.hip_name and entry.kind != "header"):
            hint = f"; the compiler suggests {suggestion_hint}" if suggestion_hint else ""
            return self._cause(
                "hip-lacks",
                name,
                f"HIP has no counterpart of CUDA's {name} (HIPIFY lists it as unsupported){hint}",
                "port this use by hand, or guard it with #if !defined(__HIP_PLATFORM_AMD__)",
                root,
            )
        version = self.hip_version
        if not entry.available_in(version):
            need = format_version(entry.hip_added)
            have = f"{version[0]}.{version[1]}" if version else "newest"
            removed = f" (removed in {format_version(entry.hip_removed)})" if entry.hip_removed else ""
            return self._cause(
                "hip-lacks",
                name,
                f"{name} -> {entry.hip_name} needs HIP >= {need}{removed}; the target is HIP {have}",
                f"target a newer HIP (--hip-version {need}) or avoid {name}",
                root,
            )
        if entry.hip_name != name:
            return self._cause(
                "untranslated",
                name,
                f"CUDA name {name} is still in the HIP source; the mapping database maps it to {entry.hip_name}",
                f"write {entry.hip_name} (hipify left it: a translation defect, e.g. inside a macro or a string)",
                root,
            )
        return None

    def _hip_name_cause(self, name: str, root: Message, compiled: Path) -> Cause | None:
        """A name HIP's own headers declare (or should): included or not?"""
        _files, spellings = self.project.closure(compiled)
        runtime = any(s in _RUNTIME_HEADERS for s in spellings)
        if self.hip_declares(name):
            if not runtime:
                return self._cause(
                    "missing-include",
                    name,
                    f"{name} is declared by HIP's runtime header, which the unit never includes "
                    "(nvcc includes cuda_runtime.h implicitly; HIP-Clang does not)",
                    "#include <hip/hip_runtime.h> first (hipify should insert it into every CUDA unit)",
                    root,
                )
            return self._cause(
                "hip-lacks",
                name,
                f"{name} appears in HIP's headers but is not declared for this compile "
                f"(HIP {self._version()} declares it only under a condition, e.g. an opt-in macro or another target)",
                f"check the condition around {name} in HIP's headers",
                root,
            )
        if _HIP_NAME.match(name):
            return self._cause(
                "hip-lacks",
                name,
                f"HIP {self._version()} does not declare {name}",
                "target a HIP version that has it, or port this use by hand",
                root,
            )
        return None

    def _dropped_include(self, compiled: Path, target: Path) -> str:
        """The spelling with which the unit's CUDA source includes ``target`` (by its file name, as the CUDA
        source names it) when the compiled file has no include of it: the translation lost it. "" otherwise."""
        source = self.project.origin.get(Path(os.path.normpath(compiled)))
        if source is None:
            return ""
        wanted = {target.name, self.project.origin.get(target, target).name}
        try:
            text = source.read_bytes().decode("utf-8", errors="replace")
        except OSError:
            return ""
        spelled = [m.group(2) for m in _INCLUDE.finditer(text) if m.group(2).rsplit("/", 1)[-1] in wanted]
        if not spelled or any(t == target for _s, t in self.project.includes(compiled)):
            return ""
        return spelled[0]

    def _version(self) -> str:
        return f"{self.hip_version[0]}.{self.hip_version[1]}" if self.hip_version else "(newest)"

    def on_name(
        self, root: Message, notes: list[Message], g: dict[str, str], compiled: Path, command: list[str]
    ) -> Cause | None:
        name = g["subject"]
        scope = g.get("scope", "")
        qualified = f"{scope}::{name}" if scope else name
        did_you_mean = re.search(r"did you mean '([^']+)'", root.text)
        hint = did_you_mean.group(1) if did_you_mean else ""
        for candidate in dict.fromkeys([qualified, name]):
            entry = self.db.lookup(candidate)
            if entry is not None:
                cause = self._entry_cause(candidate, entry, root, hint)
                if cause is not None:
                    return cause
        if scope and (scope.startswith(("cooperative_groups", "hip", "rocprim", "hipcub", "thrust"))):
            return self._cause(
                "hip-lacks",
                qualified,
                f"HIP's {scope} has no {name}",
                "port this use by hand",
                root,
            )
        hip = self._hip_name_cause(name, root, compiled)
        if hip is not None:
            return hip
        files, _spellings = self.project.closure(compiled)
        where = self.project.definition(name, files)
        if where is not None:
            path, line = where
            condition = self.project.condition_at(path, line)
            guard = re.search(r"\b(HIP_INCLUDE_\w+|__HIP\w*)\b", condition)
            if guard is not None and not self.project.included_before(compiled, path, _RUNTIME_HEADERS):
                return self._cause(
                    "missing-include",
                    name,
                    f"{name} is defined at {self.project.where(path, line)} under `{condition}`, which only a HIP "
                    "runtime header makes true, and the unit includes none (nvcc includes cuda_runtime.h implicitly)",
                    "#include <hip/hip_runtime.h> first (hipify should insert it into every CUDA unit)",
                    root,
                )
            cuda_macro = next(
                (
                    n
                    for n in dict.fromkeys(_IDENT.findall(condition))
                    if n not in _KEYWORDS
                    and n != "defined"
                    and self._cuda_only(n) is not False
                    and (n.startswith("__") or _CUDA_NAME.match(n))
                ),
                None,
            )
            if cuda_macro is not None:
                entry = self.db.lookup(cuda_macro)
                maps = (
                    f" (the mapping database maps it to {entry.hip_name})"
                    if entry is not None and entry.hip_name
                    else ""
                )
                return self._cause(
                    "untranslated",
                    cuda_macro,
                    f"{name} is defined at {self.project.where(path, line)} under `{condition}`: {cuda_macro} is "
                    f"CUDA's, left as is, and HIP never defines it{maps}",
                    f"test the HIP counterpart of {cuda_macro}",
                    root,
                )
            if condition:
                return self._cause(
                    "other",
                    name,
                    f"{name} is defined at {self.project.where(path, line)} under `{condition}`, which is false "
                    f"in this compile ({root.location()}: {root.text})",
                    "check the condition (a CUDA-only macro translated or left as is)",
                    root,
                )
        elsewhere = self.project.definition(name, [f for f in self.project.files if f not in files])
        if elsewhere is not None:
            path, line = elsewhere
            dropped = self._dropped_include(compiled, path)
            if dropped:
                return self._cause(
                    "missing-include",
                    name,
                    f"{name} is defined in {self.project.where(path, line)}, which the CUDA source includes as "
                    f"<{dropped}> but the translation does not (it rewrote or dropped that include)",
                    f"include {self.project.shown(path)} as the CUDA source does (a translation defect: report it)",
                    root,
                )
            return self._cause(
                "not-standalone",
                name,
                f"{name} is defined in {self.project.where(path, line)}, which this unit does not include: it expects "
                "to be compiled as part of another file",
                f"include {self.project.shown(path)} (or compile the file that includes both)",
                root,
            )
        if self.cuda_declares(name) and not _CUDA_NAME.match(name):
            mean = f" (the compiler suggests {hint})" if hint else ""
            return self._cause(
                "hip-lacks",
                name,
                f"CUDA's {name} has no HIP counterpart{mean}; HIPIFY's tables do not list it",
                "port this use by hand",
                root,
            )
        if _CUDA_NAME.match(name):
            mean = f"; the compiler suggests {hint}" if hint else ""
            return self._cause(
                "untranslated",
                name,
                f"CUDA name {name} is still in the HIP source, and HIPIFY's tables do not know it{mean}",
                "port this use by hand (or add a mapping with --mappings)",
                root,
            )
        return None

    def on_member(
        self, root: Message, notes: list[Message], g: dict[str, str], compiled: Path, command: list[str]
    ) -> Cause | None:
        member, scope = g["subject"], g.get("scope", "")
        base = re.sub(r"<.*", "", scope).strip()
        bare = base.split("::")[-1]
        hipish = (
            base.startswith(("cooperative_groups", "hip", "rocprim", "hipcub", "thrust"))
            or "HIP_vector_type" in scope
            or bool(_HIP_NAME.match(bare))
            or self.hip_declares(bare)
        )
        if hipish:
            return self._cause(
                "hip-lacks",
                f"{base}::{member}",
                f"HIP's {scope} has no member {member} (CUDA's has)",
                "port this use by hand",
                root,
            )
        entry = self.db.lookup(f"{bare}.{member}") or self.db.lookup(member)
        if entry is not None:
            return self._entry_cause(member, entry, root, "")
        return None

    def on_call(
        self, root: Message, notes: list[Message], g: dict[str, str], compiled: Path, command: list[str]
    ) -> Cause | None:
        name = g["subject"]
        bare = re.sub(r"<.*", "", name).split("::")[-1]
        candidate = next((n.text for n in notes if "candidate" in n.text), "")
        why = f" ({candidate})" if candidate else ""
        if re.search(r"call to __host__ function from __(global|device)__ function", candidate):
            return self._cause(
                "hip-lacks",
                bare,
                f"{bare} is called from device code: HIP has no device-side runtime API (CUDA's device runtime, "
                "used with dynamic parallelism, has one)",
                "move the call to the host",
                root,
            )
        if _HIP_NAME.match(bare) or (self.hip_declares(bare) and any(self._in_hip_headers(n.file) for n in notes)):
            return self._cause(
                "hip-lacks",
                bare,
                f"HIP's {bare} takes other arguments than CUDA's{why}",
                f"adapt the call to HIP's {bare} (e.g. a cast the CUDA overload did implicitly)",
                root,
            )
        entry = self.db.lookup(bare)
        if entry is not None:
            return self._entry_cause(bare, entry, root, "")
        # The project's own overloads of it, some under an #if that tests a CUDA name HIP never defines
        # (cuda-samples' _cudaGetErrorEnum(cufftResult) under #ifdef _CUFFT_H_): those are compiled out.
        argument = re.search(r"no known conversion from '([^']+)'", " ".join(n.text for n in notes))
        wanted = re.sub(r"^(?:const |struct |enum )+|[ *&]+$", "", argument.group(1)) if argument else ""
        for path, line in self.project.definitions(bare):
            # only the overload for the argument's type (its HIP spelling is on the definition's line)
            if not wanted or not re.search(rf"\b{re.escape(wanted)}\b", _line(str(path), line)):
                continue
            condition = self.project.condition_at(path, line)
            for name in dict.fromkeys(_IDENT.findall(condition)):
                if name in ("if", "ifdef", "ifndef", "defined", "elif", "else", "of") or self._cuda_only(name) is False:
                    continue
                return self._cause(
                    "untranslated",
                    name,
                    f"the {bare} this call needs is defined at {self.project.where(path, line)} under `{condition}`: "
                    f"{name} is CUDA's, never defined on HIP, so that overload is compiled out",
                    f"test the HIP counterpart of {name} (a mapping for it: report it)",
                    root,
                )
        return None

    def on_unavailable(
        self, root: Message, notes: list[Message], g: dict[str, str], compiled: Path, command: list[str]
    ) -> Cause | None:
        name = re.sub(r"<.*", "", g["subject"])
        detail = g.get("detail", "")
        target = f" on {self.arch}" if self.arch else ""
        why = f": {detail}" if detail else ""
        return self._cause(
            "hip-lacks",
            name,
            f"HIP marks {name} unavailable{target}{why}",
            f"avoid {name} on this target (guard it, or use another API)",
            root,
        )

    def on_redefinition(
        self, root: Message, notes: list[Message], g: dict[str, str], compiled: Path, command: list[str]
    ) -> Cause | None:
        name = g["subject"] or g.get("detail", "")
        previous = next((n for n in notes if "previous" in n.text or "declared here" in n.text), None)
        if previous is not None and self._in_hip_headers(previous.file):
            return self._cause(
                "hip-conflict",
                name,
                f"{name} is already defined by HIP ({previous.location()}); CUDA's headers do not define it",
                f"drop the project's {name} on HIP (#if !defined(__HIP_PLATFORM_AMD__)) or rename it",
                root,
            )
        if previous is not None and previous.file and root.file:
            a = self.project.source_text(root.file, root.line)
            b = self.project.source_text(previous.file, previous.line)
            if a and b and a.strip() != b.strip():
                return self._cause(
                    "hip-conflict",
                    name,
                    f"two declarations of {name} that differ in CUDA ({self._at(root)} and {self._at(previous)}) "
                    "became the same after translation: CUDA types that HIP merges (e.g. cudaError_t and CUresult "
                    "are both hipError_t)",
                    "keep one of the two on HIP (#if !defined(__HIP_PLATFORM_AMD__))",
                    root,
                )
        return None

    def on_ambiguous(
        self, root: Message, notes: list[Message], g: dict[str, str], compiled: Path, command: list[str]
    ) -> Cause | None:
        name = g["subject"]
        hip = next((n for n in notes if self._in_hip_headers(n.file)), None)
        own = next((n for n in notes if n.file and not self._in_hip_headers(n.file)), None)
        if hip is not None and own is not None:
            return self._cause(
                "hip-conflict",
                name,
                f"the project's {name} ({self._at(own)}) and HIP's own ({hip.location()}) both match: HIP defines "
                f"what CUDA leaves to the project (e.g. arithmetic on vector types)",
                f"leave the project's {name} out on HIP (#if !defined(__HIP_PLATFORM_AMD__))",
                root,
            )
        return None

    def on_assertion(
        self, root: Message, notes: list[Message], g: dict[str, str], compiled: Path, command: list[str]
    ) -> Cause | None:
        if not self._in_hip_headers(root.file):
            return None
        detail = g.get("detail", "") or g.get("subject", "")
        user = next((n for n in notes if n.file and not self._in_hip_headers(n.file)), None)
        where = f" (called at {self._at(user)})" if user is not None else ""
        return self._cause(
            "hip-lacks",
            detail[:80],
            f"HIP's header rejects this use{where}: {detail}",
            "adapt the call to HIP's requirement",
            root,
        )


def _strip_strings(text: str) -> str:
    """A line without its string literals and // comment (names there are not code)."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', text)
    return text.split("//", 1)[0]


def _line(file: str, line: int) -> str:
    try:
        lines = Path(file).read_bytes().decode("utf-8", errors="replace").splitlines()
    except OSError:
        return ""
    return lines[line - 1] if 0 < line <= len(lines) else ""


_HANDLERS = {
    "header": Classifier.on_header,
    "name": Classifier.on_name,
    "member": Classifier.on_member,
    "call": Classifier.on_call,
    "unavailable": Classifier.on_unavailable,
    "redefinition": Classifier.on_redefinition,
    "ambiguous": Classifier.on_ambiguous,
    "assertion": Classifier.on_assertion,
}
