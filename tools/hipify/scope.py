"""Where a finding counts: the role of each file in the build, and the branches the ROCm build compiles.

- **Roles** (``roles``). A *CUDA unit* is a file the build compiles as CUDA: ``.cu`` by default (the build backend,
  which compiles every source of csrc/ as HIP, passes its suffixes; ``--cuda-units``). A *CUDA header* is a file a
  CUDA unit includes (transitively, through the includes the tree pass resolves), a ``.cuh``, or a header with
  device code (``__global__``/``__device__``): only a CUDA compiler can compile it. *CUDA host code* is a file that
  uses CUDA without being compiled as CUDA: it includes a CUDA header (the runtime, a CUDA library such as cuDNN or
  cuBLAS: a header the mapping database knows, or a CUDA-only one), the translation changes CUDA names in it, or it
  has CUDA-name findings; and a C/C++ unit that includes such a file, with what it includes. The host compiler
  compiles it against CUDA, so CUDA names block there, but its assembly is the CPU's. Everything else is *other*
  (CPU code), where what would block is summarised, one note per file (tools/hipify/tree.py).
- **Environments** (``environments``). The compiles a file is part of: HIP-Clang's device and host passes (files a
  CUDA unit reaches), a host C/C++ compiler (files a CPU unit reaches), all three for a file nothing includes.
- **Dead branches** (``dead_regions``). A branch is dead when its condition is decided false in every environment
  of its file, from what is known: the build's ``-D``/``-U`` (given by the user or the build backend), the values
  HIP-Clang predefines (``data/macros.tsv``), the CUDA macros HIP does not define (the database's unsupported
  ``define`` names, e.g. ``CUDART_VERSION``), and the project's own macros whose every ``#define``/``#undef`` sits in
  a dead branch (computed to a fixpoint). A macro the project defines in a live branch, or that nothing mentions,
  is not known: a condition that depends on it is not decided, and its branches stay. Conditions are read as the
  HIP compile sees them: a CUDA name the translation renames is looked up under its HIP name
  (``__CUDACC__`` -> ``__HIPCC__``, ``__CUDA_ARCH__`` -> ``__HIP_DEVICE_COMPILE__``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import lru_cache
from pathlib import Path

from tools.errors import ToolError
from tools.hipify import cond

MACROS_DB = Path(__file__).resolve().parent / "data" / "macros.tsv"
_COLUMNS = ("name", "kind", "hip_device", "hip_host", "host_cc", "source")

#: the environments: HIP-Clang's device pass, its host pass, a host C/C++ compiler
DEVICE, HOST, HOST_CC = 0, 1, 2
ENV_NAMES = ("HIP device pass", "HIP host pass", "host compiler")

CUDA_UNIT = "cuda-unit"
CUDA_HEADER = "cuda-header"
CUDA_HOST = "cuda-host"
OTHER = "other"
ROLES = (CUDA_UNIT, CUDA_HEADER, CUDA_HOST, OTHER)
#: the roles of CUDA code: compiled as CUDA, or against CUDA's headers (``in_cuda_unit`` in the report)
CUDA_ROLES = frozenset({CUDA_UNIT, CUDA_HEADER, CUDA_HOST})
DEFAULT_CUDA_UNITS = (".cu",)

#: header suffixes (a header is never a unit)
HEADER_SUFFIXES = frozenset({".h", ".hh", ".hpp", ".hxx", ".h++", ".cuh", ".inl", ".inc", ".ipp", ".tpp"})
#: what a build compiles as a unit of its own (C, C++, CUDA, HIP)
UNIT_SUFFIXES = frozenset({".c", ".cc", ".cpp", ".cxx", ".c++", ".cu", ".hip"})

Define = tuple[str, "str | None"]  # (name, value): -D NAME=VALUE (VALUE "1" for -D NAME); (name, None): -U NAME


class Macros:
    """``data/macros.tsv``: the CUDA compiler-identification macros and the values of HIP-Clang's predefined ones."""

    __slots__ = ("compiler_ids", "values")

    def __init__(self, compiler_ids: frozenset[str], values: Mapping[str, tuple[cond.Value | None, ...]]) -> None:
        self.compiler_ids = compiler_ids
        self.values = dict(values)  # name -> (device, host, host compiler): int, UNDEF, or None (not known)


def _value(cell: str, where: str) -> cond.Value | None:
    if cell == "":
        return None
    if cell == "-":
        return cond.UNDEF
    try:
        return int(cell, 0)
    except ValueError:
        raise ToolError(f"{where}: bad value {cell!r} (an integer, '-' for undefined, or empty)") from None


@lru_cache(maxsize=2)
def load_macros(path: Path = MACROS_DB) -> Macros:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise ToolError(f"cannot read {path}: {err.strerror or err}") from None
    ids: set[str] = set()
    values: dict[str, tuple[cond.Value | None, ...]] = {}
    header = False
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        cells = line.split("\t")
        where = f"{path}:{lineno}"
        if not header:
            if tuple(cells) != _COLUMNS:
                raise ToolError(f"{where}: the header row must be {' '.join(_COLUMNS)}")
            header = True
            continue
        if len(cells) != len(_COLUMNS) or cells[1] not in ("compiler-id", "predefined") or not cells[0]:
            raise ToolError(f"{where}: bad row {line!r} (want {len(_COLUMNS)} cells, kind compiler-id or predefined)")
        if cells[1] == "compiler-id":
            ids.add(cells[0])
        vals = tuple(_value(c, where) for c in cells[2:5])
        if any(v is not None for v in vals):
            values[cells[0]] = vals
    return Macros(frozenset(ids), values)


def parse_define(text: str, undefine: bool = False) -> Define:
    """``NAME``, ``NAME=VALUE`` (``-D``) or ``NAME`` (``-U``) as a compile gets them; a bad one is a ToolError."""
    name, eq, value = text.partition("=")
    name = name.strip()
    if not cond._NAME.fullmatch(name) or (undefine and eq):
        option = "-U NAME" if undefine else "-D NAME[=VALUE]"
        raise ToolError(f"bad define {text!r}: expected {option} with a C identifier as NAME, as the compiler takes it")
    if undefine:
        return (name, None)
    return (name, value if eq else "1")


def define_values(defines: Sequence[Define]) -> dict[str, cond.Value]:
    """The given defines as values (the last one of a name wins, as on a compiler's command line)."""
    out: dict[str, cond.Value] = {}
    for name, value in defines:
        if value is None:
            out[name] = cond.UNDEF
        else:
            number = _number(value)
            out[name] = number if number is not None else cond.DEFINED
    return out


def _number(text: str) -> int | None:
    node = cond.parse(text) if text.strip() else None
    if node is None:
        return 0 if not text.strip() else None  # -D X= defines X as empty: 0 in #if
    return cond.evaluate(node, lambda _n: None)


# -- roles -----------------------------------------------------------------------------------------------------
def _suffix(key: str) -> str:
    dot = key.rfind(".")
    return key[dot:].lower() if dot > key.rfind("/") else ""


def roles(
    keys: Iterable[str],
    links: Mapping[str, Sequence[str]],
    device: Iterable[str],
    cuda_units: Sequence[str] = DEFAULT_CUDA_UNITS,
    uses_cuda: Iterable[str] = (),
) -> dict[str, str]:
    """Each file's role (see the module doc): ``links`` are the project includes the tree pass resolved,
    ``device`` the files with device code, ``uses_cuda`` those that include a CUDA header or use CUDA's API."""
    unit_suffixes = {s.lower() for s in cuda_units}
    out = {k: OTHER for k in keys}
    devices = set(device)
    todo = [k for k in out if _suffix(k) in unit_suffixes]
    for k in todo:
        out[k] = CUDA_UNIT
    for k, role in list(out.items()):
        if role == OTHER and (_suffix(k) == ".cuh" or (k in devices and _suffix(k) in HEADER_SUFFIXES)):
            out[k] = CUDA_HEADER
            todo.append(k)
    while todo:
        k = todo.pop()
        for nxt in links.get(k, ()):
            if out.get(nxt) == OTHER:
                out[nxt] = CUDA_HEADER
                todo.append(nxt)
    # host code of the CUDA build: a C/C++ unit that uses CUDA (itself or through its project headers), what it
    # includes, and any other file that uses CUDA
    users = set(uses_cuda)
    for unit in [k for k, r in out.items() if r == OTHER and _suffix(k) in UNIT_SUFFIXES]:
        reach = _closure([unit], links)
        if reach & users:
            for k in reach:
                if out.get(k) == OTHER:
                    out[k] = CUDA_HOST
    for k in users:
        if out.get(k) == OTHER:
            out[k] = CUDA_HOST
    return out


def _closure(starts: Iterable[str], links: Mapping[str, Sequence[str]]) -> set[str]:
    seen: set[str] = set()
    stack = list(starts)
    while stack:
        k = stack.pop()
        if k not in seen:
            seen.add(k)
            stack += links.get(k, ())
    return seen


def environments(
    keys: Iterable[str], links: Mapping[str, Sequence[str]], role: Mapping[str, str]
) -> dict[str, tuple[int, ...]]:
    """The compiles each file is part of (DEVICE, HOST, HOST_CC): the HIP passes for CUDA units and headers, the
    host compiler for files a CPU unit reaches, all of them for a header nothing includes (and what it includes)."""
    keys = list(keys)
    included = {t for k in keys for t in links.get(k, ())}
    hip = {k for k in keys if role.get(k, OTHER) in (CUDA_UNIT, CUDA_HEADER)}
    cpu = _closure((k for k in keys if k not in hip and _suffix(k) in UNIT_SUFFIXES), links)
    orphans = _closure((k for k in keys if k not in included and _suffix(k) not in UNIT_SUFFIXES), links)
    out: dict[str, tuple[int, ...]] = {}
    for k in keys:
        envs: list[int] = []
        if k in hip or k in orphans:
            envs += [DEVICE, HOST]
        if k in cpu or k in orphans:
            envs.append(HOST_CC)
        out[k] = tuple(envs) or (DEVICE, HOST, HOST_CC)
    return out


# -- dead branches ---------------------------------------------------------------------------------------------
def builtin_lookup(env: int, hip_name: Callable[[str], str], undefined_in_hip: Callable[[str], bool]) -> cond.Lookup:
    """What is known in environment ``env`` without the build's defines or the project: HIP-Clang's predefined
    macros, the CUDA macros HIP does not define."""
    table = load_macros()

    def lookup(name: str) -> cond.Value | None:
        hip = hip_name(name)
        vals = table.values.get(hip) or table.values.get(name)
        if vals is not None:
            return vals[env]
        return cond.UNDEF if undefined_in_hip(name) else None

    return lookup


class Branches:
    """The branches of a tree's files, decided for the ROCm build (see the module doc): ``dead[file]`` are the line
    ranges no compile of the file sees."""

    def __init__(
        self,
        files: Mapping[str, Sequence[cond.Directive]],
        envs: Mapping[str, tuple[int, ...]],
        defines: Sequence[Define],
        hip_name: Callable[[str], str],
        undefined_in_hip: Callable[[str], bool],
        *,
        macros: Macros | None = None,
    ) -> None:
        """``hip_name(name)``: the name the translation writes for ``name``; ``undefined_in_hip(name)``: a CUDA
        macro HIP does not define."""
        self.table = macros or load_macros()
        self.given = define_values(defines)
        self.envs = envs
        self.files = files
        self.branches = {
            k: cond.branches(d) for k, d in files.items() if any(x[0] in ("if", "ifdef", "ifndef") for x in d)
        }
        self._hip_name = hip_name
        self._undefined = undefined_in_hip
        self._renamed: dict[str, str] = {}
        self._undefined_cache: dict[str, bool] = {}
        # the project's #define/#undef sites: (file, line) per name (as written)
        self.sites: dict[str, list[tuple[str, int]]] = {}
        for k, dirs in files.items():
            for kind, line, _last, name in dirs:
                if kind in ("define", "undef") and name:
                    self.sites.setdefault(name, []).append((k, line))
        self.settled: set[str] = set()  # project macros whose every site is dead
        self.lookups = [self._lookup(e) for e in (DEVICE, HOST, HOST_CC)]
        # the names each file's conditions read (a file is decided again only when one of them is newly settled)
        reads = {
            k: {n for b in bs if b.cond is not None for n in cond.names(b.cond)} for k, bs in self.branches.items()
        }
        self.dead: dict[str, list[tuple[int, int]]] = {}
        todo = list(self.branches)
        while todo:
            for k in todo:
                self.dead[k] = cond.dead_lines(self.branches[k], self._for(k))
            newly = {
                name
                for name, where in self.sites.items()
                if name not in self.settled and all(cond.in_ranges(line, self.dead.get(k, ())) for k, line in where)
            }
            self.settled |= newly
            todo = [k for k, names in reads.items() if names & newly] if newly else []
        self.dead = {k: v for k, v in self.dead.items() if v}

    def _undefined_in_hip(self, name: str) -> bool:
        hit = self._undefined_cache.get(name)
        if hit is None:
            hit = self._undefined_cache[name] = self._undefined(name)
        return hit

    def hip(self, name: str) -> str:
        hit = self._renamed.get(name)
        if hit is None:
            hit = self._renamed[name] = self._hip_name(name)
        return hit

    def _for(self, key: str) -> list[cond.Lookup]:
        return [self.lookups[e] for e in self.envs.get(key, (DEVICE, HOST, HOST_CC))]

    def _lookup(self, env: int) -> cond.Lookup:
        def lookup(name: str) -> cond.Value | None:
            project = name in self.sites
            if project and name not in self.settled:
                return None  # the project defines it where the build may see it
            hip = self.hip(name)
            if hip in self.given:
                return self.given[hip]
            vals = self.table.values.get(hip) or self.table.values.get(name)
            if vals is not None:
                return vals[env]
            if project or self._undefined_in_hip(name):
                return cond.UNDEF  # only in dead branches / a CUDA macro HIP does not define
            return None

        return lookup

    def is_dead(self, key: str, line: int) -> bool:
        ranges = self.dead.get(key)
        return ranges is not None and cond.in_ranges(line, ranges)

    def in_condition(self, key: str, line: int) -> bool:
        """Whether ``line`` is part of an ``#if``/``#ifdef``/``#ifndef``/``#elif`` of the file."""
        return any(b.line <= line < b.first for b in self.branches.get(key, ()))

    def matters(self, key: str, line: int, name: str, comparison: bool = False) -> bool:
        """Whether a finding on the condition of the ``#if``/``#elif`` at ``line`` (the name ``name``, or, with
        ``comparison``, a ``__CUDA_ARCH__`` comparison written ``name``) is about something the ROCm build reads: not
        when no compile of the file reaches the directive (a dead enclosing branch, an earlier branch of its group
        taken), nor when the condition's value is the same either way: ``!defined(GGML_USE_HIP) && __CUDA_ARCH__ >=
        X`` or ``... && CUDART_VERSION >= N`` with ``-D GGML_USE_HIP``. A comparison is asked about in HIP's device
        pass (the host pass sees no change: ``__CUDA_ARCH__`` is undefined there with CUDA too)."""
        bs = self.branches.get(key)
        index = next((i for i, b in enumerate(bs or ()) if b.line <= line < b.first), -1)
        if bs is None or index < 0 or bs[index].cond is None:
            return True
        b = bs[index]
        whole = b.cond
        assert whole is not None
        envs = (DEVICE,) if comparison else self.envs.get(key, (DEVICE, HOST, HOST_CC))
        for env in envs:
            look = self.lookups[env]
            states, befores = cond.walk(bs, look)
            if (b.parent >= 0 and states[b.parent] == 0) or befores[index] == 1:
                continue  # this compile does not read the directive
            if comparison:
                for node in _comparisons(whole, b.text, name):
                    span = (node[1], node[2])
                    yes, no = cond.evaluate(whole, look, {span: 1}), cond.evaluate(whole, look, {span: 0})
                    if yes is None or no is None or yes != no:
                        return True
                continue
            if cond.evaluate(whole, _without(look, name)) is None:
                return True
        return False

    def defined_at(self, name: str) -> tuple[str, int] | None:
        """Where the project ``#define``s ``name`` in a branch the build may compile, if it does."""
        if name in self.settled:
            return None
        for k, line in self.sites.get(name, ()):
            if not self.is_dead(k, line):
                return k, line
        return None


def _without(lookup: cond.Lookup, name: str) -> cond.Lookup:
    """``lookup`` that knows nothing of ``name``."""

    def inner(n: str) -> cond.Value | None:
        return None if n == name else lookup(n)

    return inner


def _comparisons(node: cond.Node, text: str, expr: str) -> list[cond.Node]:
    """The sub-expressions of ``node`` whose text (white space normalised) is ``expr``."""
    out: list[cond.Node] = []
    if " ".join(text[int(str(node[1])) : int(str(node[2]))].split()) == expr:
        out.append(node)
    for child in node[3:]:
        if isinstance(child, tuple):
            out += _comparisons(child, text, expr)
    return out
