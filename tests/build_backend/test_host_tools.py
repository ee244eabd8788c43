"""The host compilers and Rust's linker (buildcore/toolchain/host.py): what detection chooses and why, that a
user's variables win, the errors where a CUDA or CPU build has no compiler, and that the stages pass the
choice on (CMake's CMAKE_CXX_COMPILER / CMAKE_CUDA_HOST_COMPILER, cargo's CC, CXX and linker variable).

PATH here is a directory of chosen links: a host-side complement to the bare roots (test_bare_roots.py),
where nothing of gcc, g++ or cc is installed at all."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from build_backend import compile as compile_stage
from build_backend import rust
from build_backend.hipify_stage import BridgeSources
from build_backend.paths import make_layout
from buildcore.errors import BuildError
from buildcore.settings import Settings
from buildcore.toolchain import Toolchain, host
from buildcore.toolchain.model import HostTool, HostTools, linker_variable

TRIPLE = "x86_64-unknown-linux-gnu"
LINKER = linker_variable(TRIPLE)


def path_of(tmp_path: Path, **links: str) -> str:
    """A PATH of one directory holding ``name -> program`` links (a program of this machine, by name)."""
    directory = tmp_path / "bin"
    directory.mkdir(exist_ok=True)
    for name, program in links.items():
        found = shutil.which(program)
        if found is None:
            pytest.fail(f"{program} is not installed on this machine")
        (directory / name).symlink_to(found)
    return str(directory)


def rocm_clang(tmp_path: Path) -> Path:
    """A ROCm clang++ with its C driver beside it (stand-ins: only their paths matter here)."""
    bin_dir = tmp_path / "llvm" / "bin"
    bin_dir.mkdir(parents=True)
    for name in ("clang", "clang++"):
        (bin_dir / name).write_text("#!/bin/sh\n")
        (bin_dir / name).chmod(0o755)
    return bin_dir / "clang++"


def env(path: str, **extra: str) -> dict[str, str]:
    return {"PATH": path, "RUSTC": "/nonexistent/rustc", **extra}


def test_linker_variable_is_cargos_name_for_the_triple() -> None:
    assert linker_variable("x86_64-unknown-linux-gnu") == "CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER"
    assert linker_variable("aarch64-unknown-linux-gnu") == "CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER"


def test_the_triple_comes_from_rustc() -> None:
    rustc = shutil.which("rustc") or shutil.which("rustc", path=str(Path.home() / ".cargo" / "bin"))
    if rustc is None:
        pytest.fail("rustc is not installed")
    assert host.rust_target({"RUSTC": rustc}, "") == TRIPLE  # this machine: x86_64 Linux
    assert host.rust_target({}, "/nonexistent").endswith("-unknown-linux-gnu")  # no rustc: the machine's


def test_rocm_without_cc_uses_the_rocm_clang_for_everything(tmp_path: Path) -> None:
    clangxx = rocm_clang(tmp_path)
    tools = host.choose("rocm", env(path_of(tmp_path)), clangxx)
    assert tools.c == HostTool(clangxx.with_name("clang"), "the ROCm clang: no cc on PATH", passed=True)
    assert tools.cxx == HostTool(clangxx, "the ROCm clang: no c++ on PATH", passed=True)
    assert tools.linker == HostTool(clangxx.with_name("clang"), "the ROCm clang: no cc on PATH", passed=True)
    assert tools.cuda_host is None
    assert "Rust linker" in tools.describe() and "(the ROCm clang: no c++ on PATH)" in tools.describe()


def test_rocm_with_cc_on_path_keeps_it_and_cargos_default(tmp_path: Path) -> None:
    search = path_of(tmp_path, cc="cc", **{"c++": "c++"})
    tools = host.choose("rocm", env(search), rocm_clang(tmp_path))
    assert tools.c == HostTool(Path(search) / "cc", "cc on PATH", passed=True)
    assert tools.cxx == HostTool(Path(search) / "c++", "c++ on PATH", passed=True)
    assert tools.linker == HostTool(Path(search) / "cc", "cc on PATH, cargo's default", passed=False)


def test_the_users_variables_win_and_are_left_to_the_tools(tmp_path: Path) -> None:
    search = path_of(tmp_path, cc="cc", mycc="cc", myld="cc")
    clangxx = rocm_clang(tmp_path)
    tools = host.choose("rocm", env(search, CC="mycc -O1", CXX=str(clangxx), **{LINKER: "myld"}), clangxx)
    assert tools.c == HostTool(Path(search) / "mycc", "CC from the environment", passed=False)
    assert tools.cxx is not None and tools.cxx.why == "CXX from the environment" and not tools.cxx.passed
    assert tools.linker == HostTool(Path(search) / "myld", f"{LINKER} from the environment", passed=False)
    flagged = host.choose("cpu", env(search, RUSTFLAGS="-C opt-level=2 -C linker=/opt/ld-wrapper"))
    assert flagged.linker == HostTool(Path("/opt/ld-wrapper"), "-C linker= in RUSTFLAGS", passed=False)


@pytest.mark.fault
@pytest.mark.parametrize("variable", ["CC", "CXX", LINKER, "CUDAHOSTCXX"])
def test_a_users_variable_that_names_no_program(tmp_path: Path, variable: str) -> None:
    search = path_of(tmp_path, cc="cc", **{"c++": "c++"})
    platform = "cuda" if variable == "CUDAHOSTCXX" else "rocm"
    with pytest.raises(BuildError) as err:
        host.choose(platform, env(search, **{variable: "no-such-compiler --flag"}), rocm_clang(tmp_path))
    text = str(err.value)
    assert f"{variable}='no-such-compiler --flag' (from the environment) names no program" in text, text
    assert f"is not on PATH ({search})" in text and "or unset it to let the build choose" in text, text


def test_cuda_host_compiler_cudahostcxx_then_cxx_then_path(tmp_path: Path) -> None:
    search = path_of(tmp_path, cc="cc", gxx="g++", **{"g++": "g++"})  # no c++: g++ is next
    tools = host.choose("cuda", env(search))
    assert tools.cxx == HostTool(Path(search) / "g++", "g++ on PATH: no c++", passed=True)
    assert tools.cuda_host == HostTool(Path(search) / "g++", "g++ on PATH: no c++", passed=True)
    from_cxx = host.choose("cuda", env(search, CXX="gxx"))
    assert from_cxx.cxx is not None and not from_cxx.cxx.passed  # CMake reads CXX itself ...
    assert from_cxx.cuda_host == HostTool(Path(search) / "gxx", "CXX from the environment", passed=True)  # not nvcc
    own = host.choose("cuda", env(search, CUDAHOSTCXX="gxx"))
    assert own.cuda_host == HostTool(Path(search) / "gxx", "CUDAHOSTCXX from the environment", passed=False)


@pytest.mark.fault
def test_cuda_without_a_host_cxx_compiler_is_one_paragraph(tmp_path: Path) -> None:
    search = path_of(tmp_path, cc="cc")  # a C compiler, but nothing for C++
    with pytest.raises(BuildError) as err:
        host.choose("cuda", env(search))
    text = str(err.value)
    assert "the CUDA build needs a host C++ compiler" in text and "nvcc" in text, text
    assert f"CUDAHOSTCXX and CXX: unset; c++, g++ and clang++ on PATH={search}" in text, text
    assert "apt-get install g++" in text and "set CUDAHOSTCXX (or CXX)" in text and "\n" not in text


@pytest.mark.fault
def test_cpu_without_cc_names_rusts_need_for_a_linker(tmp_path: Path) -> None:
    with pytest.raises(BuildError) as err:
        host.choose("cpu", env(path_of(tmp_path)))
    text = str(err.value)
    assert "the CPU build needs a C compiler as Rust's linker" in text and "cargo's default is cc" in text, text
    assert f"set {LINKER} (or CC)" in text and "apt-get install gcc" in text, text


def test_cpu_without_cc_links_with_gcc_or_the_users_cc(tmp_path: Path) -> None:
    search = path_of(tmp_path, gcc="gcc")
    assert host.choose("cpu", env(search)).linker == HostTool(
        Path(search) / "gcc", "gcc on PATH: no cc on PATH", passed=True
    )
    assert host.choose("cpu", env(search, CC="gcc")).linker == HostTool(
        Path(search) / "gcc", "CC from the environment: no cc on PATH", passed=True
    )
    tools = host.choose("cpu", env(search))
    assert tools.c is None and tools.cxx is None  # the CPU build compiles no C or C++


def test_a_launcher_in_cc_is_not_made_the_linker(tmp_path: Path) -> None:
    """CC="ccache gcc" is for the cc crate; cargo's linker must be one program: the platform's own fallback."""
    search = path_of(tmp_path, gcc="gcc", ccache="true")
    assert host.choose("cpu", env(search, CC="ccache gcc")).linker.path == Path(search) / "gcc"
    clangxx = rocm_clang(tmp_path)
    tools = host.choose("rocm", env(search, CC="ccache gcc"), clangxx)
    assert tools.c is not None and tools.c.path == Path(search) / "ccache" and not tools.c.passed
    assert tools.linker == HostTool(clangxx.with_name("clang"), "the ROCm clang: no cc on PATH", passed=True)


# ----------------------------------------------------------------------- the stages pass the choice on
class Ran(Exception):
    """Raised by the stand-in for buildcore.process.run: what the stage would have run, and with what."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        super().__init__("ran")
        self.args, self.env = args, env


@pytest.fixture
def captured(monkeypatch: pytest.MonkeyPatch) -> None:
    def fake_run(args: list[str], *, env: dict[str, str], **_: object) -> str:
        raise Ran([os.fspath(a) for a in args], dict(env))

    monkeypatch.setattr(compile_stage, "run", fake_run)
    monkeypatch.setattr(rust, "run", fake_run)


def rocm_toolchain(tmp_path: Path, tools: HostTools) -> Toolchain:
    clangxx = rocm_clang(tmp_path / "rocm")
    (tmp_path / "include").mkdir()
    return Toolchain(
        platform="rocm",
        root=tmp_path,
        compiler=clangxx,
        archs=("gfx942",),
        collective_soname="librccl.so.1",
        collective_include=tmp_path / "include",
        lib_dir=tmp_path,
        device_lib_dir=tmp_path,
        host=tools,
    )


def test_cmake_and_cargo_get_what_detection_chose(tmp_path: Path, captured: None) -> None:
    root = Path(__file__).resolve().parents[2]
    layout = make_layout(root, tmp_path / "build", "rocm")
    clangxx = tmp_path / "clang++"
    tools = HostTools(
        rust_target=TRIPLE,
        linker=HostTool(tmp_path / "clang", "the ROCm clang: no cc on PATH"),
        c=HostTool(tmp_path / "clang", "the ROCm clang: no cc on PATH"),
        cxx=HostTool(clangxx, "the ROCm clang: no c++ on PATH"),
    )
    tc = rocm_toolchain(tmp_path, tools)
    with pytest.raises(Ran) as cmake:
        compile_stage.build_bridge(tc, layout, Settings(), BridgeSources((), ()), {"PATH": "/nonexistent"})
    assert f"-DCMAKE_CXX_COMPILER={clangxx}" in cmake.value.args
    with pytest.raises(Ran) as cargo:
        rust.build_extension(tc, layout, Settings(), None, {"PATH": "/nonexistent"})
    assert cargo.value.env["CC"] == str(tmp_path / "clang") and cargo.value.env["CXX"] == str(clangxx)
    assert cargo.value.env[LINKER] == str(tmp_path / "clang")


def test_the_users_own_variables_reach_the_tools_untouched(tmp_path: Path, captured: None) -> None:
    root = Path(__file__).resolve().parents[2]
    layout = make_layout(root, tmp_path / "build", "rocm")
    user = {"PATH": "/nonexistent", "CC": "ccache gcc", "CXX": "g++ -m64", LINKER: "mold-cc"}
    tools = HostTools(
        rust_target=TRIPLE,
        linker=HostTool(Path("/usr/bin/mold-cc"), f"{LINKER} from the environment", passed=False),
        c=HostTool(Path("/usr/bin/ccache"), "CC from the environment", passed=False),
        cxx=HostTool(Path("/usr/bin/g++"), "CXX from the environment", passed=False),
    )
    tc = rocm_toolchain(tmp_path, tools)
    with pytest.raises(Ran) as cmake:
        compile_stage.build_bridge(tc, layout, Settings(), BridgeSources((), ()), user)
    assert not [a for a in cmake.value.args if a.startswith("-DCMAKE_CXX_COMPILER=")]  # CMake reads CXX itself
    assert cmake.value.env["CXX"] == "g++ -m64"
    with pytest.raises(Ran) as cargo:
        rust.build_extension(tc, layout, Settings(), None, user)
    assert (cargo.value.env["CC"], cargo.value.env["CXX"], cargo.value.env[LINKER]) == (
        "ccache gcc",
        "g++ -m64",
        "mold-cc",
    )


def test_nvcc_gets_the_chosen_host_compiler(tmp_path: Path, captured: None) -> None:
    root = Path(__file__).resolve().parents[2]
    layout = make_layout(root, tmp_path / "build", "cuda")
    gxx = tmp_path / "g++"
    tools = HostTools(
        rust_target=TRIPLE,
        linker=HostTool(Path("/usr/bin/cc"), "cc on PATH, cargo's default", passed=False),
        c=HostTool(Path("/usr/bin/cc"), "cc on PATH"),
        cxx=HostTool(gxx, "g++ on PATH: no c++"),
        cuda_host=HostTool(gxx, "g++ on PATH: no c++"),
    )
    (tmp_path / "include").mkdir()
    tc = Toolchain(
        platform="cuda",
        root=tmp_path,
        compiler=tmp_path / "nvcc",
        archs=("90",),
        collective_soname="libnccl.so.2",
        collective_include=tmp_path / "include",
        host=tools,
    )
    with pytest.raises(Ran) as cmake:
        compile_stage.build_bridge(tc, layout, Settings(), BridgeSources((), ()), {"PATH": "/nonexistent"})
    assert f"-DCMAKE_CUDA_HOST_COMPILER={gxx}" in cmake.value.args and f"-DCMAKE_CXX_COMPILER={gxx}" in cmake.value.args
    with pytest.raises(Ran) as cargo:
        rust.build_extension(tc, layout, Settings(), None, {"PATH": "/nonexistent"})
    assert LINKER not in cargo.value.env  # cc is on PATH: cargo's own default, nothing passed
