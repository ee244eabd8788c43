"""The stages in order, for one wheel; plus the sdist."""

from __future__ import annotations

import gzip
import io
import os
import shutil
import subprocess
import sys
import tarfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from build_backend import compile as compile_stage
from build_backend import compiler_cache, hipify_stage, log, repair, rust, variant, wheel
from build_backend.lock import build_lock
from build_backend.paths import Layout, make_layout
from buildcore import kernels, settings, toolchain
from buildcore.errors import BuildError
from buildcore.process import private_tmpdir
from buildcore.toolchain import rocm

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.9/3.10 builders
    import tomli as tomllib

SDIST_EXCLUDE_DIRS = {
    ".git",
    "build",
    "dist",
    "target",
    "__pycache__",
    ".pytest_cache",
    ".mypy_cache",
    ".ruff_cache",
    ".hypothesis",
    ".venv",
}


def read_pyproject(source: Path) -> dict[str, Any]:
    path = source / "pyproject.toml"
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except OSError as err:
        raise BuildError(f"cannot read {path}: {err.strerror}; run the build from the project root.") from None
    except tomllib.TOMLDecodeError as err:
        raise BuildError(f"{path} is not valid TOML: {err}.") from None


def _metadata(pyproject: Mapping[str, Any], source: Path, tc: toolchain.Toolchain) -> wheel.Metadata:
    project = pyproject.get("project", {})
    base = str(pyproject.get("tool", {}).get("monarch-runtime", {}).get("version", "0.0.0"))
    readme_path = source / str(project.get("readme", "README.md"))
    readme = readme_path.read_text(encoding="utf-8") if readme_path.is_file() else ""
    license_text = project.get("license", {}).get("text", "") if isinstance(project.get("license"), dict) else ""
    return wheel.Metadata(
        version=f"{base}+{tc.local_label}",
        summary=str(project.get("description", "")),
        requires_python=str(project.get("requires-python", ">=3.9")),
        requires_dist=tc.requires_dist,
        readme=readme,
        license=str(license_text),
        classifiers=tuple(project.get("classifiers", ())),
        extras=_extras(project),
    )


def _extras(project: Mapping[str, Any]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """``[project.optional-dependencies]`` as (name, requirements), in the file's order."""
    table = project.get("optional-dependencies", {})
    if not isinstance(table, Mapping):
        raise BuildError("pyproject.toml: [project.optional-dependencies] must be a table of name = [requirements].")
    extras = []
    for name, reqs in table.items():
        if not isinstance(reqs, list) or not all(isinstance(r, str) for r in reqs):
            raise BuildError(f"pyproject.toml: optional-dependencies {name!r} must be a list of requirement strings.")
        extras.append((str(name), tuple(reqs)))
    return tuple(extras)


def build_info(
    tc: toolchain.Toolchain, meta: wheel.Metadata, debug: bool, registered: tuple[kernels.Kernel, ...]
) -> dict[str, object]:
    archs = [f"sm_{a}" for a in tc.archs] if tc.platform == "cuda" else list(tc.archs)
    info: dict[str, object] = {
        "platform": tc.platform,
        "version": meta.version,
        "archs": archs,
        "toolkit": None if tc.platform == "cpu" else tc.platform,
        "toolkit_version": tc.version_text,
        "collective": tc.collective,
        "collective_library": tc.collective_soname,
        "collective_header_version": tc.collective_header_version,
        "debug": debug,
        # Kernels from csrc/manifest.toml; callable on GPU builds (the CPU build compiles no device code).
        "kernels": [k.name for k in registered],
    }
    if tc.platform == "rocm":
        # What the machine that runs the wheel needs (docs/rocm.md): this HIP runtime, and a ROCm release
        # whose runtime loads this code-object version.
        info["hip_runtime"] = tc.runtime_soname
        info["code_object_version"] = tc.code_object_version
        info["oldest_rocm_runtime"] = rocm.target_for(tc.version).oldest_runtime if tc.version else None
    return info


@dataclass(frozen=True)
class Payload:
    """What every kind of wheel carries: the compiled extension and the build record."""

    toolchain: toolchain.Toolchain
    settings: settings.Settings
    layout: Layout
    metadata: wheel.Metadata
    extension: Path
    build_info: bytes


@contextmanager
def payload_built(
    source: Path, config_settings: Mapping[str, object] | None, environ: Mapping[str, str]
) -> Iterator[Payload]:
    """Stages 1-5: settings, detect, hipify, compile, cargo. The build directory stays locked while the
    caller packs what was built (it reads files from there); the tools' temporary directory
    (``layout.tmp``) lives as long, and is removed afterwards, also when the build fails or is interrupted."""
    pyproject = read_pyproject(source)
    opts = settings.load(config_settings, environ, pyproject)
    with log.stage("detect", "toolchain and architectures"):
        tc = toolchain.detect(opts, environ)
        log.info(
            f"detect: platform={tc.platform}"
            + (
                f" toolkit={tc.version_text} root={tc.root} compiler={tc.compiler} archs={';'.join(tc.archs)}"
                f" collective={tc.collective}"
                if tc.platform != "cpu"
                else " (no GPU toolkit)"
            )
            + (f"; host: {tc.host.describe()}" if tc.host else "")
        )
    if tc.launchers.cmake or tc.launchers.rustc or tc.launchers.notes:
        log.info(f"detect: compiler launchers: {tc.launchers.describe()}")
    layout = make_layout(source, opts.build_dir, tc.platform)
    log.info(f"build directory: {layout.build}")
    registered = kernels.read_manifest(layout.csrc)  # validated before anything is compiled
    with build_lock(layout.build), private_tmpdir(layout.tmp):
        compiler_cache.start_servers(tc.launchers, environ)
        bridge_dir = None
        if tc.platform != "cpu":
            sources = hipify_stage.prepare(tc, layout, opts, registered)
            bridge_dir = compile_stage.build_bridge(tc, layout, opts, sources, environ)
        extension = rust.build_extension(tc, layout, opts, bridge_dir, environ)
        meta = _metadata(pyproject, source, tc)
        info = wheel.build_info_json(build_info(tc, meta, opts.debug, registered))
        yield Payload(tc, opts, layout, meta, extension, info)


def build_wheel_into(
    source: Path, out_dir: Path, config_settings: Mapping[str, object] | None, environ: Mapping[str, str]
) -> Path:
    start = time.perf_counter()
    with payload_built(source, config_settings, environ) as payload:
        return _pack_wheel(source, out_dir, payload, environ, start)


def _pack_wheel(source: Path, out_dir: Path, payload: Payload, environ: Mapping[str, str], start: float) -> Path:
    package_dir = source / "python" / wheel.PACKAGE
    files: dict[str, Path | bytes] = {
        f"{wheel.PACKAGE}/{p.relative_to(package_dir).as_posix()}": p
        for p in sorted(package_dir.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts and p.suffix in (".py", ".pyi", ".typed")
    }
    files[f"{wheel.PACKAGE}/{rust.EXTENSION_NAME}.abi3.so"] = payload.extension
    files[f"{wheel.PACKAGE}/build_info.json"] = payload.build_info
    tag = wheel.platform_tag()
    if payload.settings.repair:
        with log.stage("pack", "unrepaired wheel"):
            unrepaired = wheel.write_wheel(payload.layout.sub("unrepaired"), payload.metadata, tag, files, quiet=True)
        tag, repaired_files = repair.repair(
            unrepaired, payload.toolchain, payload.layout.sub("repaired"), environ, payload.layout.tmp
        )
        files = dict(repaired_files)
    with log.stage("pack", f"wheel into {out_dir}"):
        result = wheel.write_wheel(out_dir, payload.metadata, tag, files)
    if payload.settings.variant:
        with log.stage("variant", f"wheel variant ({payload.settings.variant})"):
            result = variant.make_variant_wheel(result, payload.toolchain, payload.settings.variant, out_dir)
    log.info(f"built {result.name} in {time.perf_counter() - start:.1f} s")
    return result


def build_editable_into(
    source: Path, out_dir: Path, config_settings: Mapping[str, object] | None, environ: Mapping[str, str]
) -> Path:
    """An editable install: the compiled extension and build record are placed next to the Python
    sources in python/monarch_runtime/ (ignored by git), and the wheel holds only a .pth file that puts
    python/ on sys.path. Python edits show at once; after a C++/Rust edit, run the same
    `pip install -e .` again: the build directory is reused, so only what changed is rebuilt."""
    with payload_built(source, config_settings, environ) as payload:
        return _pack_editable(source, out_dir, payload)


def _pack_editable(source: Path, out_dir: Path, payload: Payload) -> Path:
    package_dir = source / "python" / wheel.PACKAGE
    for name, data in (
        (f"{rust.EXTENSION_NAME}.abi3.so", payload.extension.read_bytes()),
        ("build_info.json", payload.build_info),
    ):
        tmp = package_dir / f".{name}.tmp"
        tmp.write_bytes(data)
        tmp.chmod(0o755 if name.endswith(".so") else 0o644)
        tmp.replace(package_dir / name)
    pth = f"{(source / 'python').resolve()}\n".encode()
    with log.stage("pack", f"editable wheel into {out_dir}"):
        return wheel.write_wheel(
            out_dir, payload.metadata, wheel.platform_tag(), {"_monarch_runtime_editable.pth": pth}
        )


def _sdist_files(source: Path) -> list[Path]:
    """The files git knows (tracked, or untracked but not ignored); without git, every file outside
    build outputs and caches."""
    git = shutil.which("git")
    if git and (source / ".git").exists():
        proc = subprocess.run(
            [git, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=source,
            capture_output=True,
            check=False,
        )
        if proc.returncode == 0:
            names = [n for n in proc.stdout.decode("utf-8", "surrogateescape").split("\0") if n]
            return sorted(p for p in (source / n for n in names) if p.is_file())
    return sorted(
        p
        for p in source.rglob("*")
        if p.is_file()
        and not (set(p.relative_to(source).parts[:-1]) & SDIST_EXCLUDE_DIRS)
        and not p.name.endswith((".pyc", ".so", ".whl"))
    )


def write_sdist(source: Path, out_dir: Path, version: str) -> Path:
    """A reproducible .tar.gz of the source tree (without build outputs)."""
    base = f"monarch_runtime-{version}"
    epoch = os.environ.get("SOURCE_DATE_EPOCH", "")
    mtime = int(epoch) if epoch.isdigit() else wheel.DEFAULT_EPOCH
    files = _sdist_files(source)
    target = out_dir / f"{base}.tar.gz"
    tmp = out_dir / f".{target.name}.partial"
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        pkg_info = f"Metadata-Version: 2.1\nName: {wheel.NAME}\nVersion: {version}\n".encode()
        members = [("PKG-INFO", pkg_info, 0o644)]
        members += [
            (p.relative_to(source).as_posix(), p.read_bytes(), 0o755 if os.access(p, os.X_OK) else 0o644) for p in files
        ]
        for name, data, mode in members:
            info = tarfile.TarInfo(f"{base}/{name}")
            info.size, info.mtime, info.mode = len(data), mtime, mode
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(data))
    try:
        with tmp.open("wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=mtime, filename="") as gz:
            gz.write(buffer.getvalue())
        tmp.replace(target)
    except OSError as err:
        tmp.unlink(missing_ok=True)
        raise BuildError(f"could not write the sdist into {out_dir}: {err.strerror}.") from None
    return target
