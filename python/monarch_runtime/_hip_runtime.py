"""One HIP runtime per process, on ROCm builds.

The ROCm extension links ``libamdhip64.so.N`` by its soname. A ROCm PyTorch wheel bundles its own copy of
that library (``torch/lib``) and loads it by path. Two copies in one process abort (PyTorch Monarch's ROCm CI
was switched off for that: its issue #4145), so:

* torch imported first: its copy is already mapped, and the dynamic loader gives our ``DT_NEEDED`` that
  copy (it matches loaded libraries by soname);
* monarch_runtime imported first: before the extension loads, the copy that an installed ROCm torch wheel
  would load is loaded here, by path, if its soname is the one we need. torch, imported later, finds that
  very file already mapped and uses it (the loader matches a file it has loaded by device and inode).
  Without such a torch, the extension takes the system's runtime as usual.

``MONARCH_HIP_RUNTIME`` overrides: ``auto`` (the default, as above), ``system`` (never preload) or the path
of a ``libamdhip64.so.N`` to load first. Nothing here imports torch. Standard library only.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import struct
from collections.abc import Mapping
from pathlib import Path

SHT_DYNAMIC = 6
DT_SONAME = 14


def soname(path: Path) -> str | None:
    """The DT_SONAME of a 64-bit little-endian ELF shared library, or None."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return None
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    for _name, kind, _flags, _addr, offset, size, link, _info, _align, entsize in sections:
        if kind != SHT_DYNAMIC or not entsize:
            continue
        strtab_offset = sections[link][4]
        for entry in range(offset, offset + size, entsize):
            tag, value = struct.unpack_from("<qQ", data, entry)
            if tag == DT_SONAME:
                end = data.index(b"\0", strtab_offset + value)
                return data[strtab_offset + value : end].decode("ascii", "replace")
    return None


def mapped() -> list[str]:
    """The HIP runtimes mapped in this process (paths), from /proc/self/maps."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            return sorted({line.split()[-1] for line in maps if "/libamdhip64" in line})
    except OSError:
        return []


def torch_bundled() -> list[Path]:
    """The HIP runtime files an installed ROCm torch wheel carries (torch is located, not imported)."""
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return []
    if spec is None or not spec.submodule_search_locations:
        return []
    found: list[Path] = []
    for location in spec.submodule_search_locations:
        found += sorted((Path(location) / "lib").glob("libamdhip64.so*"))
    return found


def preload(needed: str, environ: Mapping[str, str] = os.environ) -> str | None:
    """Load the HIP runtime the extension should bind to, before it loads; return its path, or None when
    the dynamic loader's own choice stands. ``needed`` is the extension's soname (libamdhip64.so.7)."""
    choice = environ.get("MONARCH_HIP_RUNTIME", "auto").strip() or "auto"
    if choice == "system":
        return None
    if choice != "auto":
        path = Path(choice)
        if soname(path) != needed:
            raise ImportError(
                f"MONARCH_HIP_RUNTIME={choice} is not a {needed} (its soname is {soname(path)}); point it at the "
                f"HIP runtime of a ROCm {needed.rsplit('.', 1)[-1]}.x install, or use auto or system."
            )
        ctypes.CDLL(str(path))
        return str(path)
    if mapped():  # someone (a torch imported first) already chose; the loader will reuse it
        return None
    for candidate in torch_bundled():
        if soname(candidate) == needed:
            ctypes.CDLL(str(candidate))
            return str(candidate)
    return None
