"""Stage 5: the Rust runtime, built by maturin into the PyO3 extension (abi3): rust/extension, which links
rust/runtime's rlib."""

from __future__ import annotations

import os
import shutil
import sys
import zipfile
from collections.abc import Mapping
from pathlib import Path

from build_backend import cargo_workspace, log, rustc_wrapper
from build_backend.paths import BUILD_PREFIX, SOURCE_PREFIX, Layout, user_cache
from buildcore.errors import BuildError
from buildcore.process import run
from buildcore.settings import Settings
from buildcore.toolchain import Toolchain
from buildcore.toolchain.launcher import RUSTC_WRAPPER

EXTENSION_NAME = "_native"
# Where the registry crates' build-script outputs are copied (under the user's cache directory), and what that
# directory is called inside binaries.
OUT_DIRS = "cargo-out-dirs"
OUT_DIRS_PREFIX = "/monarch-runtime/out-dirs"
# pyo3's cross-compiling variables (PYO3_CROSS, PYO3_CROSS_LIB_DIR, PYO3_CROSS_PYTHON_VERSION, ...).
PYO3_CROSS = "PYO3_CROSS"
# The crate maturin builds: the cdylib that links rust/runtime.
MANIFEST = Path("rust") / "extension" / "Cargo.toml"


def _maturin(environ: Mapping[str, str]) -> list[str]:
    """The maturin command. Under pip's build isolation the maturin binary is on PATH (pip puts the build
    environment's scripts there) but `python -m maturin` looks in the base interpreter's scripts directory
    and misses it; so PATH first, then the scripts next to this interpreter, then `-m maturin`."""
    found = shutil.which("maturin", path=environ.get("PATH")) or shutil.which(
        "maturin", path=str(Path(sys.executable).parent)
    )
    return [found] if found else [sys.executable, "-m", "maturin"]


def build_extension(
    toolchain: Toolchain, layout: Layout, settings: Settings, bridge_dir: Path | None, environ: Mapping[str, str]
) -> Path:
    """Build the extension; return the path of ``_native.abi3.so`` (extracted from maturin's wheel)."""
    if not (layout.source / MANIFEST).is_file():
        raise BuildError(
            f"the extension crate's manifest {layout.source / MANIFEST} is missing; is this a monarch-runtime checkout?"
        )
    out = layout.sub("maturin")
    for old in out.glob("*.whl"):
        old.unlink()
    cargo_home = Path(environ.get("CARGO_HOME", Path.home() / ".cargo"))
    cache = user_cache(environ)
    out_dirs = cache / OUT_DIRS
    # The path maps (no build path in what rustc writes). Every crate gets CARGO_HOME's, where the registry's
    # sources are, and that of the build-script outputs (OUT_DIR), which the wrapper moves to copies under
    # ``out_dirs``; only the workspace's own crates get the workspace's (and the build directory's where their
    # OUT_DIR stays there), through the wrapper (rustc_wrapper.py). So a crate's command line is the same from
    # any checkout, and a compiler cache hits it from anywhere. The workspace's are appended after the others,
    # in this order: rustc applies the last map that matches.
    common_maps = [f"--remap-path-prefix={cargo_home}=/cargo", f"--remap-path-prefix={out_dirs}={OUT_DIRS_PREFIX}"]
    # CARGO_ENCODED_RUSTFLAGS separates flags with 0x1f, so paths with spaces stay whole; the user's
    # RUSTFLAGS (white-space separated, as cargo reads them) are kept in front.
    user_flags = (
        environ.get("CARGO_ENCODED_RUSTFLAGS", "").split("\x1f")
        if environ.get("CARGO_ENCODED_RUSTFLAGS")
        else (environ.get("RUSTFLAGS", "").split())
    )
    encoded_rustflags = "\x1f".join([*user_flags, *common_maps])
    launcher = toolchain.launchers.rustc
    # Cross-compiling (CARGO_BUILD_TARGET), or under pyo3's PYO3_CROSS* variables, pyo3's build script writes
    # into pyo3-build-config's OUT_DIR: that stays the build's own, not a copy every build shares.
    pyo3_writes = bool(environ.get("CARGO_BUILD_TARGET")) or any(k.startswith(PYO3_CROSS) for k in environ)
    # The target directory is maturin's --target-dir, not CARGO_TARGET_DIR: sccache hashes every CARGO_
    # variable of rustc's environment into each crate's key, and this one names the build directory.
    dropped = ("RUSTFLAGS", "CARGO_TARGET_DIR")
    env = {
        **{k: v for k, v in environ.items() if k not in dropped},
        **toolchain.env,
        "MONARCH_GPU_PLATFORM": toolchain.platform,
        "CARGO_ENCODED_RUSTFLAGS": encoded_rustflags,
    }
    host = toolchain.host
    if host is not None:  # detection's choices (toolchain/host.py); a user's own variables are left as they are
        for name, tool in (("CC", host.c), ("CXX", host.cxx), (host.linker_variable, host.linker)):
            if tool is not None and tool.passed:
                env[name] = os.fspath(tool.path)
    if bridge_dir is not None:
        env["MONARCH_BRIDGE_LIB_DIR"] = os.fspath(bridge_dir)
    if toolchain.platform == "cuda" and toolchain.root is not None:
        env["MONARCH_CUDA_HOME"] = os.fspath(toolchain.root)
    if toolchain.platform == "rocm" and toolchain.root is not None and toolchain.lib_dir is not None:
        env["MONARCH_ROCM_PATH"] = os.fspath(toolchain.root)
        env["MONARCH_HIP_LIB_DIR"] = os.fspath(toolchain.lib_dir)
    # The compiler cache (toolchain/launcher.py; rustc's runs through the wrapper): CC for the cc crate in
    # rocm_compat's build script, wrapping the C compiler as set so far (the user's CC, or none: `cc`).
    env.update(toolchain.launchers.rust_env(env))
    env.update(toolchain.launchers.tool_env(layout.source, layout.build, environ))
    link_args: list[str] = []
    if toolchain.rpaths:
        link_args = ["-C", f"link-arg=-Wl,--enable-new-dtags,-rpath,{':'.join(toolchain.rpaths)}"]
    # Under a cache for rustc, the workspace's crates compile from a copy at a path of their own
    # (cargo_workspace.py), so that they too hit the cache from any checkout.
    with cargo_workspace.workspace(layout.source, cache / cargo_workspace.SLOTS if launcher else None) as root:
        env[RUSTC_WRAPPER] = os.fspath(
            rustc_wrapper.write(
                layout.build,
                workspace=root,
                registry=cargo_home,
                workspace_flags=[f"--remap-path-prefix={root}={SOURCE_PREFIX}", *common_maps],
                build_flags=[f"--remap-path-prefix={layout.build}={BUILD_PREFIX}"],
                out_dirs=None if pyo3_writes else out_dirs,
                launcher=launcher.program if launcher else None,
            )
        )
        args = [
            *_maturin(environ),
            "build",
            "--manifest-path",
            os.fspath(root / MANIFEST),
            "--out",
            os.fspath(out),
            "--target-dir",
            os.fspath(layout.sub("cargo")),
            "--features",
            "extension-module",
            "--interpreter",
            sys.executable,
            "--compatibility",
            "linux",
            "--auditwheel",
            "skip",
        ]
        args += ["--profile", "dev"] if settings.debug else ["--release", "--strip"]
        if settings.jobs:
            args += ["--jobs", str(settings.jobs)]
        if link_args:
            args += ["--", *link_args]
        where = "" if root == layout.source else f", the workspace copied to {root}"
        with log.stage("cargo", f"maturin build of rust/extension for {toolchain.platform}{where}"):
            run(
                args,
                env=env,
                tmpdir=layout.tmp,
                cwd=layout.build,
                what="building the Rust extension with maturin",
                fix="Is Rust installed (https://rustup.rs) and cargo on PATH?",
            )
    wheels = sorted(out.glob("*.whl"))
    if len(wheels) != 1:
        raise BuildError(f"maturin produced {len(wheels)} wheels in {out}, expected one.")
    target = layout.build / f"{EXTENSION_NAME}.abi3.so"
    with zipfile.ZipFile(wheels[0]) as zf:
        members = [n for n in zf.namelist() if Path(n).name.startswith(EXTENSION_NAME) and n.endswith(".so")]
        if len(members) != 1:
            raise BuildError(
                f"maturin's wheel {wheels[0].name} holds {members or 'no'} extension modules, expected one."
            )
        tmp = target.with_suffix(".tmp")
        tmp.write_bytes(zf.read(members[0]))
        tmp.replace(target)
    return target
