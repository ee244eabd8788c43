"""Regenerate ``tools/hipify/data/cuda2hip.tsv`` from ROCm/HIPIFY's published tables.

Usage::

    python -m tools update-mappings HIPIFY_DIR [-o OUT.tsv] [--commit SHA] [--check]
    python -m tools update-mappings --git-dir /path/to/HIPIFY/.git [--rev HEAD] ...

``HIPIFY_DIR`` is a checkout of https://github.com/ROCm/HIPIFY (or just its ``docs/tables`` directory).
Only data is read: the Markdown tables ``docs/tables/*_supported_by_HIP.md`` give names, HIP names and
versions; when the checkout also has ``src/``, the include map (``src/CUDA2HIP.cpp``) and the kind of
each data-type name (``CONV_TYPE``/``CONV_NUMERIC_LITERAL``/``CONV_DEFINE`` in ``src/*_types.cpp``) are
read from it as text. Nothing is downloaded.
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
}

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
}

CONV_KIND = {
    "CONV_TYPE": "type",
    "CONV_NUMERIC_LITERAL": "enum",
    "CONV_DEFINE": "define",
    "CONV_DEVICE_TYPE": "device_type",
    "CONV_DEVICE_FUNC": "device_function",
}

_SRC_ENTRY = re.compile(r'\{\s*"([^"]+)"\s*,\s*\{\s*"([^"]*)"\s*,\s*"([^"]*)"\s*,\s*(CONV_\w+)\s*,\s*(API_\w+)([^}]*)')
_SECTION = re.compile(r"^#{2,}\s*(?:\*\*)?\s*(?:\d+\.\s*)?(.*?)\s*(?:\*\*)?\s*$")


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
        if self.root is not None and (self.root / "docs" / "tables").is_dir():
            return "docs/tables/"
        if self.root is not None:
            return ""
        return "docs/tables/"

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


def build_entries(src: Source) -> tuple[list[Entry], list[str]]:
    prefix = src.tables_prefix()
    src_kinds: dict[str, str] = {}
    for name in sorted(TABLES):  # kinds from src/*_types.cpp (optional)
        stem = {
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
        }[TABLES[name]]
        for suffix in ("types", "functions"):
            text = src.read(f"src/CUDA2HIP_{stem}_{suffix}.cpp")
            if not text:
                continue
            for m in _SRC_ENTRY.finditer(text):
                kind = CONV_KIND.get(m.group(4))
                if kind is None and suffix == "functions":
                    kind = "device_function" if stem == "Device" else "function"
                if kind is not None:
                    src_kinds.setdefault(m.group(1), kind)
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
        raise ToolError("no HIPIFY tables found (expected docs/tables/*_supported_by_HIP.md)")
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
    return list(entries.values()), used


HEADER_COMMENT = (
    "GENERATED FILE - do not edit; regenerate with: python -m tools update-mappings <HIPIFY checkout>\n"
    "CUDA -> HIP mapping database for tools/hipify, derived from the API tables published by\n"
    "ROCm/HIPIFY (https://github.com/ROCm/HIPIFY, MIT licence, docs/tables/*_supported_by_HIP.md) and\n"
    "its include map. Project additions live in extra.tsv; users add overrides with --mappings FILE.\n"
    "Columns: see tools/hipify/mapping.py and docs/hipify.md."
)


def generate(src: Source, out: Path, commit: str | None = None) -> int:
    entries, used = build_entries(src)
    meta = {
        "format": "monarch-runtime hipify mapping db v1",
        "generated": "true",
        "source": "https://github.com/ROCm/HIPIFY",
        "source_commit": commit if commit is not None else src.commit(),
        "source_date": src.commit_date(),
        "source_files": ", ".join(used),
        "entries": str(len(entries)),
    }
    write_tsv(out, meta, entries, HEADER_COMMENT)
    return len(entries)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools update-mappings", description=__doc__.split("\n\n")[0])
    ap.add_argument("hipify_dir", nargs="?", type=Path, help="HIPIFY checkout or its docs/tables directory")
    ap.add_argument("--git-dir", type=Path, help="read from a (bare) git repository instead of a directory")
    ap.add_argument("--rev", default="HEAD", help="revision for --git-dir (default HEAD)")
    ap.add_argument("-o", "--output", type=Path, default=GENERATED_DB, help=f"default: {GENERATED_DB}")
    ap.add_argument("--commit", help="record this source commit (when the directory is not a git checkout)")
    ap.add_argument("--check", action="store_true", help="exit 1 if the output file would change")
    args = ap.parse_args(argv)
    if (args.hipify_dir is None) == (args.git_dir is None):
        raise ToolError("give exactly one of HIPIFY_DIR or --git-dir")
    if args.hipify_dir is not None and not args.hipify_dir.is_dir():
        raise ToolError(f"not a directory: {args.hipify_dir}")
    src = Source(args.hipify_dir, args.git_dir, args.rev)
    if args.check:
        tmp = args.output.with_name(f".{args.output.name}.check")
        try:
            generate(src, tmp, args.commit)
            same = args.output.is_file() and tmp.read_bytes() == args.output.read_bytes()
        finally:
            tmp.unlink(missing_ok=True)
        print(f"{args.output}: {'up to date' if same else 'STALE'}", file=sys.stderr)
        return 0 if same else 1
    n = generate(src, args.output, args.commit)
    meta, _ = read_tsv(args.output)
    print(
        f"wrote {n} entries to {args.output} (source commit {meta.get('source_commit') or 'unknown'})",
        file=sys.stderr,
    )
    return 0
