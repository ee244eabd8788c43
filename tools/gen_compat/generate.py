"""Scan the workspace for CUDA names, resolve them through the mapping database and the header
snapshot, and render the Rust alias layer and the C thunks of ``rust/rocm_compat``."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from tools.errors import ToolError
from tools.gen_compat.headers import Snapshot
from tools.gen_compat.model import RUST_TYPES, Prototype
from tools.hipify.mapping import Entry, MappingDatabase, Version, format_version, parse_version

CRATE = Path("rust/rocm_compat")
GENERATED_RS = CRATE / "src" / "generated"
GENERATED_C = CRATE / "shim" / "generated"
GENERATED_HEADER = CRATE / "include" / "monarch" / "cuda_compat.h"
HOST_RUNTIME = CRATE / "src" / "host" / "runtime.rs"
THUNK_PREFIX = "mr_compat_"

_STRIP = re.compile(r'//[^\n]*|/\*.*?\*/|b?"(?:\\.|[^"\\])*"', re.S)
_NAME = re.compile(r"\b(?:cuda[A-Z]\w*|CU[a-z]\w*|CU_[A-Z0-9_]+|cu[A-Z]\w*)\b")
_HOST_FN = re.compile(r"^\s*pub\s+(?:unsafe\s+)?fn\s+(cuda\w+)\s*\(", re.M)
_RAW_TYPES = ("c_char", "c_int", "c_uint", "c_longlong", "c_ulonglong", "c_void")


@dataclass(frozen=True)
class Use:
    path: str  # relative to the repository root
    line: int

    def __str__(self) -> str:
        return f"{self.path}:{self.line}"


def scan_workspace(root: Path) -> dict[str, list[Use]]:
    """CUDA-looking identifiers in the workspace's Rust code (comments and strings ignored), with where."""
    found: dict[str, list[Use]] = {}
    rust = root / "rust"
    generated = root / GENERATED_RS
    for path in sorted(rust.rglob("*.rs")):
        if generated in path.parents or "target" in path.relative_to(rust).parts:
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        stripped = _STRIP.sub(lambda m: "\n" * m.group(0).count("\n"), text)
        for lineno, line in enumerate(stripped.splitlines(), 1):
            for name in _NAME.findall(line):
                found.setdefault(name, []).append(Use(path.relative_to(root).as_posix(), lineno))
    return found


def host_emulated(root: Path) -> set[str]:
    """Functions the cpu platform emulates by hand (``pub unsafe fn cudaX`` in host/runtime.rs)."""
    path = root / HOST_RUNTIME
    return set(_HOST_FN.findall(path.read_text(encoding="utf-8"))) if path.is_file() else set()


@dataclass(frozen=True)
class ErrorRow:
    cuda_name: str
    cuda_code: int
    hip_name: str  # "" when unmapped
    hip_code: int | None
    why_unmapped: str


@dataclass(frozen=True)
class Function:
    entry: Entry
    proto: Prototype  # CUDA's
    emulated: bool


@dataclass(frozen=True)
class Constant:
    name: str
    hip_name: str
    cuda_value: int
    hip_value: int
    rust_type: str = "c_int"


@dataclass
class Plan:
    snapshot: Snapshot
    types: list[str] = field(default_factory=list)
    functions: list[Function] = field(default_factory=list)
    constants: list[Constant] = field(default_factory=list)
    errors: list[ErrorRow] = field(default_factory=list)
    hip_only: list[tuple[str, int]] = field(default_factory=list)
    used_errors: list[str] = field(default_factory=list)
    hip_renames: dict[str, str] = field(default_factory=dict)


def _hip_version(snap: Snapshot) -> Version | None:
    return parse_version(".".join(snap.hip.version.split(".")[:2])) if snap.hip.version[:1].isdigit() else None


def error_rows(db: MappingDatabase, snap: Snapshot) -> tuple[list[ErrorRow], list[tuple[str, int]]]:
    """Every CUDA error enumerator with its HIP counterpart (name and value) or why it has none; and
    the HIP error values no CUDA name maps to."""
    rows: list[ErrorRow] = []
    version = _hip_version(snap)
    taken: dict[int, str] = {}
    for name, code in snap.cuda.errors.items():
        entry = db.lookup(name)
        hip_name, hip_code, why = "", None, ""
        if entry is None:
            why = "not in the mapping database"
        elif not entry.supported or not entry.hip_name:
            why = "HIPIFY marks it unsupported by HIP"
        elif entry.hip_name not in snap.hip.errors:
            why = f"{entry.hip_name} is not in the HIP {snap.hip.version} headers"
        elif not entry.available_in(version):
            why = f"{entry.hip_name} needs HIP {format_version(entry.hip_added)}"
        else:
            hip_name, hip_code = entry.hip_name, snap.hip.errors[entry.hip_name]
            if hip_code in taken:
                raise ToolError(
                    f"{name} and {taken[hip_code]} both map to HIP error {hip_code}: "
                    "the HIP -> CUDA error table would be ambiguous (fix the mapping database)"
                )
            taken[hip_code] = name
        rows.append(ErrorRow(name, code, hip_name, hip_code, why))
    hip_only: dict[int, str] = {}
    for hip_name, value in snap.hip.errors.items():
        if value not in taken:
            hip_only.setdefault(value, hip_name)  # the first of aliases with one value
    return rows, [(n, v) for v, n in hip_only.items()]


def build_plan(db: MappingDatabase, snap: Snapshot, used: dict[str, list[Use]], emulated: set[str]) -> Plan:
    plan = Plan(snapshot=snap, hip_renames=dict(snap.hip.renames))
    plan.errors, plan.hip_only = error_rows(db, snap)
    error_by_name = {row.cuda_name: row for row in plan.errors}
    version = _hip_version(snap)
    problems: list[str] = []
    types: set[str] = {"cudaError_t"}

    def where(name: str) -> str:
        return ", ".join(str(u) for u in used[name][:3]) + (" ..." if len(used[name]) > 3 else "")

    for name in sorted(used):
        entry = db.lookup(name)
        if name in error_by_name:
            row = error_by_name[name]
            plan.used_errors.append(name)
            if not row.hip_name:
                problems.append(f"{where(name)}: {name} has no HIP equivalent ({row.why_unmapped})")
            continue
        if entry is None or entry.library not in ("runtime", "driver"):
            continue  # not a CUDA runtime/driver name (e.g. one of the crate's own)
        if not entry.available_in(version):
            why = (
                "HIPIFY marks it unsupported by HIP"
                if not entry.supported or not entry.hip_name
                else f"{entry.hip_name} needs HIP {format_version(entry.hip_added)}, "
                f"the snapshot has {snap.hip.version}"
            )
            problems.append(f"{where(name)}: {name} cannot be bound on ROCm: {why}")
            continue
        if entry.kind == "type":
            if name not in RUST_TYPES:
                problems.append(
                    f"{where(name)}: type {name} has no Rust representation: add it to RUST_TYPES "
                    "(tools/gen_compat/model.py) or reach it through a C shim"
                )
            types.add(name)
        elif entry.kind == "enum":
            if name not in snap.cuda.enums or entry.hip_name not in snap.hip.enums:
                problems.append(f"{where(name)}: the value of {name} / {entry.hip_name} is not in the header snapshot")
                continue
            plan.constants.append(Constant(name, entry.hip_name, snap.cuda.enums[name], snap.hip.enums[entry.hip_name]))
        elif entry.kind == "function":
            if entry.library != "runtime":
                problems.append(
                    f"{where(name)}: {name} is a driver-API function; only runtime functions are bound "
                    "(the PyPI CUDA toolkit has no libcuda stub to link against; see docs/rocm_compat.md)"
                )
                continue
            if name not in snap.cuda.prototypes:
                problems.append(f"{where(name)}: no prototype of {name} in the CUDA header snapshot")
                continue
            if entry.hip_name not in snap.hip.prototypes:
                problems.append(
                    f"{where(name)}: {entry.hip_name} is not declared in the HIP {snap.hip.version} headers"
                )
                continue
            try:
                proto = Prototype.parse(snap.cuda.prototypes[name])
                for ctype in [p.ctype for p in proto.params] + [proto.ret]:
                    ctype.rust()  # raises for a type with no Rust representation
            except ToolError as err:
                problems.append(f"{where(name)}: {name}: {err}")
                continue
            for ctype in [p.ctype for p in proto.params] + [proto.ret]:
                types.update(ctype.named_types())
            if name not in emulated and proto.ret.c() != "cudaError_t":
                problems.append(
                    f"{where(name)}: {name} returns {proto.ret.c()}, so the cpu platform needs a hand-written "
                    f"emulation in {HOST_RUNTIME}"
                )
            plan.functions.append(Function(entry, proto, name in emulated))
        else:
            problems.append(f"{where(name)}: {name} is a {entry.kind}; the generator binds types, enums and functions")
    if problems:
        raise ToolError("the workspace uses CUDA names rocm_compat cannot provide:\n  " + "\n  ".join(problems))
    missing = sorted(t for t in types if db.lookup(t) is None)
    if missing:
        raise ToolError(f"types {missing} are not in the mapping database")
    _add_enum_families(plan, db, types, version)
    plan.types = sorted(types)
    return plan


def _add_enum_families(plan: Plan, db: MappingDatabase, types: set[str], version: Version | None) -> None:
    """A used enumerator brings its enum type (when the crate has a Rust name for it), and a used enum
    type brings every enumerator HIP provides: ``cudaMemcpyKind`` comes with all of its values."""
    snap = plan.snapshot
    for c in plan.constants:
        enum = snap.cuda.enum_of.get(c.name, "")
        if enum in RUST_TYPES and db.lookup(enum) is not None:
            types.add(enum)
    have = {c.name for c in plan.constants}
    for name, enum in sorted(snap.cuda.enum_of.items()):
        if enum not in types or name in have:
            continue
        entry = db.lookup(name)
        if entry is None or not entry.available_in(version) or entry.hip_name not in snap.hip.enums:
            continue  # HIP has no such value: not provided on any platform
        plan.constants.append(Constant(name, entry.hip_name, snap.cuda.enums[name], snap.hip.enums[entry.hip_name]))
    plan.constants = sorted(
        (
            Constant(c.name, c.hip_name, c.cuda_value, c.hip_value, snap.cuda.enum_of.get(c.name, "c_int"))
            if snap.cuda.enum_of.get(c.name) in types
            else c
            for c in plan.constants
        ),
        key=lambda c: (c.rust_type, c.cuda_value, c.name),
    )


# ---------------------------------------------------------------------------------------------- render


def _banner(comment: str, plan: Plan) -> str:
    snap = plan.snapshot
    return (
        f"{comment} @generated by `python -m tools gen-compat` from the hipify mapping database "
        f"(tools/hipify/data/cuda2hip.tsv + extra.tsv) and tools/gen_compat/data/headers.tsv "
        f"(CUDA {snap.cuda.version}, HIP {snap.hip.version}). Do not edit: change the workspace or the data and "
        "regenerate."
    )


def _raw_imports(body: str) -> str:
    used = [t for t in _RAW_TYPES if re.search(rf"\b{t}\b", body)]
    if not used:
        return ""
    return f"use std::os::raw::{{{', '.join(used)}}};\n" if len(used) > 1 else f"use std::os::raw::{used[0]};\n"


def _fn_sig(fn: Function) -> tuple[str, str]:
    params = ", ".join(f"{p.name}: {p.ctype.rust()}" for p in fn.proto.params)
    ret = fn.proto.ret.rust()
    return params, "" if ret == "()" else f" -> {ret}"


def render_runtime(plan: Plan) -> str:
    db_types = []
    for name in plan.types:
        rust = RUST_TYPES[name]
        if rust is None:
            db_types.append(f"pub use crate::handles::{name};")
        else:
            db_types.append(f"pub type {name} = {rust};")
    consts = []
    for c in plan.constants:
        if c.cuda_value == c.hip_value:
            consts.append(
                f"/// `{c.hip_name}` on ROCm (same value).\npub const {c.name}: {c.rust_type} = {c.cuda_value};"
            )
        else:
            consts.append(
                f"/// `{c.hip_name}` on ROCm.\npub const {c.name}: {c.rust_type} = "
                f"crate::generated::errors::pick({c.cuda_value}, {c.hip_value});"
            )
    externs, checks, stubs = [], [], []
    emulated = [f.entry.cuda_name for f in plan.functions if f.emulated]
    for fn in plan.functions:
        name, hip = fn.entry.cuda_name, fn.entry.hip_name
        params, ret = _fn_sig(fn)
        renamed = plan.hip_renames.get(hip)
        note = f" (a macro for `{renamed}` in these headers)" if renamed else ""
        externs.append(
            f"    /// `{hip}` on ROCm (HIP >= {format_version(fn.entry.hip_added) or '?'}){note}.\n"
            f'    #[link_name = "{THUNK_PREFIX}{name}"]\n'
            f"    pub fn {name}({params}){ret};"
        )
        types = ", ".join(p.ctype.rust() for p in fn.proto.params)
        if fn.emulated:
            checks.append(f"    let _: unsafe fn({types}){ret} = crate::host::{name};")
        else:
            args = ", ".join(f"_{p.name}: {p.ctype.rust()}" for p in fn.proto.params)
            stubs.append(
                '#[cfg(mr_platform = "cpu")]\n'
                f"/// Not emulated on the cpu platform: returns `cudaErrorNotSupported`.\n"
                f"pub unsafe fn {name}({args}){ret} {{\n"
                "    crate::generated::errors::cudaErrorNotSupported\n}"
            )
    body = "\n".join(db_types) + "\n\n"
    if consts:
        body += "\n".join(consts) + "\n\n"
    body += '#[cfg(not(mr_platform = "cpu"))]\nextern "C" {\n' + "\n".join(externs) + "\n}\n\n"
    if emulated:
        body += f'#[cfg(mr_platform = "cpu")]\npub use crate::host::{{{", ".join(emulated)}}};\n'
        body += (
            "// The cpu emulation has exactly the generated signatures.\n"
            '#[cfg(mr_platform = "cpu")]\nconst _: () = {\n' + "\n".join(checks) + "\n};\n"
        )
    if stubs:
        body += "\n" + "\n\n".join(stubs) + "\n"
    header = (
        _banner("//", plan)
        + "\n//! The CUDA runtime names the workspace uses (a scan of rust/), bound to CUDA or HIP through the\n"
        "//! C thunks in shim/generated/ (compiled against the toolkit found, so prototypes and versioned\n"
        "//! symbols come from its headers), or to the host emulation on the cpu platform.\n"
        "#![allow(clippy::missing_safety_doc)]\n"
    )
    return header + _raw_imports(body) + "\n" + body


def render_errors(plan: Plan) -> str:
    consts, table = [], []
    for row in plan.errors:
        if row.hip_code is None:
            consts.append(
                f"/// No HIP equivalent ({row.why_unmapped}): not defined on ROCm.\n"
                f'#[cfg(not(mr_platform = "rocm"))]\npub const {row.cuda_name}: cudaError_t = {row.cuda_code};'
            )
            table.append(f'    ErrorEntry::unmapped("{row.cuda_name}\\0", {row.cuda_code}, "{row.why_unmapped}"),')
        else:
            value = str(row.cuda_code) if row.cuda_code == row.hip_code else f"pick({row.cuda_code}, {row.hip_code})"
            consts.append(f"/// `{row.hip_name}` on ROCm.\npub const {row.cuda_name}: cudaError_t = {value};")
            table.append(
                f'    ErrorEntry::mapped("{row.cuda_name}\\0", {row.cuda_code}, "{row.hip_name}", {row.hip_code}),'
            )
    hip_only = "\n".join(f'    ("{n}", {v}),' for n, v in plan.hip_only)
    return (
        _banner("//", plan)
        + "\n//! The CUDA error enumerators with their values on each platform, and the table that translates\n"
        "//! a HIP error value back to its CUDA name (the numbers differ: cudaErrorInvalidTexture is 18,\n"
        "//! hipErrorInvalidTexture 912, and 911/912 mean other errors in CUDA).\n"
        "use crate::error::ErrorEntry;\nuse crate::generated::runtime::cudaError_t;\n\n"
        + _PICK
        + "\n".join(consts)
        + "\n\n/// Every CUDA error enumerator of the headers, with its HIP counterpart or why it has none.\n"
        "pub(crate) static ERRORS: &[ErrorEntry] = &[\n"
        + "\n".join(table)
        + "\n];\n\n/// HIP error values that no CUDA name maps to.\n"
        "pub(crate) static HIP_ONLY: &[(&str, cudaError_t)] = &[\n" + hip_only + "\n];\n"
    )


_PICK = (
    "/// The CUDA value on cuda/cpu, the HIP value on rocm.\n"
    "#[allow(dead_code)] // used only when some value differs between the two\n"
    "pub(crate) const fn pick(cuda: cudaError_t, hip: cudaError_t) -> cudaError_t {\n"
    '    if cfg!(mr_platform = "rocm") {\n        hip\n    } else {\n        cuda\n    }\n}\n\n'
)


def render_mod(plan: Plan) -> str:
    return (
        _banner("//", plan) + "\n//! Generated alias layer: see docs/rocm_compat.md.\n"
        "#[rustfmt::skip]\npub mod errors;\n#[rustfmt::skip]\npub mod runtime;\n"
    )


def _c_decl(ctype_c: str, name: str) -> str:
    return f"{ctype_c}{name}" if ctype_c.endswith("*") else f"{ctype_c} {name}"


def render_c(plan: Plan, platform: str, db: MappingDatabase) -> str:
    """The thunks ``mr_compat_cudaX`` for ``platform`` ("cuda" or "hip"), each calling the toolkit's function
    through its header (so a ``#define``-versioned symbol such as hipGetDevicePropertiesR0600 is the one
    called), after a static check that the header's prototype is the one the Rust side was generated from."""
    hip = platform == "hip"
    rename: dict[str, str] = {}
    if hip:
        for name in plan.types:
            entry = db.lookup(name)
            if entry is not None and entry.hip_name:
                rename[name] = entry.hip_name
    lines = [
        "/* " + _banner("", plan).strip() + " */",
        "/* Thunks: every CUDA-named function rocm_compat binds, called through the real "
        + ("HIP" if hip else "CUDA")
        + " headers. */",
        "#include <hip/hip_runtime_api.h>" if hip else "#include <cuda_runtime_api.h>",
        "#include <stddef.h>",
        "",
        "#define MR_SAME_PROTOTYPE(fn, type) \\",
        "  _Static_assert(__builtin_types_compatible_p(__typeof__(&fn), type), \\",
        '                 #fn " in the headers found differs from the prototype rocm_compat was generated from; " \\',
        '                 "regenerate: python -m tools gen-compat --refresh-headers")',
        "",
    ]
    err_t = "hipError_t" if hip else "cudaError_t"
    for fn in plan.functions:
        target = fn.entry.hip_name if hip else fn.entry.cuda_name
        r = rename if hip else None
        ret = fn.proto.ret.c(r)
        ptypes = ", ".join(p.ctype.c(r) for p in fn.proto.params) or "void"
        params = ", ".join(_c_decl(p.ctype.c(r), p.name) for p in fn.proto.params) or "void"
        args = ", ".join(p.name for p in fn.proto.params)
        lines.append(f"MR_SAME_PROTOTYPE({target}, {ret} (*)({ptypes}));")
        lines.append(f"{_c_decl(ret, THUNK_PREFIX + fn.entry.cuda_name)}({params}) {{ return {target}({args}); }}")
    lines.append("")
    lines.append("/* The values rocm_compat hard-codes for the enumerators the workspace uses. */")
    by_name = {row.cuda_name: row for row in plan.errors}
    for name in plan.used_errors:
        row = by_name[name]
        target, value = (row.hip_name, row.hip_code) if hip else (row.cuda_name, row.cuda_code)
        lines.append(f'_Static_assert({target} == {value}, "{target} is not {value} in the headers found");')
    for c in plan.constants:
        target, value = (c.hip_name, c.hip_value) if hip else (c.name, c.cuda_value)
        lines.append(f'_Static_assert({target} == {value}, "{target} is not {value} in the headers found");')
    lines.append(f'_Static_assert(sizeof({err_t}) == sizeof(int), "{err_t} is not an int");')
    if "CUdeviceptr" in plan.types:
        dptr = "hipDeviceptr_t" if hip else "CUdeviceptr"
        if not hip:
            lines.insert(3, "#include <cuda.h>")
        lines.append(f'_Static_assert(sizeof({dptr}) == 8, "{dptr} is not 64-bit");')
    return "\n".join(lines) + "\n"


def render_c_header(db: MappingDatabase, snap: Snapshot) -> str:
    """A llama.cpp-style compile-time alias header for C/C++ projects that prefer it to source translation:
    every CUDA runtime name HIP provides in the snapshot's HIP version, as a ``#define`` to its HIP name.
    Functions and enumerators are only those the HIP headers of the snapshot declare."""
    version = _hip_version(snap)
    plan = Plan(snapshot=snap)
    rows: dict[str, list[str]] = {"type": [], "function": [], "enum": [], "define": []}
    for entry in sorted(db, key=lambda e: e.cuda_name):
        if entry.library != "runtime" or entry.kind not in rows or entry.cuda_name == entry.hip_name:
            continue
        if not entry.available_in(version):
            continue
        if entry.kind == "function" and entry.hip_name not in snap.hip.prototypes:
            continue
        if entry.kind == "enum" and entry.hip_name not in snap.hip.enums and entry.hip_name not in snap.hip.errors:
            continue
        if not re.fullmatch(r"\w+", entry.cuda_name) or not re.fullmatch(r"\w+", entry.hip_name):
            continue
        rows[entry.kind].append(f"#define {entry.cuda_name} {entry.hip_name}")
    lines = [
        "/* " + _banner("", plan).strip() + " */",
        "/* CUDA runtime names for C/C++ on HIP, by #define: include this instead of <cuda_runtime_api.h>.",
        " * Define MONARCH_CUDA_COMPAT_HIP (with __HIP_PLATFORM_AMD__) to get HIP; otherwise this is CUDA itself.",
        " * Caveats an alias cannot fix (rust/rocm_compat handles them for Rust; see docs/rocm_compat.md):",
        " *   - error values are HIP's: compare with the cudaError* names, never with numbers, and",
        " *     cudaGetErrorName() returns HIP names;",
        " *   - HIP keeps a failed call's error in the last-error slot until read: clear handled errors",
        " *     with cudaGetLastError();",
        " *   - CUdeviceptr is a pointer on HIP, warpSize is 64 on CDNA. */",
        "#pragma once",
        "#ifdef MONARCH_CUDA_COMPAT_HIP",
        "#include <hip/hip_runtime_api.h>",
    ]
    for kind, title in (("type", "types"), ("function", "functions"), ("enum", "enumerators"), ("define", "macros")):
        lines.append(f"/* {title} ({len(rows[kind])}) */")
        lines += rows[kind]
    lines += ["#else", "#include <cuda_runtime_api.h>", "#endif"]
    return "\n".join(lines) + "\n"


def render_all(root: Path, db: MappingDatabase, snap: Snapshot) -> dict[Path, str]:
    """Every generated file (path relative to ``root``) -> its text."""
    plan = build_plan(db, snap, scan_workspace(root), host_emulated(root))
    return {
        GENERATED_RS / "mod.rs": render_mod(plan),
        GENERATED_RS / "runtime.rs": render_runtime(plan),
        GENERATED_RS / "errors.rs": render_errors(plan),
        GENERATED_C / "compat_cuda.c": render_c(plan, "cuda", db),
        GENERATED_C / "compat_hip.c": render_c(plan, "hip", db),
        GENERATED_HEADER: render_c_header(db, snap),
    }


def stale(root: Path, outputs: Iterable[tuple[Path, str]]) -> list[Path]:
    """Generated files whose checked-in text differs from ``outputs``, plus extra files in the output dirs."""
    out: list[Path] = []
    expected = set()
    for rel, text in outputs:
        expected.add(rel)
        path = root / rel
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            out.append(rel)
    for folder in (GENERATED_RS, GENERATED_C):
        if (root / folder).is_dir():
            out += [
                p.relative_to(root) for p in sorted((root / folder).iterdir()) if p.relative_to(root) not in expected
            ]
    return out
