"""The CUDA -> HIP mapping database: a typed loader over data files (no mappings live in code).

Layers, later ones override earlier ones entry by entry:

1. ``data/cuda2hip.tsv``: generated from ROCm/HIPIFY's published tables by
   ``python -m tools update-mappings``; its header records the source repository, HIPIFY version and commit.
2. ``data/extra.tsv``: project-curated entries HIPIFY's tables lack (NCCL -> RCCL header, ``cub::``
   namespace, include-guard macros, ``__CUDA_ARCH__``).
3. an optional user override file (same format, or a ``.json`` list of objects).

TSV format: ``#`` lines are metadata/comments (``#!key<TAB>value`` is machine-readable metadata), then one
header row naming the columns, then one row per CUDA name. Empty cells mean "none".
"""

from __future__ import annotations

import json
import operator
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

from tools.errors import ToolError

DATA_DIR = Path(__file__).resolve().parent / "data"
GENERATED_DB = DATA_DIR / "cuda2hip.tsv"
EXTRA_DB = DATA_DIR / "extra.tsv"

COLUMNS: tuple[str, ...] = (
    "cuda_name",
    "hip_name",
    "kind",
    "library",
    "supported",
    "hip_added",
    "hip_deprecated",
    "hip_removed",
    "hip_experimental",
    "cuda_added",
    "cuda_deprecated",
    "cuda_removed",
    "section",
)

ENTRY_FIELDS: tuple[str, ...] = (*COLUMNS, "source")

#: kinds an entry can have
KINDS = frozenset({"function", "type", "enum", "define", "header", "namespace", "device_function", "device_type"})

Version = tuple[int, ...]


def parse_version(text: str) -> Version | None:
    """``"5.2.0"`` -> ``(5, 2, 0)``; empty -> ``None``."""
    text = text.strip()
    if not text:
        return None
    try:
        return tuple(int(part) for part in text.split("."))
    except ValueError:
        raise ToolError(f"bad version {text!r} in mapping data") from None


def format_version(version: Version | None) -> str:
    return "" if version is None else ".".join(str(p) for p in version)


class Entry:
    """One CUDA name and what HIP offers for it (immutable by convention; plain class for fast import)."""

    __slots__ = (
        "cuda_added",
        "cuda_deprecated",
        "cuda_name",
        "cuda_removed",
        "hip_added",
        "hip_deprecated",
        "hip_experimental",
        "hip_name",
        "hip_removed",
        "kind",
        "library",
        "section",
        "source",
        "supported",
    )

    def __init__(
        self,
        cuda_name: str,
        hip_name: str,
        kind: str,
        library: str,
        supported: bool,
        *,
        hip_added: Version | None = None,
        hip_deprecated: Version | None = None,
        hip_removed: Version | None = None,
        hip_experimental: Version | None = None,
        cuda_added: Version | None = None,
        cuda_deprecated: Version | None = None,
        cuda_removed: Version | None = None,
        section: str = "",
        source: str = "",
    ) -> None:
        self.cuda_name = cuda_name
        self.hip_name = hip_name  # "" when HIP has no equivalent
        self.kind = kind  # function, type, enum, define, header, namespace, device_function, device_type
        self.library = library  # runtime, driver, device, blas, rand, sparse, fft, cub, nccl, ...
        self.supported = supported
        self.hip_added = hip_added
        self.hip_deprecated = hip_deprecated
        self.hip_removed = hip_removed
        self.hip_experimental = hip_experimental
        self.cuda_added = cuda_added
        self.cuda_deprecated = cuda_deprecated
        self.cuda_removed = cuda_removed
        self.section = section
        self.source = source  # which layer it came from (not compared)

    def _key(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in ENTRY_FIELDS if name != "source")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Entry) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return (
            f"Entry({self.cuda_name!r} -> {self.hip_name!r}, {self.kind}, {self.library}, supported={self.supported})"
        )

    def available_in(self, hip_version: Version | None) -> bool:
        """Whether the HIP name exists in ``hip_version`` (``None``: the newest HIP)."""
        if not self.supported or (not self.hip_name and self.kind != "header"):
            return False
        if hip_version is None:
            return self.hip_removed is None
        if self.hip_added is not None and self.hip_added[:2] > hip_version[:2]:
            return False
        return not (self.hip_removed is not None and self.hip_removed[:2] <= hip_version[:2])

    def to_row(self) -> list[str]:
        return [
            self.cuda_name,
            self.hip_name,
            self.kind,
            self.library,
            "1" if self.supported else "0",
            format_version(self.hip_added),
            format_version(self.hip_deprecated),
            format_version(self.hip_removed),
            format_version(self.hip_experimental),
            format_version(self.cuda_added),
            format_version(self.cuda_deprecated),
            format_version(self.cuda_removed),
            self.section,
        ]

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {}
        for name in ENTRY_FIELDS:
            value = getattr(self, name)
            if isinstance(value, tuple):
                value = format_version(value)
            out[name] = value
        return out


def _entry_from_cells(cells: Mapping[str, str], source: str, where: str) -> Entry:
    name = cells.get("cuda_name", "").strip()
    if not name:
        raise ToolError(f"{where}: entry without cuda_name")
    kind = cells.get("kind", "").strip() or "function"
    if kind not in KINDS:
        raise ToolError(f"{where}: unknown kind {kind!r} for {name} (one of {', '.join(sorted(KINDS))})")
    hip_name = cells.get("hip_name", "").strip()
    supported_text = str(cells.get("supported", "")).strip().lower()
    if supported_text in ("", "auto"):
        supported = bool(hip_name)
    else:
        supported = supported_text in ("1", "true", "yes")
    return Entry(
        cuda_name=name,
        hip_name=hip_name,
        kind=kind,
        library=cells.get("library", "").strip() or "project",
        supported=supported,
        hip_added=parse_version(cells.get("hip_added", "")),
        hip_deprecated=parse_version(cells.get("hip_deprecated", "")),
        hip_removed=parse_version(cells.get("hip_removed", "")),
        hip_experimental=parse_version(cells.get("hip_experimental", "")),
        cuda_added=parse_version(cells.get("cuda_added", "")),
        cuda_deprecated=parse_version(cells.get("cuda_deprecated", "")),
        cuda_removed=parse_version(cells.get("cuda_removed", "")),
        section=cells.get("section", "").strip(),
        source=source,
    )


def read_tsv(path: Path) -> tuple[dict[str, str], list[Entry]]:
    """Read one TSV layer: returns (metadata, entries)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise ToolError(f"cannot read mapping file {path}: {err.strerror or err}") from None
    except UnicodeDecodeError:
        raise ToolError(f"mapping file {path} is not UTF-8") from None
    meta: dict[str, str] = {}
    header: list[str] | None = None
    entries: list[Entry] = []
    source = path.name
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        if line.startswith("#"):
            if line.startswith("#!"):
                key, _, value = line[2:].partition("\t")
                meta[key.strip()] = value.strip()
            continue
        cells = line.split("\t")
        if header is None:
            header = [c.strip() for c in cells]
            if "cuda_name" not in header:
                raise ToolError(f"{path}:{lineno}: header row must name the columns (cuda_name, hip_name, ...)")
            continue
        row = dict(zip(header, cells))
        entries.append(_entry_from_cells(row, source, f"{path}:{lineno}"))
    return meta, entries


def read_json(path: Path) -> list[Entry]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise ToolError(f"cannot read mapping file {path}: {err.strerror or err}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ToolError(f"mapping file {path} is not valid JSON: {err}") from None
    items = data.get("entries") if isinstance(data, dict) else data
    if not isinstance(items, list):
        raise ToolError(f'{path}: expected a list of entries (or {{"entries": [...]}})')
    entries = []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise ToolError(f"{path}: entry {i} is not an object")
        cells = {str(k): ("" if v is None else str(v)) for k, v in item.items()}
        if isinstance(item.get("supported"), bool):
            cells["supported"] = "1" if item["supported"] else "0"
        entries.append(_entry_from_cells(cells, path.name, f"{path}: entry {i}"))
    return entries


def write_tsv(path: Path, meta: Mapping[str, str], entries: list[Entry], comment: str = "") -> None:
    """Write a layer deterministically (sorted by CUDA name), atomically."""
    lines = []
    for text in comment.splitlines():
        lines.append(f"# {text}".rstrip())
    for key, value in meta.items():
        lines.append(f"#!{key}\t{value}")
    lines.append("\t".join(COLUMNS))
    for entry in sorted(entries, key=lambda e: e.cuda_name):
        lines.append("\t".join(entry.to_row()))
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    tmp.replace(path)


class MappingDatabase:
    """All entries, by CUDA name. Rows are kept as raw text per layer and parsed on first lookup, so
    loading the ~9,000-entry database stays cheap (start-up time matters to the build). Later layers win."""

    def __init__(
        self,
        layers: Sequence[tuple[Mapping[str, str], str]],
        meta: Mapping[str, str],
        fingerprint: str,
    ) -> None:
        # [(cuda_name -> tab-separated cells after the name, layer name)], base layer first
        self._layers: list[tuple[Mapping[str, str], str]] = [(dict(rows), source) for rows, source in layers]
        self._parsed: dict[str, Entry] = {}
        self._size: int | None = None  # number of distinct names, counted when asked
        self.meta = dict(meta)
        self.fingerprint = fingerprint

    @classmethod
    def from_entries(cls, entries: Iterable[Entry], meta: Mapping[str, str] | None = None) -> MappingDatabase:
        rows = {e.cuda_name: "\t".join(e.to_row()[1:]) for e in entries}
        from tools.hipify.hashing import sha256_hex  # noqa: PLC0415

        digest = sha256_hex(repr(sorted(rows.items())).encode())[:16]
        return cls([(rows, "entries")], meta or {}, digest)

    def _raw(self, cuda_name: str) -> tuple[str, str] | None:
        for rows, source in reversed(self._layers):
            rest = rows.get(cuda_name)
            if rest is not None:
                return rest, source
        return None

    def lookup(self, cuda_name: str) -> Entry | None:
        entry = self._parsed.get(cuda_name)
        if entry is not None:
            return entry
        row = self._raw(cuda_name)
        if row is None:
            return None
        cells = dict(zip(COLUMNS, [cuda_name, *row[0].split("\t")]))
        entry = _entry_from_cells(cells, row[1], f"{row[1]}: {cuda_name}")
        self._parsed[cuda_name] = entry
        return entry

    def header(self, include_path: str) -> Entry | None:
        entry = self.lookup(include_path)
        return entry if entry is not None and entry.kind == "header" else None

    def names(self) -> Iterable[str]:
        if len(self._layers) == 1:
            return self._layers[0][0].keys()
        return set().union(*(rows.keys() for rows, _ in self._layers))

    def raw_cells(self, cuda_name: str) -> list[str] | None:
        """The row's cells after ``cuda_name`` (``COLUMNS[1:]`` order), unparsed; ``None`` when unknown."""
        row = self._raw(cuda_name)
        return None if row is None else row[0].split("\t")

    def raw_hip_name(self, cuda_name: str) -> str | None:
        """The HIP name cell without parsing the whole entry (``None`` when the name is unknown)."""
        row = self._raw(cuda_name)
        return None if row is None else row[0].partition("\t")[0]

    def __iter__(self) -> Iterator[Entry]:
        for name in sorted(self.names()):
            entry = self.lookup(name)
            assert entry is not None
            yield entry

    def __len__(self) -> int:
        if self._size is None:
            self._size = len(self._layers[0][0]) if len(self._layers) == 1 else len(set(self.names()))
        return self._size

    def __contains__(self, cuda_name: object) -> bool:
        return isinstance(cuda_name, str) and self._raw(cuda_name) is not None

    @property
    def source(self) -> str:
        return self.meta.get("source", "")

    @property
    def source_commit(self) -> str:
        return self.meta.get("source_commit", "")

    @property
    def source_version(self) -> str:
        """The HIPIFY release the generated layer was built from (``#!source_version``), or ""."""
        return self.meta.get("source_version", "")


_ROW = r"^([^\t#\n][^\t\n]*)\t([^\n]*)"  # rows, when one has no tab (compiled where used)


def _rows_from_body(body: str) -> dict[str, str] | None:
    """name -> remaining cells for the rows after the header (``None`` when a row has no tab)."""
    lines = [line for line in body.split("\n") if line and line[0] != "#"] if "\n#" in body else body.split("\n")
    if lines and not lines[-1]:
        lines.pop()
    try:
        return dict(map(operator.methodcaller("split", "\t", 1), lines))  # C-level loop: ~2x findall
    except ValueError:  # a row without a tab
        return None


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as err:
        raise ToolError(f"cannot read mapping file {path}: {err.strerror or err}") from None


def _read_layer_raw(path: Path, data: bytes | None = None) -> tuple[dict[str, str], dict[str, str], bytes]:
    """Fast path for TSV layers: metadata, name -> remaining cells (column order checked), raw bytes."""
    if data is None:
        data = _read_bytes(path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ToolError(f"mapping file {path} is not UTF-8") from None
    meta: dict[str, str] = {}
    for line in text[: text.find("\ncuda_name\t") + 1].splitlines():
        if line.startswith("#!"):
            key, _, value = line[2:].partition("\t")
            meta[key.strip()] = value.strip()
    header_at = text.find("cuda_name\t")
    if header_at < 0 or (header_at > 0 and text[header_at - 1] != "\n"):
        raise ToolError(f"{path}: header row must name the columns (cuda_name, hip_name, ...)")
    header_end = text.find("\n", header_at)
    header = text[header_at : header_end if header_end >= 0 else len(text)].rstrip("\r").split("\t")
    if tuple(header) != COLUMNS:
        # Columns in another order or a subset: go through the general reader.
        _, entries = read_tsv(path)
        return meta, {e.cuda_name: "\t".join(e.to_row()[1:]) for e in entries}, data
    body = text[header_end + 1 :] if header_end >= 0 else ""
    rows = _rows_from_body(body)
    return meta, dict(re.findall(_ROW, body, re.M)) if rows is None else rows, data


def load_database(overrides: Path | None = None, *, base: Path | None = None) -> MappingDatabase:
    """Load generated + project extras + optional user overrides (later layers win). The fingerprint is the
    hash of every layer's bytes."""
    base_path = GENERATED_DB if base is None else base
    layers: list[Path] = [base_path]
    if base is None and EXTRA_DB.is_file():
        layers.append(EXTRA_DB)
    if overrides is not None:
        if not overrides.is_file():
            raise ToolError(f"mapping override file not found: {overrides}")
        layers.append(overrides)
    from tools.hipify.hashing import sha256_hex  # noqa: PLC0415 - after the cheap checks above

    loaded: list[tuple[Mapping[str, str], str]] = []
    datas: list[bytes] = []
    meta: dict[str, str] = {}
    for i, path in enumerate(layers):
        if path.suffix == ".json":
            layer_rows = {e.cuda_name: "\t".join(e.to_row()[1:]) for e in read_json(path)}
            datas.append(path.read_bytes())
        else:
            layer_meta, layer_rows, data = _read_layer_raw(path)
            datas.append(data)
            if i > 0:  # small layers: validate every row now, so a bad override fails early
                read_tsv(path)
            else:
                meta = layer_meta
        loaded.append((layer_rows, path.name))
    return MappingDatabase(loaded, meta, sha256_hex(*datas)[:16])
