"""Helpers for tests/ci: synthetic wheels built here with the host C compiler.

A synthetic wheel looks like a monarch_runtime wheel: a pure-Python ``monarch_runtime/__init__.py``
with ``build_info()``, ``build_info.json``, and one small ELF shared library compiled from C with
whatever NEEDED/RPATH/undefined symbols a test asks for. Each validation check is shown to pass on
the good wheel and to fail on a wheel broken in exactly its way.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

CC = shutil.which("cc") or shutil.which("gcc")


@dataclass
class ElfSpec:
    """C source for one shared library, and how to link it."""

    source: str = "int monarch_answer(void) { return 42; }\n"
    libs: Sequence[str] = ()  # extra -l:NAME (stub libraries built next to it)
    rpath: str | None = None
    name: str = "_native.abi3.so"
    extra: Sequence[str] = ()


@dataclass
class WheelSpec:
    flavour: str = "cpu"
    local: str = "cpu"
    py_tag: str = "cp39"
    abi: str = "abi3"
    plat: str = "manylinux_2_17_x86_64"
    wheel_tag: str | None = None  # the Tag: line in WHEEL (default: from the file name)
    build_info: dict[str, Any] | None = None
    runtime_build_info: dict[str, Any] | None = None  # what build_info() returns (default: the JSON)
    init_extra: str = ""
    elves: Sequence[ElfSpec] = field(default_factory=lambda: [ElfSpec()])
    padding: int = 0  # bytes of incompressible data, to blow a size budget


def default_build_info(flavour: str) -> dict[str, Any]:
    return {
        "cpu": {"platform": "cpu", "archs": [], "toolkit_version": None, "collective": None},
        "cuda13": {"platform": "cuda", "archs": ["80", "90"], "toolkit_version": "13.0", "collective": "nccl"},
        "rocm5.2": {"platform": "rocm", "archs": ["gfx90a", "gfx940"], "toolkit_version": "5.2", "collective": "rccl"},
    }[flavour]


def _compile(spec: ElfSpec, workdir: Path) -> bytes:
    if CC is None:
        pytest.skip("no C compiler (cc) to build synthetic ELF files")
    src = workdir / (spec.name + ".c")
    src.write_text(spec.source)
    out = workdir / spec.name
    argv = [CC, "-shared", "-fPIC", "-o", str(out), str(src), "-L", str(workdir), "-Wl,--no-as-needed"]
    for lib in spec.libs:
        stub = workdir / lib
        if not stub.exists():
            stub_src = workdir / (lib + ".c")
            stub_src.write_text("int stub_placeholder(void) { return 0; }\n")
            subprocess.run([CC, "-shared", "-fPIC", "-o", str(stub), str(stub_src), f"-Wl,-soname,{lib}"], check=True)
        argv.append(f"-l:{lib}")
    if spec.rpath is not None:
        argv.append(f"-Wl,-rpath,{spec.rpath}")
    argv += list(spec.extra)
    subprocess.run(argv, check=True)
    return out.read_bytes()


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


WheelFactory = Callable[..., Path]


def wheel_factory(tmp_path: Path) -> WheelFactory:
    """factory(**WheelSpec fields) -> path of a synthetic wheel under tmp_path."""
    counter = iter(range(1000))

    def factory(**kwargs: Any) -> Path:
        spec = WheelSpec(**kwargs)
        n = next(counter)
        work = tmp_path / f"w{n}"
        work.mkdir()
        info = spec.build_info if spec.build_info is not None else default_build_info(spec.flavour)
        runtime = spec.runtime_build_info if spec.runtime_build_info is not None else info
        version = f"0.1.0+{spec.local}"
        dist_info = f"monarch_runtime-{version}.dist-info"
        tag = f"{spec.py_tag}-{spec.abi}-{spec.plat}"
        files: dict[str, bytes] = {
            "monarch_runtime/__init__.py": (
                f"{spec.init_extra}\n"
                f"_INFO = {json.dumps(runtime)!r}\n"
                "def build_info():\n"
                "    import json\n"
                "    return json.loads(_INFO)\n"
            ).encode(),
            "monarch_runtime/build_info.json": json.dumps(info).encode(),
        }
        for elf in spec.elves:
            files[f"monarch_runtime/{elf.name}"] = _compile(elf, work)
        if spec.padding:
            files["monarch_runtime/padding.bin"] = os.urandom(spec.padding)
        files[f"{dist_info}/METADATA"] = (
            f"Metadata-Version: 2.1\nName: monarch-runtime\nVersion: {version}\nRequires-Python: >=3.9\n"
        ).encode()
        files[f"{dist_info}/WHEEL"] = (
            f"Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: false\nTag: {spec.wheel_tag or tag}\n"
        ).encode()
        record = [_record_line(name, data) for name, data in files.items()]
        record.append(f"{dist_info}/RECORD,,")
        files[f"{dist_info}/RECORD"] = ("\n".join(record) + "\n").encode()
        path = work / f"monarch_runtime-{version}-{tag}.whl"
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
            for name, data in files.items():
                zf.writestr(name, data)
        return path

    return factory
