"""SHA-256 digests: of inputs (without importing hashlib for small runs) and of this package's own code."""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from functools import lru_cache

TYPE_CHECKING = False
if TYPE_CHECKING:  # (typing costs milliseconds to import: start-up time)
    from typing import BinaryIO

_HERE = os.path.dirname(os.path.abspath(__file__))

# -- SHA-256 without importing hashlib for small inputs ------------------------------------------------
# hashlib loads OpenSSL (~3-5 ms): more than hashing a few small files costs. Python's built-in SHA-256 gives
# the same digests, ~6x slower; hashlib (OpenSSL) takes over for an input of 256 KiB or more (the mapping
# database's 0.8 MB, which every run hashes: ~3 ms built in) or once a process has hashed ~1 MB.
_SWITCH_AT = 1 << 20
_BIG = 1 << 18
_PIECE = 1 << 20  # what file_sha256_hex reads at a time
_hashed = 0
_openssl: Callable[..., object] | None = None


def _builtin_sha256() -> Callable[[bytes], object] | None:
    for name in ("_sha256", "_sha2"):  # Python <= 3.11, >= 3.12
        try:
            fn: Callable[[bytes], object] = importlib.import_module(name).sha256
        except (ImportError, AttributeError):
            continue
        return fn
    return None


def sha256_hex(*chunks: bytes) -> str:
    """SHA-256 of the concatenated chunks, as hex (exactly ``hashlib.sha256(b"".join(chunks)).hexdigest()``)."""
    global _hashed, _openssl  # noqa: PLW0603 - one switch per process
    size = sum(map(len, chunks))
    _hashed += size
    make = _openssl
    if make is None and (_hashed > _SWITCH_AT or size >= _BIG):
        import hashlib  # noqa: PLC0415

        make = _openssl = hashlib.sha256
    if make is None:
        make = _builtin_sha256() or _import_hashlib_sha256()
    digest = make(b"")
    for chunk in chunks:
        digest.update(chunk)  # type: ignore[attr-defined]
    hexdigest: str = digest.hexdigest()  # type: ignore[attr-defined]
    return hexdigest


def file_sha256_hex(fh: BinaryIO) -> str:
    """SHA-256 of the open file ``fh`` (read from its start), as hex. A big file is hashed where it lies
    (mapped, not read into memory), by OpenSSL, outside the GIL."""
    global _hashed  # noqa: PLW0603 - one switch per process
    if os.fstat(fh.fileno()).st_size < _PIECE:
        return sha256_hex(fh.read())
    import mmap  # noqa: PLC0415 - only for big files (start-up time)

    make = _openssl or _import_hashlib_sha256()
    try:
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            _hashed += len(mapped)
            return str(make(mapped).hexdigest())  # type: ignore[attr-defined]
    except (OSError, ValueError):  # (not a file that can be mapped: read it)
        digest = make(b"")
        while piece := fh.read(_PIECE):
            digest.update(piece)  # type: ignore[attr-defined]
        return str(digest.hexdigest())  # type: ignore[attr-defined]


def _import_hashlib_sha256() -> Callable[..., object]:
    global _openssl  # noqa: PLW0603
    import hashlib  # noqa: PLC0415

    _openssl = hashlib.sha256
    return _openssl


@lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """Hash of this package's code and its non-mapping data (the downgrades, the target rules): a recorded
    translation (the tree's state file) is reused only by the same tool. (The mapping layers are hashed
    separately, into the database fingerprint.)"""
    data_dir = os.path.join(_HERE, "data")
    try:
        names = [n for n in os.listdir(_HERE) if n.endswith(".py")]
        names += [f"data/{n}" for n in os.listdir(data_dir) if n.startswith(("downgrades", "targets"))]
    except OSError:
        names = []
    names.sort()
    chunks = []
    for rel in names:
        try:
            with open(os.path.join(_HERE, rel), "rb") as fh:
                data = fh.read()
        except OSError:
            continue
        chunks.append(rel.rpartition("/")[2].encode() + b"\0" + data)
    return sha256_hex(*chunks)[:16]
