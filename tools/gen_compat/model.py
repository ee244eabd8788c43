"""C prototypes and types as the generator sees them, and their Rust and HIP spellings."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from tools.errors import ToolError

#: CUDA-named types the crate defines, with their Rust representation (same on every platform: an
#: opaque handle is a pointer on CUDA and HIP alike; enums are C ints). ``None``: hand-written in the
#: crate (``CUdeviceptr`` is an integer on CUDA and a pointer on HIP: a newtype in src/handles.rs).
RUST_TYPES: Mapping[str, str | None] = MappingProxyType(
    {
        "cudaError_t": "c_int",
        "cudaStream_t": "*mut c_void",
        "cudaEvent_t": "*mut c_void",
        "cudaMemcpyKind": "c_int",
        "CUdeviceptr": None,
    }
)

#: C scalar types -> Rust (std::os::raw / core types)
_SCALARS: Mapping[str, str] = MappingProxyType(
    {
        "void": "c_void",
        "int": "c_int",
        "unsigned int": "c_uint",
        "unsigned": "c_uint",
        "size_t": "usize",
        "float": "f32",
        "double": "f64",
        "char": "c_char",
        "long long": "c_longlong",
        "unsigned long long": "c_ulonglong",
    }
)

_PARAM = re.compile(r"^(?P<type>.*?[\s*])(?P<name>[A-Za-z_]\w*)$")


@dataclass(frozen=True)
class CType:
    """A C type reduced to what bindings need: base name, innermost ``const``, pointer depth."""

    base: str  # "void", "int", "cudaStream_t", "cudaMemcpyKind" (``enum`` dropped)
    const: bool
    pointers: int
    is_enum: bool = False

    @classmethod
    def parse(cls, text: str) -> CType:
        pointers = text.count("*")
        words = text.replace("*", " ").split()
        const = "const" in words
        words = [w for w in words if w not in ("const", "volatile")]
        is_enum = bool(words) and words[0] == "enum"
        if is_enum:
            words = words[1:]
        if not words or "struct" in words or "union" in words or "(" in text:
            raise ToolError(f"unsupported C type {text!r} (structs and callbacks go through a C shim)")
        return cls(" ".join(words), const, pointers, is_enum)

    def c(self, rename: Mapping[str, str] | None = None) -> str:
        base = (rename or {}).get(self.base, self.base)
        enum = "enum " if self.is_enum and rename is None else ""
        return f"{'const ' if self.const else ''}{enum}{base}{' ' if self.pointers else ''}{'*' * self.pointers}"

    def rust(self) -> str:
        if self.base in _SCALARS:
            inner = _SCALARS[self.base]
        elif self.base in RUST_TYPES:
            inner = self.base
        else:
            raise ToolError(
                f"no Rust representation for the C type {self.base!r}: "
                "add it to RUST_TYPES in tools/gen_compat/model.py"
            )
        if inner == "c_void" and self.pointers == 0:
            return "()"
        for level in range(self.pointers):
            qual = "const" if self.const and level == 0 else "mut"
            inner = f"*{qual} {inner}"
        return inner

    def named_types(self) -> list[str]:
        return [self.base] if self.base in RUST_TYPES else []


@dataclass(frozen=True)
class Param:
    name: str
    ctype: CType


@dataclass(frozen=True)
class Prototype:
    name: str
    ret: CType
    params: tuple[Param, ...]

    @classmethod
    def parse(cls, text: str) -> Prototype:
        m = re.fullmatch(r"\s*(?P<ret>.+?[\s*])(?P<name>\w+)\s*\((?P<args>.*)\)\s*", text)
        if m is None:
            raise ToolError(f"cannot parse the prototype {text!r}")
        args = m.group("args").strip()
        params: list[Param] = []
        if args and args != "void":
            for i, raw in enumerate(args.split(",")):
                arg = raw.strip()
                pm = _PARAM.match(arg)
                if pm is None or pm.group("type").strip() in ("", "const", "enum", "unsigned"):
                    ctype, name = CType.parse(arg), f"arg{i}"
                else:
                    ctype, name = CType.parse(pm.group("type")), pm.group("name")
                params.append(Param(_rust_ident(name), ctype))
        return cls(m.group("name"), CType.parse(m.group("ret")), tuple(params))


def _rust_ident(name: str) -> str:
    return f"{name}_" if name in ("type", "fn", "ref", "mut", "match", "loop", "move", "self", "in") else name
