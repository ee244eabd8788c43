"""Current ROCm for real: the ROCm 7.2 and 6.4 wheels, built inside Debian sid roots that carry HIP 7.2 +
RCCL 7.2 (Debian experimental) and HIP 6.4 (sid), checked from outside (tags, glibc symbols, code objects,
reproducibility) and used inside their root in a fresh venv, as on an MI300X/MI355X machine without a GPU.
The wheels come from the session fixture ``root_builds`` (tests/conftest.py): built once, shared."""

from __future__ import annotations

import io
import json
import re
import shutil
import struct
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
from _roots import RootBuild, require_root, run_in_root
from _support import ROOT
from elftools.elf.elffile import ELFFile

pytestmark = pytest.mark.slow

VERSIONS = ("7.2", "6.4")
EXPECTED = {
    "7.2": {
        "label": "+rocm7.2",
        "archs": ["gfx90a", "gfx942", "gfx950"],
        "hip_runtime": "libamdhip64.so.7",
        "code_object": 6,
        "rccl": True,
    },
    # HIP 6.4's clang-21 accepts gfx950, which 6.4 adds to its defaults then.
    "6.4": {
        "label": "+rocm6.4",
        "archs": ["gfx90a", "gfx942", "gfx950"],
        "hip_runtime": "libamdhip64.so.6",
        "code_object": 5,
        "rccl": False,
    },
}
# What RHEL 9 (glibc 2.34, GCC 11's libstdc++) and Ubuntu 22.04 (2.35) can load.
GLIBC_CEILING = (2, 34)
GLIBCXX_CEILING = (3, 4, 29)
# AMDGPU code objects: e_ident[EI_ABIVERSION] per code-object version (LLVM's AMDGPUUsage).
ABI_VERSION_TO_CODE_OBJECT = {2: 4, 3: 5, 4: 6}


def wheel_of(root_builds: dict[str, RootBuild], name: str) -> Path:
    build = root_builds[name]
    if build.wheel is None:
        pytest.fail(f"the ROCm {name} build in its root failed:\n{build.log[-5000:]}")
    return build.wheel


def extension_bytes(wheel: Path) -> bytes:
    with zipfile.ZipFile(wheel) as zf:
        (name,) = [n for n in zf.namelist() if n.endswith(".so")]
        return zf.read(name)


def versioned_symbols(data: bytes) -> set[str]:
    """Every symbol version the extension requires (GLIBC_2.34, GLIBCXX_3.4.29, ...)."""
    elf = ELFFile(io.BytesIO(data))
    needs: set[str] = set()
    section = elf.get_section_by_name(".gnu.version_r")
    if section is not None:
        for _verneed, auxes in section.iter_versions():
            needs.update(aux.name for aux in auxes)
    return needs


def code_objects(data: bytes) -> dict[str, int]:
    """The device code objects in the extension's HIP fat binary (a clang offload bundle): target -> the
    code-object version of its ELF."""
    elf = ELFFile(io.BytesIO(data))
    section = elf.get_section_by_name(".hip_fatbin")
    assert section is not None, "no .hip_fatbin section: no device code in the extension"
    blob = section.data()
    found: dict[str, int] = {}
    start = blob.find(b"__CLANG_OFFLOAD_BUNDLE__")
    while start != -1:
        (count,) = struct.unpack_from("<Q", blob, start + 24)
        cursor = start + 32
        for _ in range(count):
            offset, size, id_len = struct.unpack_from("<QQQ", blob, cursor)
            cursor += 24
            target = blob[cursor : cursor + id_len].decode()
            cursor += id_len
            if target.startswith("hip") and size:
                code = blob[start + offset : start + offset + size]
                assert code[:4] == b"\x7fELF" and code[7] == 64, f"{target}: not an AMDGPU HSA ELF"
                found[target.rsplit("-", 1)[-1]] = ABI_VERSION_TO_CODE_OBJECT[code[8]]
        start = blob.find(b"__CLANG_OFFLOAD_BUNDLE__", cursor)
    return found


@pytest.mark.parametrize("version", VERSIONS)
def test_wheel_is_named_and_tagged_for_users(root_builds: dict[str, RootBuild], version: str) -> None:
    wheel = wheel_of(root_builds, version)
    name, ver, py, abi, plat = wheel.name[: -len(".whl")].split("-")
    assert name == "monarch_runtime" and ver.endswith(EXPECTED[version]["label"]), wheel.name
    assert (py, abi) == ("cp39", "abi3")
    m = re.fullmatch(r"manylinux_2_(\d+)_x86_64", plat)
    assert m and int(m.group(1)) <= GLIBC_CEILING[1], f"{plat}: RHEL 9 / Ubuntu 22.04 could not install it"


@pytest.mark.parametrize("version", VERSIONS)
def test_built_with_the_rocm_clang_alone(root_builds: dict[str, RootBuild], version: str) -> None:
    """The roots have no cc, c++, gcc or g++ (test_bare_roots.py): detection chose the ROCm clang for the host
    code and as Rust's linker, and said so."""
    wheel_of(root_builds, version)
    (line,) = [x for x in root_builds[version].log.splitlines() if "detect: platform=rocm" in x]
    llvm = f"/usr/lib/llvm-{22 if version == '7.2' else 21}/bin"
    assert f"C compiler {llvm}/clang (the ROCm clang: no cc on PATH)" in line, line
    assert f"C++ compiler {llvm}/clang++ (the ROCm clang: no c++ on PATH)" in line, line
    assert f"Rust linker {llvm}/clang (the ROCm clang: no cc on PATH)" in line, line


@pytest.mark.parametrize("version", VERSIONS)
def test_no_glibc_or_libstdcxx_symbol_newer_than_rhel9(root_builds: dict[str, RootBuild], version: str) -> None:
    needs = versioned_symbols(extension_bytes(wheel_of(root_builds, version)))
    assert any(n.startswith("GLIBC_") for n in needs), needs  # the check sees the symbols at all
    too_new = []
    for need in needs:
        if m := re.fullmatch(r"GLIBC_(\d+(?:\.\d+)*)", need):
            if tuple(int(x) for x in m.group(1).split(".")) > GLIBC_CEILING:
                too_new.append(need)
        elif m := re.fullmatch(r"GLIBCXX_(\d+(?:\.\d+)*)", need):
            if tuple(int(x) for x in m.group(1).split(".")) > GLIBCXX_CEILING:
                too_new.append(need)
    assert not too_new, f"symbols newer than glibc 2.34 / GLIBCXX_3.4.29: {sorted(too_new)}"


@pytest.mark.parametrize("version", VERSIONS)
def test_bridge_builds_warning_free(root_builds: dict[str, RootBuild], version: str) -> None:
    """HIP 6.4/7.2 make hipError_t [[nodiscard]], want 64-bit warp-sync masks and hide the warp-sync builtins
    behind a macro; hipify's rules for the target must leave nothing to warn about in the bridge."""
    log = root_builds[version].log
    wheel_of(root_builds, version)
    assert "compile: 3 translation units rebuilt" in log, log[-3000:]
    assert not [line for line in log.splitlines() if "compile:" in line and "warning:" in line], log[-5000:]


@pytest.mark.parametrize("version", VERSIONS)
def test_links_the_real_hip_runtime_and_loads_rccl_at_run_time(root_builds: dict[str, RootBuild], version: str) -> None:
    elf = ELFFile(io.BytesIO(extension_bytes(wheel_of(root_builds, version))))
    dynamic = elf.get_section_by_name(".dynamic")
    needed = {t.needed for t in dynamic.iter_tags() if t.entry.d_tag == "DT_NEEDED"}
    assert EXPECTED[version]["hip_runtime"] in needed, needed
    assert not any("rccl" in n for n in needed), needed  # dlopened, see docs/design.md
    assert not [t for t in dynamic.iter_tags() if t.entry.d_tag in ("DT_RPATH", "DT_RUNPATH")]


@pytest.mark.parametrize("version", VERSIONS)
def test_device_code_for_each_arch_with_a_loadable_code_object_version(
    root_builds: dict[str, RootBuild], version: str
) -> None:
    objects = code_objects(extension_bytes(wheel_of(root_builds, version)))
    assert sorted(objects) == EXPECTED[version]["archs"], objects
    assert set(objects.values()) == {EXPECTED[version]["code_object"]}, objects


def test_rocm72_wheel_is_byte_identical_across_trees_build_dirs_and_layouts(root_builds: dict[str, RootBuild]) -> None:
    """The same sources built twice: from two trees in different places, into different build directories,
    once through Debian's layout (ROCM_HOME=/usr) and once through an AMD-style /opt/rocm made of links
    into the same files. Nothing of either path, and no random compilation-unit ID, may reach the wheel."""
    debian, amd = wheel_of(root_builds, "7.2"), wheel_of(root_builds, "7.2-amd")
    assert "detect: platform=rocm toolkit=7.2 root=" in root_builds["7.2-amd"].log
    assert "/opt/rocm" in root_builds["7.2-amd"].log  # the AMD layout really was the one detected
    if debian.read_bytes() != amd.read_bytes():
        with zipfile.ZipFile(debian) as a, zipfile.ZipFile(amd) as b:
            differ = [n for n in a.namelist() if a.read(n) != b.read(n)]
        pytest.fail(f"the two ROCm 7.2 wheels differ in {differ}")


def test_glibc_guard_is_applied_to_the_bridge(root_builds: dict[str, RootBuild]) -> None:
    ninja = (root_builds["7.2"].build_dir / "cmake" / "build.ninja").read_text()
    assert "-nohipwrapperinc" in ninja and "glibc_floor.h" in ninja
    assert len(set(re.findall(r"-cuid=([0-9a-f]+)", ninja))) == 3  # one fixed ID per translation unit


def test_glibc_guard_keeps_c23_redirects_out(tmp_path: Path) -> None:
    """The guard header, used as the backend uses it, keeps strtol from binding to glibc 2.38's
    __isoc23_strtol in the sid root; without it the same file does bind there (so this test can fail)."""
    require_root("7.2")
    source = tmp_path / "parse.hip"
    source.write_text(
        "#include <hip/hip_runtime.h>\n#include <cstdlib>\n"
        'extern "C" long parse(const char* s) { return strtol(s, nullptr, 0); }\n'
    )
    guard = ROOT / "build_backend" / "cmake" / "glibc_floor.h"
    symbols = {}
    for name, extra in (
        ("guarded", ["-nohipwrapperinc", "-include", str(guard), "-include", "__clang_hip_runtime_wrapper.h"]),
        ("plain", []),
    ):
        obj = tmp_path / f"{name}.o"
        argv = ["clang++-22", "-x", "hip", "--offload-arch=gfx942", "-std=c++17", "-fPIC", *extra]
        run_in_root("7.2", [*argv, "-c", str(source), "-o", str(obj)], binds=[tmp_path, guard], check=True)
        symbols[name] = subprocess.run(["nm", "-u", str(obj)], capture_output=True, text=True, check=True).stdout
    assert "__isoc23_strtol" in symbols["plain"], symbols["plain"]
    assert "__isoc23_strtol" not in symbols["guarded"] and "strtol" in symbols["guarded"], symbols["guarded"]


# ---------------------------------------------------------------------------------------- inside the roots
class RootVenvs:
    """A fresh venv in a root with its wheel installed (the root's own python, 3.14), made on first use."""

    def __init__(self, builds: dict[str, RootBuild], factory: pytest.TempPathFactory) -> None:
        self.builds, self.factory, self.made = builds, factory, {}  # type: dict[str, Path]

    def __getitem__(self, version: str) -> Path:
        if version not in self.made:
            wheel = wheel_of(self.builds, version)
            base = self.factory.getbasetemp()
            venv = self.factory.mktemp(f"root-venv-{version}")
            run_in_root(version, ["/usr/bin/python3", "-m", "venv", "--clear", str(venv)], binds=[base], check=True)
            pip = [str(venv / "bin" / "pip"), "install", "--quiet", "--no-deps", "--no-index", str(wheel)]
            run_in_root(version, pip, binds=[base], check=True)
            self.made[version] = venv
        return self.made[version]


@pytest.fixture(scope="module")
def root_venvs(root_builds: dict[str, RootBuild], tmp_path_factory: pytest.TempPathFactory) -> RootVenvs:
    return RootVenvs(root_builds, tmp_path_factory)


def probe(version: str, venv: Path, *args: str, binds: tuple[Path, ...] = ()) -> dict[str, Any]:
    script = ROOT / "tests" / "root_probe.py"
    proc = run_in_root(version, [str(venv / "bin" / "python"), str(script), *args], binds=[venv, script, *binds])
    assert proc.returncode == 0, f"the probe crashed in the ROCm {version} root:\n{proc.stdout}\n{proc.stderr}"
    # RCCL prints lines of its own to stdout, before and after (at exit): take ours.
    (line,) = [x for x in proc.stdout.splitlines() if x.startswith("PROBE-RESULT ")]
    return dict(json.loads(line[len("PROBE-RESULT ") :]))


@pytest.mark.parametrize("version", VERSIONS)
def test_import_and_use_inside_the_root(root_venvs: RootVenvs, version: str) -> None:
    seen = probe(version, root_venvs[version])
    info, want = seen["build_info"], EXPECTED[version]
    assert info["platform"] == "rocm" and info["native_platform"] == "rocm"
    assert info["toolkit_version"] == version and info["version"].endswith(want["label"])
    assert info["archs"] == want["archs"]
    assert info["collective"] == "rccl" and info["collective_library"] == "librccl.so.1"
    assert info["hip_runtime"] == want["hip_runtime"] and info["code_object_version"] == want["code_object"]
    if want["rccl"]:  # RCCL 7.2.4 is NCCL API 2.27.7
        assert info["collective_loaded"] is True, info
        assert info["collective_version"] == 22707 == info["collective_header_version"], info
    else:
        assert info["collective_loaded"] is False and "librccl.so.1" in info["collective_error"], info
    for call in ("device_count", "devices", "device_count_again"):
        assert seen[call].get("error") == "NoDeviceError", (call, seen[call])
        assert "hipErrorNoDevice" in seen[call]["message"], seen[call]
    assert seen["checksum_reference"] == int(seen["checksum_reference"])
    # Collective calls fail as collective errors that name what RCCL answered (or why it is missing).
    for call in ("unique_id", "communicator"):
        outcome = seen[call]
        assert "CollectiveError" in outcome.get("bases", []), (call, outcome)
        if want["rccl"]:
            assert outcome["result_name"] and outcome["result_name"].startswith("nccl"), outcome
            assert outcome["result_name"] in outcome["message"], outcome
        else:
            assert "librccl.so.1" in outcome["message"], outcome
    assert len(seen["mapped_after_import"]) == 1, seen["mapped_after_import"]


def test_coexists_with_a_bundled_hip_runtime(root_venvs: RootVenvs, tmp_path: Path) -> None:
    """As in a process where a ROCm PyTorch wheel loaded its own copy of libamdhip64 first: importing
    monarch_runtime maps no second HIP runtime (Monarch's issue #4145) and every call behaves the same."""
    bundled = tmp_path / "torch-like" / "lib"
    seen = probe("7.2", root_venvs["7.2"], "--bundled-hip", str(bundled), binds=(tmp_path,))
    assert seen["mapped_before_import"] == [seen["bundled"]], seen
    assert seen["mapped_after_import"] == [seen["bundled"]], seen["mapped_after_import"]
    plain = probe("7.2", root_venvs["7.2"])
    for call in ("device_count", "unique_id", "communicator"):
        assert seen[call] == plain[call], call
    assert {k: v for k, v in seen["build_info"].items() if k != "hip_runtime_loaded"} == {
        k: v for k, v in plain["build_info"].items() if k != "hip_runtime_loaded"
    }


def test_torch_imported_after_monarch_runtime_shares_its_hip_runtime(root_venvs: RootVenvs, tmp_path: Path) -> None:
    """The other order: a ROCm torch wheel is installed but imported later. monarch_runtime binds to the
    copy torch will load (found, not imported), so torch's libraries later reuse that mapping."""
    seen = probe("7.2", root_venvs["7.2"], "--fake-torch", str(tmp_path / "site"), binds=(tmp_path,))
    assert seen["torch_imported"] is False
    assert seen["mapped_after_import"] == [seen["torch_copy"]], seen
    assert seen["mapped_after_torch"] == [seen["torch_copy"]], seen
    assert seen["build_info"]["hip_runtime_loaded"] == [seen["torch_copy"]]
    assert seen["device_count"]["error"] == "NoDeviceError"


def test_frontends_build_inside_the_root(
    root_builds: dict[str, RootBuild], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """What a user in a ROCm 7.2 environment types: `ROCM_HOME=/usr pip install .` (with pip's build isolation:
    the tools come from PyPI), then pip wheel, python -m build and uv build of the same tree, which reuse the
    build directory. Each gives a +rocm7.2 wheel."""
    require_root("7.2")
    base = tmp_path_factory.getbasetemp()
    tree = tmp_path_factory.mktemp("frontends") / "src"
    shutil.copytree(root_builds["7.2"].source, tree, symlinks=True)
    venv = tree.parent / "venv"
    build_dir = tree.parent / "build"
    env = {"ROCM_HOME": "/usr"}
    run_in_root("7.2", ["/usr/bin/python3", "-m", "venv", str(venv)], binds=[base], check=True)
    run_in_root(
        "7.2",
        [str(venv / "bin" / "pip"), "install", "--quiet", ".", "-C", f"build-dir={build_dir}"],
        binds=[base],
        env=env,
        cwd=tree,
        check=True,
    )
    shown = run_in_root("7.2", [str(venv / "bin" / "pip"), "show", "monarch-runtime"], binds=[base], check=True)
    assert "+rocm7.2" in shown.stdout
    outs = {name: tree.parent / name for name in ("pip", "build", "uv")}
    config = f"build-dir={build_dir}"
    commands = {
        "pip": ["python", "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(outs["pip"]), "."],
        "build": ["python", "-m", "build", "--wheel", "--no-isolation", "-o", str(outs["build"]), "."],
        "uv": ["uv", "build", "--wheel", "--no-build-isolation", "-o", str(outs["uv"]), "."],
    }
    for name, argv in commands.items():
        flag = (
            ["--config-settings", config] if name == "pip" else ["-C" + config] if name == "build" else ["-C", config]
        )
        run_in_root("7.2", [*argv, *flag], binds=[base], env=env, cwd=tree, check=True)
        wheels = sorted(outs[name].glob("*.whl"))
        assert len(wheels) == 1 and "+rocm7.2-cp39-abi3-manylinux_2_" in wheels[0].name, (name, wheels)


def test_root_python_is_not_the_test_python() -> None:
    """The in-root checks really run another interpreter (the root's), not this one."""
    require_root("7.2")
    proc = run_in_root("7.2", ["/usr/bin/python3", "-c", "import sys; print(sys.version_info[:2])"], check=True)
    assert proc.stdout.strip() != str(tuple(sys.version_info[:2]))
