"""Stage 6: the wheel. Deterministic by construction: entries sorted, timestamps from
SOURCE_DATE_EPOCH (or a fixed date), fixed permissions, RECORD last."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import platform as host_platform
import stat
import time
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from build_backend import log
from buildcore.errors import BuildError

NAME = "monarch-runtime"
DIST = "monarch_runtime"
PACKAGE = "monarch_runtime"
ABI_TAG = "cp39-abi3"
DEFAULT_EPOCH = 315532800  # 1980-01-01, the earliest time a zip entry can hold


@dataclass(frozen=True)
class Metadata:
    version: str  # e.g. 0.1.0+cu13
    summary: str
    requires_python: str
    requires_dist: tuple[str, ...]
    readme: str
    license: str
    classifiers: tuple[str, ...]
    #: ``[project.optional-dependencies]``: extra name -> its requirements (``pip install monarch-runtime[torchft]``)
    extras: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def render(self) -> str:
        lines = [
            "Metadata-Version: 2.1",
            f"Name: {NAME}",
            f"Version: {self.version}",
            f"Summary: {self.summary}",
            f"License: {self.license}",
            f"Requires-Python: {self.requires_python}",
            *(f"Classifier: {c}" for c in self.classifiers),
            *(f"Requires-Dist: {r}" for r in self.requires_dist),
            *(f"Provides-Extra: {name}" for name, _ in self.extras),
            *(f"Requires-Dist: {_with_marker(r, name)}" for name, reqs in self.extras for r in reqs),
            "Description-Content-Type: text/markdown",
        ]
        return "\n".join(lines) + "\n\n" + self.readme


def _with_marker(requirement: str, extra: str) -> str:
    """``requirement`` needed only with ``extra``: its own marker (if any) and ``extra == "..."``."""
    spec, sep, marker = requirement.partition(";")
    condition = f'extra == "{extra}"'
    return f"{spec.strip()}; ({marker.strip()}) and {condition}" if sep else f"{spec.strip()}; {condition}"


@dataclass(frozen=True)
class RawMetadata:
    """METADATA kept as text (e.g. read back from a wheel being re-packed); ``text`` is written as is."""

    version: str
    text: str

    def render(self) -> str:
        return self.text


def platform_tag() -> str:
    machine = host_platform.machine().lower().replace("-", "_")
    return f"linux_{machine}"


def wheel_name(version: str, tag: str, label: str | None = None) -> str:
    """``label`` is a wheel-variant label (docs/wheels.md), the last component of a variant wheel's name."""
    return f"{DIST}-{version}-{ABI_TAG}-{tag}" + (f"-{label}" if label else "") + ".whl"


def dist_info(version: str) -> str:
    return f"{DIST}-{version}.dist-info"


def _epoch() -> tuple[int, int, int, int, int, int]:
    value = os.environ.get("SOURCE_DATE_EPOCH", "")
    seconds = int(value) if value.isdigit() else DEFAULT_EPOCH
    seconds = max(seconds, DEFAULT_EPOCH)
    t = time.gmtime(seconds)
    return (t.tm_year, t.tm_mon, t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec)


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"sha256={digest}"


def write_wheel(
    out_dir: Path,
    metadata: Metadata | RawMetadata,
    tag: str,
    files: Mapping[str, Path | bytes],
    *,
    executables: Sequence[str] = (),
    quiet: bool = False,
    label: str | None = None,
) -> Path:
    """Write the wheel atomically into ``out_dir``; ``files`` maps archive names to paths or bytes."""
    info = dist_info(metadata.version)
    wheel_text = f"Wheel-Version: 1.0\nGenerator: {NAME} build_backend\nRoot-Is-Purelib: false\nTag: {ABI_TAG}-{tag}\n"
    entries: dict[str, bytes] = {}
    for arcname, source in files.items():
        entries[arcname] = source if isinstance(source, bytes) else source.read_bytes()
    entries[f"{info}/METADATA"] = metadata.render().encode()
    entries[f"{info}/WHEEL"] = wheel_text.encode()
    record_name = f"{info}/RECORD"
    date = _epoch()
    names = sorted(entries)
    record = "".join(f"{n},{_record_hash(entries[n])},{len(entries[n])}\n" for n in names) + f"{record_name},,\n"
    target = out_dir / wheel_name(metadata.version, tag, label)
    for stale in out_dir.glob(".*.whl.partial"):  # left by a build killed with SIGKILL
        stale.unlink(missing_ok=True)
    tmp = out_dir / f".{target.name}.partial"
    try:
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=6) as zf:
            for name in [*names, record_name]:
                data = record.encode() if name == record_name else entries[name]
                zi = zipfile.ZipInfo(name, date_time=date)
                mode = 0o755 if (name in executables or name.endswith(".so")) else 0o644
                zi.external_attr = (stat.S_IFREG | mode) << 16
                zi.compress_type = zipfile.ZIP_DEFLATED
                zi.create_system = 3
                zf.writestr(zi, data)
        tmp.replace(target)
    except BaseException as err:
        tmp.unlink(missing_ok=True)
        if isinstance(err, OSError):
            raise BuildError(f"could not write the wheel into {out_dir}: {err.strerror}.") from None
        raise
    if quiet:
        return target
    sizes = {n: len(d) for n, d in entries.items()}
    total = sum(sizes.values())
    for name, size in sorted(sizes.items(), key=lambda kv: -kv[1])[:6]:
        log.info(f"pack: {size / 1e6:9.3f} MB  {name}")
    log.info(f"pack: {total / 1e6:9.3f} MB  uncompressed in all; {target.stat().st_size / 1e6:.3f} MB wheel")
    return target


def build_info_json(info: Mapping[str, object]) -> bytes:
    return (json.dumps(info, indent=2, sort_keys=True) + "\n").encode()
