"""A compiled cache of the mapping database and the scanner's derived inputs (start-up time).

Loading the ~9,000-row TSV database and deriving the scanner from it cost ~30 ms per process, more than
everything else hipify does on a small input. Their results are plain data, so they are kept as ``marshal``
files (plain tuples, dicts, strings and bytes: no code, no pickle) in a per-user cache directory:

* ``$MONARCH_HIPIFY_CACHE`` when set (``0``, ``off`` or ``no``: no cache at all),
* else ``$XDG_CACHE_HOME/monarch-runtime/hipify``, else ``~/.cache/monarch-runtime/hipify``.

Every entry is keyed by the content hash of what it was derived from (the data files' bytes, this
package's code, the options) and by the Python version; its name is a hash of that key and the key is
stored inside and compared on load, so a stale entry is never used: a changed input simply looks up
another name. An unreadable, truncated or corrupt entry is ignored and rebuilt; entries are written through
a temporary file and a rename (a concurrent reader sees the old file or the new one, never half of one); a
cache directory that cannot be written is not an error (every run then derives the data itself).
"""

from __future__ import annotations

import importlib
import marshal
import os
import re
import sys
from collections.abc import Callable
from functools import lru_cache

ENV = "MONARCH_HIPIFY_CACHE"
FORMAT = "monarch-runtime/hipify-cache/v1"
_OFF = ("0", "off", "no", "false")
_HERE = os.path.dirname(os.path.abspath(__file__))


def cache_dir() -> str | None:
    """The cache directory (which may not exist yet), or ``None`` when the cache is switched off."""
    env = os.environ.get(ENV, "").strip()
    if env.lower() in _OFF:
        return None
    if env:
        return os.path.abspath(env)
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    base = xdg if xdg and os.path.isabs(xdg) else os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "monarch-runtime", "hipify")


# -- SHA-256 without importing hashlib for small inputs ------------------------------------------------
# hashlib loads OpenSSL (~5 ms): more than a small run hashes. Python's built-in SHA-256 gives the same
# digests, ~6x slower; once a process has hashed ~1 MB, hashlib (OpenSSL) takes over.
_SWITCH_AT = 1 << 20
_hashed = 0
_openssl: Callable[[bytes], object] | None = None


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
    _hashed += sum(map(len, chunks))
    make = _openssl
    if make is None and _hashed > _SWITCH_AT:
        import hashlib  # noqa: PLC0415

        make = _openssl = hashlib.sha256
    if make is None:
        make = _builtin_sha256() or _import_hashlib_sha256()
    digest = make(b"")
    for chunk in chunks:
        digest.update(chunk)  # type: ignore[attr-defined]
    hexdigest: str = digest.hexdigest()  # type: ignore[attr-defined]
    return hexdigest


def _import_hashlib_sha256() -> Callable[[bytes], object]:
    global _openssl  # noqa: PLW0603
    import hashlib  # noqa: PLC0415

    _openssl = hashlib.sha256
    return _openssl


def stat_signature(path: str) -> tuple[int, int, int, int, int] | None:
    """What changes whenever a file's content does (size, mtime, ctime: ctime cannot be set back), or None."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)


def _python_tag() -> str:
    return f"{sys.implementation.cache_tag}/{sys.version}/marshal{marshal.version}"


@lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """Hash of this package's code and its non-mapping data (the downgrades, the target rules): derived data is
    reused only by the same tool. (The mapping layers are hashed separately, into the database fingerprint.)

    The hash of files whose stat signatures are all unchanged is taken from the cache (no reading)."""
    data_dir = os.path.join(_HERE, "data")
    try:
        names = [n for n in os.listdir(_HERE) if n.endswith(".py")]
        names += [f"data/{n}" for n in os.listdir(data_dir) if n.startswith(("downgrades", "targets"))]
    except OSError:
        names = []
    names.sort()
    sigs = [(rel, stat_signature(os.path.join(_HERE, rel))) for rel in names]
    index_key = repr(sigs)
    known = load("codefp", index_key)
    if isinstance(known, str) and len(known) == 16:
        return known
    chunks = []
    for rel in names:
        try:
            with open(os.path.join(_HERE, rel), "rb") as fh:
                data = fh.read()
        except OSError:
            continue
        chunks.append(rel.rpartition("/")[2].encode() + b"\0" + data)
    digest = sha256_hex(*chunks)[:16]
    if all(sig is not None for _, sig in sigs):
        store("codefp", index_key, digest)
    return digest


def _entry_path(kind: str, key: str) -> str | None:
    directory = cache_dir()
    if directory is None:
        return None
    name = sha256_hex(f"{FORMAT}\0{_python_tag()}\0{kind}\0{key}".encode())[:24]
    return os.path.join(directory, f"{kind}-{name}.marshal")


def load(kind: str, key: str) -> object | None:
    """The payload stored for ``(kind, key)``, or ``None`` (absent, unreadable, corrupt, or another key)."""
    path = _entry_path(kind, key)
    if path is None:
        return None
    try:
        with open(path, "rb") as fh:
            blob = fh.read()
        # marshal builds plain values only (no code is run); the cache directory is the user's own
        record = marshal.loads(blob)  # noqa: S302
    except (OSError, ValueError, EOFError, TypeError):
        return None
    if (
        not isinstance(record, tuple)
        or len(record) != 4
        or record[0] != FORMAT
        or record[1] != _python_tag()
        or record[2] != f"{kind}\0{key}"
    ):
        return None
    payload: object = record[3]
    return payload


def store(kind: str, key: str, payload: object) -> bool:
    """Store ``payload`` (plain data only) for ``(kind, key)``; ``False`` when it could not be written."""
    path = _entry_path(kind, key)
    if path is None:
        return False
    try:
        blob = marshal.dumps((FORMAT, _python_tag(), f"{kind}\0{key}", payload))  # type: ignore[arg-type]
    except ValueError:  # not plain data: a bug, but the cache is only an optimisation
        return False
    return write_entry(path, blob)


def write_entry(path: str, blob: bytes) -> bool:
    """Write a cache file through a temporary file and a rename (a reader sees the old file or the new one);
    False when it cannot be written (the cache is only an optimisation)."""
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(tmp, "wb") as fh:
            fh.write(blob)
        os.replace(tmp, path)
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        return False
    return True


def regex(kind: str, key: str, build: Callable[[], bytes], flags: int = 0) -> re.Pattern[bytes]:
    """``re.compile(build(), flags)``, with the pattern and its compiled program kept in the cache.

    Python's regex compiler is written in Python: for the scanner it costs more than the rest of the
    set-up. On Python 3.11+ the program it produces (a list of ints, checked again by ``_sre`` when it is
    loaded) is cached with the pattern, keyed by ``key`` and the exact Python version; elsewhere, or when
    anything about it fails, this is a plain ``re.compile``."""
    try:
        sre = importlib.import_module("_sre")
        full_key = f"{key}/sre{sre.MAGIC}"
    except (ImportError, AttributeError):
        return re.compile(build(), flags)
    hit = load(kind, full_key)
    if (
        isinstance(hit, tuple)
        and len(hit) == 6
        and isinstance(hit[0], bytes)
        and isinstance(hit[1], int)
        and isinstance(hit[2], list)
        and isinstance(hit[3], int)
        and isinstance(hit[4], dict)
        and isinstance(hit[5], tuple)
    ):
        try:
            compiled: re.Pattern[bytes] = sre.compile(*hit)
        except (RuntimeError, TypeError, ValueError, OverflowError):
            pass  # a corrupt program: _sre refuses it; rebuild below
        else:
            return compiled
    pattern = build()
    try:
        parser = importlib.import_module("re._parser")
        compiler = importlib.import_module("re._compiler")
        parsed = parser.parse(pattern, flags)
        groupindex = dict(parsed.state.groupdict)
        indexgroup: list[str | None] = [None] * parsed.state.groups
        for name, index in groupindex.items():
            indexgroup[index] = name
        args = (
            pattern,
            int(flags | parsed.state.flags),  # plain ints: marshal takes no enum or int subclass
            [int(op) for op in compiler._code(parsed, flags)],
            parsed.state.groups - 1,
            groupindex,
            tuple(indexgroup),
        )
        compiled = sre.compile(*args)
    except Exception:
        return re.compile(pattern, flags)
    store(kind, full_key, args)
    return compiled
