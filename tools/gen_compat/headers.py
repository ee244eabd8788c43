"""What the generator needs from the real CUDA and HIP headers, and its checked-in snapshot.

``read_headers`` parses the toolkits' headers (error enums with their values, runtime function
prototypes, ``#define``-renamed functions such as HIP 6's ``hipGetDeviceProperties`` ->
``hipGetDevicePropertiesR0600``). The result is written to ``data/headers.tsv`` so that generating,
and checking freshness, needs no toolkit; the build then compiles the generated C thunks against the
toolkit actually found, which re-checks every prototype and enum value used (see render.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from tools.errors import ToolError

SNAPSHOT = Path(__file__).resolve().parent / "data" / "headers.tsv"
FORMAT = "monarch-runtime gen-compat header snapshot v1"

_BLOCK_COMMENT = re.compile(r"/\*.*?\*/", re.S)
_LINE_COMMENT = re.compile(r"//[^\n]*")
_CUDA_PROTO = re.compile(
    r"extern\s+(?:__host__\s+|__device__\s+|__cudart_builtin__\s+|CUDART_DEVICE\s+)*"
    r"(?P<ret>[\w\s*]+?)\s*\bCUDARTAPI\s+(?P<name>cuda\w+)\s*\((?P<args>(?:[^;{()]|\([^()]*\))*)\)\s*;"
)
_HIP_PROTO = re.compile(
    r"^(?:HIP_PUBLIC_API\s+|DEPRECATED\(\w+\)\s+)*(?P<ret>(?:const\s+)?\w+\s*\**)\s*(?P<name>hip\w+)\s*"
    r"\((?P<args>(?:[^;{()]|\([^()]*\))*)\)\s*(?:__attribute__\s*\(\([^;]*\)\)\s*)?;",
    re.M,
)
_DEFAULT_ARG = re.compile(r"__d(?:v|parm)\([^()]*\)")
_DEFINE = re.compile(r"^\s*#\s*define\s+(?P<name>(?:cuda|hip)\w+)\s+(?P<target>(?:cuda|hip)\w+)\s*$", re.M)


@dataclass(frozen=True)
class HeaderFacts:
    """Enum values, prototypes and renaming defines of one platform's headers."""

    version: str
    errors: dict[str, int] = field(default_factory=dict)  # error enumerator -> value, in header order
    enums: dict[str, int] = field(default_factory=dict)  # every other enumerator with a plain value
    enum_of: dict[str, str] = field(default_factory=dict)  # enumerator -> its enum's (typedef) name
    prototypes: dict[str, str] = field(default_factory=dict)  # function -> "ret name(args)"
    renames: dict[str, str] = field(default_factory=dict)  # function -> the symbol a #define names


def strip_comments(text: str) -> str:
    return _LINE_COMMENT.sub("", _BLOCK_COMMENT.sub(" ", text))


def parse_enum(text: str, opener: str) -> dict[str, int]:
    """Enumerators of the first enum whose header matches ``opener`` (a regex), with their values.

    Implicit values continue from the previous one; a value naming an earlier enumerator takes its value.
    """
    match = re.search(opener + r"\s*\{(?P<body>[^}]*)\}", text)
    if match is None:
        raise ToolError(f"no enum matching {opener!r} in the header")
    values: dict[str, int] = {}
    nxt = 0
    for raw in match.group("body").split(","):
        item = " ".join(raw.split())
        if not item:
            continue
        name, _, expr = item.partition("=")
        name, expr = name.strip(), expr.strip()
        if not re.fullmatch(r"\w+", name):
            raise ToolError(f"cannot parse enumerator {item!r}")
        if expr:
            if re.fullmatch(r"-?(0x[0-9a-fA-F]+|\d+)", expr):
                nxt = int(expr, 0)
            elif expr in values:
                nxt = values[expr]
            else:
                raise ToolError(f"cannot evaluate {name} = {expr}")
        values[name] = nxt
        nxt += 1
    return values


_ENUM_BODY = re.compile(r"\benum\b(?P<head>[^{};()]*)\{(?P<body>[^{}]*)\}\s*(?P<tail>\w*)")


def parse_enum_names(text: str) -> dict[str, str]:
    """Enumerator -> the name of its enum: the tag (``enum cudaMemcpyKind {``), else the typedef name
    after the body (``typedef enum { ... } hipX;``)."""
    out: dict[str, str] = {}
    for match in _ENUM_BODY.finditer(text):
        words = [w for w in match.group("head").split() if not (w.startswith("__") or w.isupper())]
        name = words[-1] if words else match.group("tail")
        if not name:
            continue
        for raw in match.group("body").split(","):
            enumerator = raw.partition("=")[0].strip()
            if re.fullmatch(r"[A-Za-z_]\w*", enumerator):
                out.setdefault(enumerator, name)
    return out


def parse_all_enums(text: str) -> dict[str, int]:
    """Every enumerator with a value this parser can evaluate (plain numbers, earlier names, implicit)."""
    values: dict[str, int] = {}
    for match in _ENUM_BODY.finditer(text):
        nxt: int | None = 0
        for raw in match.group("body").split(","):
            item = " ".join(raw.split())
            name, _, expr = item.partition("=")
            name, expr = name.strip(), expr.strip()
            if not re.fullmatch(r"[A-Za-z_]\w*", name):
                nxt = None
                continue
            if expr:
                if re.fullmatch(r"-?(0x[0-9a-fA-F]+|\d+)[uU]?", expr):
                    nxt = int(expr.rstrip("uU"), 0)
                else:
                    nxt = values.get(expr)
            if nxt is not None:
                values.setdefault(name, nxt)
                nxt += 1
    return values


def _normalize_proto(ret: str, name: str, args: str) -> str:
    args = " ".join(_DEFAULT_ARG.sub("", args).split())
    ret = " ".join(ret.split())
    return f"{ret} {name}({args})"


def read_cuda(include: Path) -> HeaderFacts:
    api, types = include / "cuda_runtime_api.h", include / "driver_types.h"
    for path in (api, types):
        if not path.is_file():
            raise ToolError(f"{path} not found: pass --cuda-include DIR (the CUDA toolkit's include/)")
    api_text = strip_comments(api.read_text(encoding="utf-8", errors="replace"))
    version = re.search(r"#\s*define\s+CUDART_VERSION\s+(\d+)", api_text)
    facts = HeaderFacts(version=version.group(1) if version else "unknown")
    types_text = strip_comments(types.read_text(encoding="utf-8", errors="replace"))
    facts.errors.update(parse_enum(types_text, r"enum\s+\w*\s*cudaError\b"))
    facts.enums.update(
        (k, v) for k, v in {**parse_all_enums(types_text), **parse_all_enums(api_text)}.items() if k not in facts.errors
    )
    names = {**parse_enum_names(types_text), **parse_enum_names(api_text)}
    facts.enum_of.update((k, names[k]) for k in facts.enums if k in names)
    for m in _CUDA_PROTO.finditer(api_text):
        facts.prototypes.setdefault(m.group("name"), _normalize_proto(m.group("ret"), m.group("name"), m.group("args")))
    for m in _DEFINE.finditer(api_text):
        if m.group("name") != m.group("target"):
            facts.renames[m.group("name")] = m.group("target")
    return facts


def read_hip(include: Path) -> HeaderFacts:
    api, version_h = include / "hip" / "hip_runtime_api.h", include / "hip" / "hip_version.h"
    for path in (api, version_h):
        if not path.is_file():
            raise ToolError(f"{path} not found: pass --hip-include DIR (the ROCm include/ holding hip/)")
    text = strip_comments(api.read_text(encoding="utf-8", errors="replace"))
    vtext = version_h.read_text(encoding="utf-8", errors="replace")
    parts = [re.search(rf"#define\s+HIP_VERSION_{p}\s+(\d+)", vtext) for p in ("MAJOR", "MINOR", "PATCH")]
    version = ".".join(m.group(1) for m in parts if m) or "unknown"
    facts = HeaderFacts(version=version)
    facts.errors.update(parse_enum(text, r"typedef\s+enum\s+(?:__HIP_NODISCARD\s+)?hipError_t"))
    types_h = include / "hip" / "driver_types.h"
    types_text = strip_comments(types_h.read_text(encoding="utf-8", errors="replace")) if types_h.is_file() else ""
    facts.enums.update(
        (k, v) for k, v in {**parse_all_enums(types_text), **parse_all_enums(text)}.items() if k not in facts.errors
    )
    names = {**parse_enum_names(types_text), **parse_enum_names(text)}
    facts.enum_of.update((k, names[k]) for k in facts.enums if k in names)
    for m in _HIP_PROTO.finditer(text):
        facts.prototypes.setdefault(m.group("name"), _normalize_proto(m.group("ret"), m.group("name"), m.group("args")))
    for m in _DEFINE.finditer(text):
        if m.group("name") != m.group("target"):
            facts.renames[m.group("name")] = m.group("target")
    return facts


@dataclass(frozen=True)
class Snapshot:
    cuda: HeaderFacts
    hip: HeaderFacts


def _portable(where: str) -> str:
    home = str(Path.home())
    return "~" + where[len(home) :] if where.startswith(home + "/") else where


def write_snapshot(path: Path, snap: Snapshot, sources: tuple[str, str]) -> None:
    sources = (_portable(sources[0]), _portable(sources[1]))
    lines = [
        "# GENERATED FILE - do not edit; regenerate with: python -m tools gen-compat --refresh-headers",
        f"# From the CUDA headers in {sources[0]} and the HIP headers in {sources[1]}:",
        "# error enumerators with their values, runtime prototypes, #define-renamed functions.",
        f"#!format\t{FORMAT}",
        f"#!cuda_version\t{snap.cuda.version}",
        f"#!hip_version\t{snap.hip.version}",
        "platform\tkind\tname\tvalue",
    ]
    for platform, facts in (("cuda", snap.cuda), ("hip", snap.hip)):
        lines += [f"{platform}\terror\t{name}\t{value}" for name, value in facts.errors.items()]
        lines += [f"{platform}\tenum\t{name}\t{facts.enums[name]}" for name in sorted(facts.enums)]
        lines += [f"{platform}\tenum_of\t{name}\t{facts.enum_of[name]}" for name in sorted(facts.enum_of)]
        lines += [f"{platform}\tprototype\t{name}\t{facts.prototypes[name]}" for name in sorted(facts.prototypes)]
        lines += [f"{platform}\trename\t{name}\t{facts.renames[name]}" for name in sorted(facts.renames)]
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    tmp.replace(path)


def read_snapshot(path: Path = SNAPSHOT) -> Snapshot:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise ToolError(
            f"cannot read the header snapshot {path}: {err.strerror or err}; "
            "create it with: python -m tools gen-compat --refresh-headers"
        ) from None
    meta: dict[str, str] = {}
    facts = {"cuda": HeaderFacts(version=""), "hip": HeaderFacts(version="")}
    for lineno, line in enumerate(text.splitlines(), 1):
        if line.startswith("#!"):
            key, _, value = line[2:].partition("\t")
            meta[key] = value
            continue
        if not line.strip() or line.startswith("#") or line.startswith("platform\t"):
            continue
        cells = line.split("\t")
        if len(cells) != 4 or cells[0] not in facts:
            raise ToolError(f"{path}:{lineno}: expected platform<TAB>kind<TAB>name<TAB>value")
        platform, kind, name, value = cells
        target = facts[platform]
        if kind == "error":
            target.errors[name] = int(value)
        elif kind == "enum":
            target.enums[name] = int(value)
        elif kind == "enum_of":
            target.enum_of[name] = value
        elif kind == "prototype":
            target.prototypes[name] = value
        elif kind == "rename":
            target.renames[name] = value
        else:
            raise ToolError(f"{path}:{lineno}: unknown kind {kind!r}")
    if meta.get("format") != FORMAT:
        raise ToolError(f"{path} is not a gen-compat header snapshot ({FORMAT!r})")
    return Snapshot(
        cuda=_with_version(facts["cuda"], meta.get("cuda_version", "unknown")),
        hip=_with_version(facts["hip"], meta.get("hip_version", "unknown")),
    )


def _with_version(f: HeaderFacts, version: str) -> HeaderFacts:
    return HeaderFacts(
        version, errors=f.errors, enums=f.enums, enum_of=f.enum_of, prototypes=f.prototypes, renames=f.renames
    )
