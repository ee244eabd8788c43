"""Regenerate ``tools/hipify/data/cuda2hip.tsv`` from ROCm/HIPIFY's published tables.

Usage::

    python -m tools update-mappings HIPIFY_DIR [-o OUT.tsv] [--commit SHA] [--check]
    python -m tools update-mappings --git-dir /path/to/HIPIFY/.git [--rev HEAD] ...

``HIPIFY_DIR`` is a checkout of https://github.com/ROCm/HIPIFY (or a source release of it, or just its tables
directory). Only data is read: the Markdown tables ``*_supported_by_HIP.md`` (``docs/tables/`` up to ROCm 6.x,
``docs/reference/tables/`` from ROCm 7.0; hipify-clang writes the same files with ``--md``) give names, HIP names
and versions. The include map and the kind of each data-type name come from ``src/`` when the directory has it
(``src/CUDA2HIP.cpp``'s ``CUDA_INCLUDE_MAP``; ``CONV_TYPE``/``CONV_NUMERIC_LITERAL``/``CONV_DEFINE`` in
``src/*_types.cpp``), else from the hipify-perl script generated from the same tables (``bin/hipify-perl``, or
``hipify-perl`` at the top; hipify-clang writes it with ``--perl``), read as text. The HIPIFY version is
``--source-version``, else the newest ``## HIPIFY for ROCm X.Y.Z`` heading of ``CHANGELOG.md``; it is recorded in
the generated header (``#!source_version``). Nothing is downloaded.

A release whose source tarball cannot be fetched can still be read from its hipify-clang binary:
``ci/hipify-tables.sh`` runs ``hipify-clang --md`` and ``--perl`` in the ROCm 7.2 root into a directory of this
shape (see docs/hipify.md).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from tools.errors import ToolError
from tools.hipify.mapping import GENERATED_DB, Entry, parse_version, read_tsv, write_tsv

#: table file -> library name. Only the "by HIP" tables: the ROC/MIOpen ones describe other targets.
TABLES: dict[str, str] = {
    "CUDA_Runtime_API_functions_supported_by_HIP.md": "runtime",
    "CUDA_Driver_API_functions_supported_by_HIP.md": "driver",
    "CUDA_Device_API_supported_by_HIP.md": "device",
    "CUDA_RTC_API_supported_by_HIP.md": "rtc",
    "cuComplex_API_supported_by_HIP.md": "complex",
    "CUBLAS_API_supported_by_HIP.md": "blas",
    "CURAND_API_supported_by_HIP.md": "rand",
    "CUSPARSE_API_supported_by_HIP.md": "sparse",
    "CUSOLVER_API_supported_by_HIP.md": "solver",
    "CUFFT_API_supported_by_HIP.md": "fft",
    "CUB_API_supported_by_HIP.md": "cub",
    "CUDNN_API_supported_by_HIP.md": "dnn",
    "CUTENSOR_API_supported_by_HIP.md": "tensor",
}

#: where the tables are, newest layout first (HIPIFY moved them to docs/reference/tables in ROCm 7.0)
TABLE_DIRS = ("docs/reference/tables/", "docs/tables/", "")
#: where a hipify-perl script is looked for when there is no src/
PERL_SCRIPTS = ("bin/hipify-perl", "hipify-perl")
#: where hipify-clang's Python map (``--python``) is looked for when there is no src/: the kinds of all names,
#: the unsupported ones included (hipify-perl has kinds only for the names it substitutes)
PYTHON_MAPS = ("python/cuda_to_hip_mappings.py", "cuda_to_hip_mappings.py")

API_LIBRARY = {
    "API_DRIVER": "driver",
    "API_RUNTIME": "runtime",
    "API_COMPLEX": "complex",
    "API_BLAS": "blas",
    "API_RAND": "rand",
    "API_DNN": "dnn",
    "API_FFT": "fft",
    "API_SPARSE": "sparse",
    "API_SOLVER": "solver",
    "API_CUB": "cub",
    "API_RTC": "rtc",
    "API_CAFFE2": "caffe2",
    "API_TENSOR": "tensor",
}

#: hipify-perl's substitution types -> kinds (other types are function groups: memory, stream, library, ...)
PERL_KIND = {
    "type": "type",
    "numeric_literal": "enum",
    "define": "define",
    "device_type": "device_type",
    "device_function": "device_function",
    "include": "header",
    "include_cuda_main_header": "header",
    "include_cuda_main_header_v2": "header",
}
#: the library of a header from hipify-perl (which does not say): by the CUDA header's name
_HEADER_LIBRARY = (
    ("cublas", "blas"),
    ("curand", "rand"),
    ("cusparse", "sparse"),
    ("cusolver", "solver"),
    ("cufft", "fft"),
    ("cudnn", "dnn"),
    ("cutensor", "tensor"),
    ("cub/", "cub"),
    ("nvrtc", "rtc"),
    ("cuComplex", "complex"),
    ("caffe2/", "caffe2"),
    ("cuda.h", "driver"),
)

CONV_KIND = {
    "CONV_TYPE": "type",
    "CONV_NUMERIC_LITERAL": "enum",
    "CONV_DEFINE": "define",
    "CONV_DEVICE_TYPE": "device_type",
    "CONV_DEVICE_FUNC": "device_function",
}

_SRC_ENTRY = re.compile(r'\{\s*"([^"]+)"\s*,\s*\{\s*"([^"]*)"\s*,\s*"([^"]*)"\s*,\s*(CONV_\w+)\s*,\s*(API_\w+)([^}]*)')
_SECTION = re.compile(r"^#{2,}\s*(?:\*\*)?\s*(?:\d+\.\s*)?(.*?)\s*(?:\*\*)?\s*$")
_PY_ENTRY = re.compile(r'^\s*\("([^"]+)",\s*\("[^"]*",\s*(CONV_\w+),\s*(API_\w+)', re.M)
_PERL_SUB = re.compile(r"^sub (\w+) \{\n(.*?)^\}", re.M | re.S)
_PERL_SUBST = re.compile(r'^\s*subst\("((?:[^"\\]|\\.)*)", "((?:[^"\\]|\\.)*)", "(\w+)"\);', re.M)
_CHANGELOG_VERSION = re.compile(r"^#+\s*HIPIFY for ROCm\s+(\d+\.\d+(?:\.\d+)?)\s*$", re.M)


class Source:
    """Where the HIPIFY files come from: a directory, or a git repository at a revision."""

    def __init__(self, root: Path | None, git_dir: Path | None, rev: str) -> None:
        self.root = root
        self.git_dir = git_dir
        self.rev = rev

    def _git(self, *args: str) -> str:
        assert self.git_dir is not None
        try:
            proc = subprocess.run(["git", f"--git-dir={self.git_dir}", *args], capture_output=True, check=False)
        except FileNotFoundError:
            raise ToolError("git not found on PATH (needed for --git-dir)") from None
        if proc.returncode != 0:
            raise ToolError(f"git {' '.join(args)} failed: {proc.stderr.decode(errors='replace').strip()}")
        return proc.stdout.decode("utf-8", errors="replace")

    def tables_prefix(self) -> str:
        """The first of ``TABLE_DIRS`` that holds a table (the newest layout wins)."""
        for prefix in TABLE_DIRS:
            if any(self.exists(prefix + name) for name in TABLES):
                return prefix
        return TABLE_DIRS[-1] if self.root is not None else TABLE_DIRS[1]

    def exists(self, rel: str) -> bool:
        if self.git_dir is not None:
            try:
                self._git("cat-file", "-e", f"{self.rev}:{rel}")
            except ToolError:
                return False
            return True
        assert self.root is not None
        return (self.root / rel).is_file()

    def read(self, rel: str) -> str | None:
        if self.git_dir is not None:
            try:
                return self._git("show", f"{self.rev}:{rel}")
            except ToolError:
                return None
        assert self.root is not None
        path = self.root / rel
        if not path.is_file():
            return None
        return path.read_text(encoding="utf-8", errors="replace")

    def commit(self) -> str:
        if self.git_dir is not None:
            return self._git("rev-parse", self.rev).strip()
        assert self.root is not None
        if (self.root / ".git").exists():
            try:
                proc = subprocess.run(
                    ["git", "-C", str(self.root), "rev-parse", "HEAD"], capture_output=True, check=False
                )
            except FileNotFoundError:
                return ""
            if proc.returncode == 0:
                return proc.stdout.decode().strip()
        return ""

    def commit_date(self) -> str:
        if self.git_dir is not None:
            return self._git("show", "-s", "--format=%cs", self.rev).strip()
        return ""


@dataclass
class Row:
    cuda: str
    hip: str
    section: str
    cols: dict[str, str]


def parse_table(text: str) -> Iterable[Row]:
    """Yield rows of a HIPIFY Markdown table file (all sections)."""
    section = ""
    header: list[str] | None = None
    for line in text.splitlines():
        if line.startswith("#"):
            m = _SECTION.match(line)
            section = m.group(1).strip("* ") if m else line.lstrip("# ")
            header = None
            continue
        if not line.startswith("|"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells and cells[0].startswith("**"):
            # header: CUDA A D C R HIP A D C R E -> prefix HIP columns
            names: list[str] = []
            prefix = "cuda"
            for cell in cells:
                c = cell.strip("*")
                if c in ("CUDA", "HIP", "ROC", "MIOPEN"):
                    prefix = c.lower()
                    names.append(prefix)
                else:
                    names.append(f"{prefix}_{c.lower()}")
            header = names
            continue
        if header is None or not cells[0].startswith("`"):
            continue
        row = dict(zip(header, cells))
        cuda = row.get("cuda", "").strip("`")
        hip = row.get("hip", "").strip("`")
        if cuda:
            yield Row(cuda, hip, section, row)


def _kind_for(row: Row, library: str, src_kinds: dict[str, str]) -> str:
    if row.cuda in src_kinds:
        return src_kinds[row.cuda]
    sec = row.section.lower()
    if library == "device":
        return "device_type" if "type" in sec else "device_function"
    if "type" in sec:
        return "define" if re.fullmatch(r"[A-Z0-9_]+", row.cuda) else "type"
    return "function"


def _version(text: str) -> tuple[int, ...] | None:
    text = text.strip()
    if not text or not re.fullmatch(r"\d+(\.\d+)*", text):
        return None
    return parse_version(text)


_SRC_STEMS = {
    "runtime": "Runtime_API",
    "driver": "Driver_API",
    "device": "Device",
    "rtc": "RTC_API",
    "complex": "Complex_API",
    "blas": "BLAS_API",
    "rand": "RAND_API",
    "sparse": "SPARSE_API",
    "solver": "SOLVER_API",
    "fft": "FFT_API",
    "cub": "CUB_API",
    "dnn": "DNN_API",
    "tensor": "TENSOR_API",
}


def _src_kinds(src: Source) -> dict[str, str]:
    """Kinds from ``src/CUDA2HIP_*_{types,functions}.cpp`` (empty when the directory has no ``src/``)."""
    kinds: dict[str, str] = {}
    for stem in sorted(set(_SRC_STEMS.values())):
        for suffix in ("types", "functions"):
            text = src.read(f"src/CUDA2HIP_{stem}_{suffix}.cpp")
            if not text:
                continue
            for m in _SRC_ENTRY.finditer(text):
                kind = CONV_KIND.get(m.group(4))
                if kind is None and suffix == "functions":
                    kind = "device_function" if stem == "Device" else "function"
                if kind is not None:
                    kinds.setdefault(m.group(1), kind)
    return kinds


def _perl_unescape(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text)


def read_perl(text: str) -> tuple[dict[str, str], list[tuple[str, str]]]:
    """From a hipify-perl script: (kind of each CUDA name, [(CUDA header, HIP header)]).

    Only the HIP substitutions are read (``simpleSubstitutions``, and ``experimentalSubstitutions`` for
    kinds): the ROC and MIOpen ones translate to other libraries."""
    kinds: dict[str, str] = {}
    headers: list[tuple[str, str]] = []
    for m in _PERL_SUB.finditer(text):
        name, body = m.group(1), m.group(2)
        if name not in ("simpleSubstitutions", "experimentalSubstitutions"):
            continue
        for cuda_text, hip_text, kind in _PERL_SUBST.findall(body):
            cuda = _perl_unescape(cuda_text)
            mapped = PERL_KIND.get(kind, "function")
            if mapped == "header":
                if name == "simpleSubstitutions":
                    headers.append((cuda, _perl_unescape(hip_text)))
                continue
            kinds.setdefault(cuda, mapped)
    return kinds, headers


def read_python_map(text: str) -> dict[str, str]:
    """The kind of each CUDA name in hipify-clang's Python map (its first table, CUDA_RENAMES_MAP)."""
    body = text.split("CUDA_RENAMES_MAP", 1)[-1].split("\n])", 1)[0]
    kinds: dict[str, str] = {}
    for name, conv, _api in _PY_ENTRY.findall(body):
        if conv.startswith("CONV_INCLUDE"):
            continue
        kinds.setdefault(name, CONV_KIND.get(conv, "function"))
    return kinds


def _header_library(cuda: str) -> str:
    for prefix, library in _HEADER_LIBRARY:
        if cuda.startswith(prefix):
            return library
    return "runtime"


def _perl_script(src: Source) -> tuple[str, str] | None:
    for rel in PERL_SCRIPTS:
        text = src.read(rel)
        if text and "sub simpleSubstitutions" in text:
            return rel, text
    return None


def source_version(src: Source) -> str:
    """The HIPIFY release: the newest ``## HIPIFY for ROCm X.Y.Z`` heading of CHANGELOG.md ("" when none)."""
    text = src.read("CHANGELOG.md") or ""
    found = [parse_version(v) for v in _CHANGELOG_VERSION.findall(text)]
    return max((".".join(map(str, v)) for v in found if v), key=lambda v: tuple(map(int, v.split("."))), default="")


def build_entries(src: Source) -> tuple[list[Entry], list[str]]:
    prefix = src.tables_prefix()
    src_kinds = _src_kinds(src)
    perl = None if src_kinds else _perl_script(src)
    perl_headers: list[tuple[str, str]] = []
    kind_sources: list[str] = []
    if perl is not None:
        src_kinds, perl_headers = read_perl(perl[1])
        for rel in PYTHON_MAPS:  # kinds of every name, the unsupported ones too: they win over hipify-perl's
            text = src.read(rel)
            if text and "CUDA_RENAMES_MAP" in text:
                src_kinds = {**src_kinds, **read_python_map(text)}
                kind_sources.append(f"{rel} (kinds)")
                break
    entries: dict[str, Entry] = {}
    used: list[str] = []
    for fname, library in TABLES.items():
        text = src.read(prefix + fname)
        if text is None:
            continue
        used.append(fname)
        for row in parse_table(text):
            cols = row.cols
            hip_removed = _version(cols.get("hip_r", ""))
            entry = Entry(
                cuda_name=row.cuda,
                hip_name=row.hip,
                kind=_kind_for(row, library, src_kinds),
                library=library,
                supported=bool(row.hip),
                hip_added=_version(cols.get("hip_a", "")),
                hip_deprecated=_version(cols.get("hip_d", "")),
                hip_removed=hip_removed,
                hip_experimental=_version(cols.get("hip_e", "")),
                cuda_added=_version(cols.get("cuda_a", "")),
                cuda_deprecated=_version(cols.get("cuda_d", "")),
                cuda_removed=_version(cols.get("cuda_r", "")),
                section=row.section,
            )
            old = entries.get(row.cuda)
            if old is None or (not old.supported and entry.supported):
                entries[row.cuda] = entry
    if not used:
        raise ToolError(
            "no HIPIFY tables found (expected *_supported_by_HIP.md in docs/reference/tables, docs/tables or the "
            "directory itself)"
        )
    include_map = src.read("src/CUDA2HIP.cpp")
    if include_map:
        block = include_map.split("CUDA_INCLUDE_MAP", 1)[-1].split("\n};", 1)[0]
        for m in _SRC_ENTRY.finditer(block):
            cuda, hip, _roc, _conv, api, rest = m.groups()
            unsupported = "UNSUPPORTED" in rest
            entries[cuda] = Entry(
                cuda_name=cuda,
                hip_name=hip,
                kind="header",
                library=API_LIBRARY.get(api, api[4:].lower()),
                supported=not unsupported,
                section="includes",
            )
        used.append("src/CUDA2HIP.cpp (CUDA_INCLUDE_MAP)")
    elif perl is not None:
        for cuda, hip in perl_headers:
            entries[cuda] = Entry(
                cuda_name=cuda,
                hip_name=hip,
                kind="header",
                library=_header_library(cuda),
                supported=True,
                section="includes",
            )
        used.append(f"{perl[0]} (include map and kinds)")
        used += kind_sources
    return list(entries.values()), used


HEADER_COMMENT = (
    "GENERATED FILE - do not edit; regenerate with: python -m tools update-mappings <HIPIFY checkout>\n"
    "CUDA -> HIP mapping database for tools/hipify, derived from the API tables published by\n"
    "ROCm/HIPIFY (https://github.com/ROCm/HIPIFY, MIT licence, *_supported_by_HIP.md) and its include\n"
    "map. Project additions live in extra.tsv; users add overrides with --mappings FILE.\n"
    "Columns: see tools/hipify/mapping.py and docs/hipify.md."
)


def generate(
    src: Source, out: Path, commit: str | None = None, version: str | None = None, origin: str | None = None
) -> int:
    entries, used = build_entries(src)
    meta = {
        "format": "monarch-runtime hipify mapping db v1",
        "generated": "true",
        "source": "https://github.com/ROCm/HIPIFY",
        "source_version": version if version is not None else source_version(src),
        "source_commit": commit if commit is not None else src.commit(),
        "source_date": src.commit_date(),
        "source_origin": origin or "",
        "source_files": ", ".join(used),
        "entries": str(len(entries)),
    }
    kept = {k: v for k, v in meta.items() if v or k in ("source_commit", "source_date")}
    write_tsv(out, kept, entries, HEADER_COMMENT)
    return len(entries)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools update-mappings", description=__doc__.split("\n\n")[0])
    ap.add_argument("hipify_dir", nargs="?", type=Path, help="HIPIFY checkout or its docs/tables directory")
    ap.add_argument("--git-dir", type=Path, help="read from a (bare) git repository instead of a directory")
    ap.add_argument("--rev", default="HEAD", help="revision for --git-dir (default HEAD)")
    ap.add_argument("-o", "--output", type=Path, default=GENERATED_DB, help=f"default: {GENERATED_DB}")
    ap.add_argument("--commit", help="record this source commit (when the directory is not a git checkout)")
    ap.add_argument("--source-version", metavar="X.Y.Z", help="record this HIPIFY version (default: from CHANGELOG.md)")
    ap.add_argument("--origin", metavar="TEXT", help="record where the tables came from (e.g. a package)")
    ap.add_argument("--check", action="store_true", help="exit 1 if the output file would change")
    args = ap.parse_args(argv)
    if (args.hipify_dir is None) == (args.git_dir is None):
        raise ToolError("give exactly one of HIPIFY_DIR or --git-dir")
    if args.hipify_dir is not None and not args.hipify_dir.is_dir():
        raise ToolError(f"not a directory: {args.hipify_dir}")
    if args.source_version is not None and not re.fullmatch(r"\d+\.\d+(?:\.\d+)?", args.source_version):
        raise ToolError(f"--source-version {args.source_version!r}: expected X.Y or X.Y.Z, e.g. 7.2.4")
    src = Source(args.hipify_dir, args.git_dir, args.rev)
    if args.check:
        tmp = args.output.with_name(f".{args.output.name}.check")
        try:
            generate(src, tmp, args.commit, args.source_version, args.origin)
            same = args.output.is_file() and tmp.read_bytes() == args.output.read_bytes()
        finally:
            tmp.unlink(missing_ok=True)
        print(f"{args.output}: {'up to date' if same else 'STALE'}", file=sys.stderr)
        return 0 if same else 1
    n = generate(src, args.output, args.commit, args.source_version, args.origin)
    meta, _ = read_tsv(args.output)
    print(
        f"wrote {n} entries to {args.output} (HIPIFY {meta.get('source_version') or 'version unknown'}, "
        f"source commit {meta.get('source_commit') or 'unknown'})",
        file=sys.stderr,
    )
    return 0
