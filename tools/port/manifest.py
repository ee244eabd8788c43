"""``port --add``: register a kernel in csrc/manifest.toml so the next wheel includes it.

The manifest format, and what the build does with it, is buildcore/kernels.py. Registering means:
copy the kernel source (and the headers next to it that it includes) into csrc/kernels/ unless it is
already under csrc/, refusing to overwrite a different file; check that it defines the entry point
``extern "C" cudaError_t ENTRY(void* data, size_t nbytes, cudaStream_t stream)``; append a
``[[kernel]]`` table to the manifest atomically, and check the result with the backend's own reader.
"""

from __future__ import annotations

import fcntl
import os
import re
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from buildcore.errors import BuildError
from buildcore.kernels import MANIFEST, read_manifest
from tools.errors import ToolError
from tools.port.sources import resolve_includes

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

KERNELS_DIR = "kernels"
_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# extern "C" [__host__] cudaError_t NAME(void* a, size_t b, cudaStream_t c) {
_ENTRY = re.compile(
    r'extern\s+"C"\s+(?:__host__\s+)?(?:cudaError_t|cudaError)\s+(?P<name>[A-Za-z_]\w*)\s*\(\s*'
    r"(?P<params>[^()]*)\)\s*\{"
)
_PARAM_SHAPES = (
    re.compile(r"^(?:const\s+)?void\s*\*\s*(?:const\s+)?\w*$"),
    re.compile(r"^(?:std::)?size_t\s*\w*$|^(?:unsigned\s+long|uint64_t)\s*\w*$"),
    re.compile(r"^cudaStream_t\s*\w*$"),
)
_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
MANIFEST_HEADER = (
    "# Kernels the runtime can call by name: monarch_runtime.kernels() / launch_kernel(name, data).\n"
    "# Written by `python -m tools port FILE.cu --add`; the format is documented in buildcore/kernels.py.\n"
)


@dataclass(frozen=True)
class Registration:
    name: str
    entry: str
    source: str  # relative to csrc/
    copied: tuple[tuple[Path, Path], ...]  # (from, to) files copied into csrc/
    already: bool  # the same kernel was registered before: nothing written


def entry_points(text: str) -> list[str]:
    """Names of functions with the entry-point shape defined in ``text`` (comments ignored)."""
    code = _COMMENT.sub(lambda m: " " * len(m.group(0)), text)
    out = []
    for m in _ENTRY.finditer(code):
        params = [p.strip() for p in m.group("params").split(",")]
        if len(params) == 3 and all(shape.match(p) for shape, p in zip(_PARAM_SHAPES, params)):
            out.append(m.group("name"))
    return out


def _entry_shaped_names(text: str) -> list[str]:
    code = _COMMENT.sub(" ", text)
    return [m.group("name") for m in _ENTRY.finditer(code)]


def _toml_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _within(child: Path, parent: Path) -> bool:
    return child == parent or parent in child.parents


def _read_table(path: Path) -> list[dict[str, object]]:
    if not path.is_file():
        return []
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as err:
        raise ToolError(f"{path} is not valid TOML ({err}); fix it before adding a kernel") from None
    items = data.get("kernel", [])
    return [i for i in items if isinstance(i, dict)] if isinstance(items, list) else []


def _choose_entry(source: Path, text: str, entry: str | None) -> str:
    found = entry_points(text)
    if entry is not None:
        if not _IDENT.match(entry):
            raise ToolError(f"--entry {entry!r} is not a C identifier")
        if entry not in found:
            shaped = _entry_shaped_names(text)
            detail = (
                f"it defines {entry} with other parameters" if entry in shaped else f"{source.name} does not define it"
            )
            raise ToolError(
                f'entry point {entry} not found: {detail}. The runtime calls extern "C" cudaError_t '
                f"{entry}(void* data, size_t nbytes, cudaStream_t stream), working in place on device memory."
            )
        return entry
    if len(found) == 1:
        return found[0]
    if not found:
        raise ToolError(
            f"{source} defines no entry point the runtime can call: add "
            'extern "C" cudaError_t mr_kernel_NAME(void* data, size_t nbytes, cudaStream_t stream) '
            "(it works in place on nbytes of device memory at data), or name one with --entry"
        )
    raise ToolError(f"{source} defines several entry points ({', '.join(found)}): choose one with --entry")


@contextmanager
def _locked(csrc: Path) -> Iterator[None]:
    """One writer at a time (two `port --add` in one checkout): an advisory lock on the csrc/ directory
    itself, so no lock file is left behind."""
    fd = os.open(csrc, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def register(
    source: Path,
    csrc: Path,
    *,
    name: str | None = None,
    entry: str | None = None,
    dry_run: bool = False,
    include_dirs: Sequence[Path] = (),
) -> Registration:
    """Register ``source`` (see the module docstring). Raises ToolError, having written nothing, on a conflict.
    ``include_dirs``: the port's -I directories; a header reached through one, outside the kernel's directory and
    csrc/, is a conflict (the wheel's build does not see it)."""
    source = Path(os.path.abspath(source))
    csrc = Path(os.path.abspath(csrc))
    if not csrc.is_dir():
        raise ToolError(f"{csrc} is not a directory: --add needs the project's csrc/ (see --project)")
    if dry_run:
        return _register(source, csrc, name, entry, dry_run=True, include_dirs=include_dirs)
    with _locked(csrc):
        return _register(source, csrc, name, entry, dry_run=False, include_dirs=include_dirs)


def _register(
    source: Path, csrc: Path, name: str | None, entry: str | None, *, dry_run: bool, include_dirs: Sequence[Path] = ()
) -> Registration:
    try:
        text = source.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise ToolError(f"cannot read {source} as UTF-8 text: {err}") from None
    kernel_name = name if name is not None else re.sub(r"[^A-Za-z0-9_.-]", "_", source.stem)
    if not _NAME.match(kernel_name):
        raise ToolError(f"kernel name {kernel_name!r}: use letters, digits, '_', '.', '-' (--name)")
    chosen = _choose_entry(source, text, entry)

    # What to copy: the kernel and the headers it includes from its own directory tree (not csrc/'s).
    copies: list[tuple[Path, Path]] = []
    if _within(source, csrc):
        rel_source = source.relative_to(csrc).as_posix()
    else:
        home = source.parent
        target_dir = csrc / KERNELS_DIR
        for path in resolve_includes([source], [*include_dirs, csrc]):
            if _within(path, csrc):
                continue
            if not _within(path, home):
                raise ToolError(
                    f"{source.name} includes {path}, outside its directory and outside csrc/ (the wheel's build "
                    "compiles csrc/ with csrc/ as its only include directory); move the header next to the kernel "
                    "or into csrc/"
                )
            copies.append((path, target_dir / path.relative_to(home)))
        rel_source = (target_dir / source.name).relative_to(csrc).as_posix()
    for src, dst in copies:
        if dst.exists() and dst.read_bytes() != src.read_bytes():
            raise ToolError(
                f"{dst} already exists with different contents; refusing to overwrite it. "
                "Rename the kernel file, or remove the old one if it is yours."
            )

    manifest = csrc / MANIFEST
    entries = _read_table(manifest)
    for item in entries:
        same = item.get("name") == kernel_name and item.get("source") == rel_source and item.get("entry") == chosen
        if same:
            return Registration(kernel_name, chosen, rel_source, (), True)
        if item.get("name") == kernel_name:
            raise ToolError(
                f"{manifest} already has a kernel named {kernel_name!r} (source {item.get('source')}); "
                "choose another --name"
            )
        if item.get("entry") == chosen:
            raise ToolError(
                f"{manifest}: entry point {chosen} is already registered by kernel {item.get('name')!r}; "
                "entry points are linked into one library, so they must be unique"
            )
        if item.get("source") == rel_source:
            raise ToolError(f"{manifest}: {rel_source} is already registered as kernel {item.get('name')!r}")
    if dry_run:
        return Registration(kernel_name, chosen, rel_source, tuple(copies), False)

    written: list[Path] = []
    old_text = manifest.read_text(encoding="utf-8") if manifest.is_file() else None
    try:
        for src, dst in copies:
            if dst.exists():
                continue
            dst.parent.mkdir(parents=True, exist_ok=True)
            _write_atomic(dst, src.read_bytes())
            written.append(dst)
        base = old_text if old_text is not None else MANIFEST_HEADER
        if base and not base.endswith("\n"):
            base += "\n"
        block = (
            f"\n[[kernel]]\nname = {_toml_string(kernel_name)}\nsource = {_toml_string(rel_source)}\n"
            f"entry = {_toml_string(chosen)}\n"
        )
        _write_atomic(manifest, (base + block).encode("utf-8"))
        try:
            read_manifest(csrc)  # the backend must accept what we wrote
        except BuildError as err:
            raise ToolError(f"the updated manifest is not accepted by the build: {err}") from None
    except BaseException:
        # Leave csrc/ as it was: no half-registered kernel.
        if old_text is None:
            manifest.unlink(missing_ok=True)
        else:
            _write_atomic(manifest, old_text.encode("utf-8"))
        for path in written:
            path.unlink(missing_ok=True)
        raise
    return Registration(kernel_name, chosen, rel_source, tuple(copies), False)


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def describe(reg: Registration, csrc: Path) -> list[str]:
    if reg.already:
        return [f"add: kernel {reg.name!r} is already registered ({reg.source}, entry {reg.entry}); nothing to do"]
    lines = [f"add: copied {src} -> {dst}" for src, dst in reg.copied]
    lines.append(f"add: registered kernel {reg.name!r} in {csrc / MANIFEST} (source {reg.source}, entry {reg.entry})")
    lines.append(f"add: the next wheel includes it: monarch_runtime.launch_kernel({reg.name!r}, data)")
    return lines


def check_manifest(csrc: Path) -> list[str]:
    """Problems with csrc/manifest.toml (for `check`): the backend's checks, plus every entry point defined
    with the right shape in its source."""
    try:
        kernels = read_manifest(csrc)
    except BuildError as err:
        return [str(err)]
    out = []
    for k in kernels:
        path = csrc / k.source
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError as err:
            out.append(f"kernel {k.name!r}: cannot read {path}: {err}")
            continue
        if k.entry not in entry_points(text):
            out.append(
                f'kernel {k.name!r}: {k.source} does not define extern "C" cudaError_t {k.entry}'
                "(void* data, size_t nbytes, cudaStream_t stream)"
            )
    return out
