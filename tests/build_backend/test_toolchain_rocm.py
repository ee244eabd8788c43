"""ROCm detection (buildcore/toolchain/rocm.py) on installation trees made here: AMD's layout and
Debian's, versions from each file that can carry them, the defaults each HIP version gets, and the errors
when a piece is missing. The compilers are stand-in scripts that accept every target (or reject the ones
listed in REJECT), so these tests need no ROCm; the real compilers are exercised by test_rocm_roots.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from buildcore.errors import BuildError
from buildcore.settings import Settings
from buildcore.toolchain import detect, rocm

FAKE_CLANG = """#!/bin/sh
# stand-in for a HIP clang++: rejects the --offload-arch values named in $REJECT
for arg in "$@"; do
  case "$arg" in --offload-arch=*) for r in $REJECT; do [ "${arg#--offload-arch=}" = "$r" ] && exit 1; done ;; esac
done
exit 0
"""
ALL_ARCHS = ("90a", "940", "942", "950")


def fake_clang(path: Path) -> Path:
    """A stand-in clang++ and, beside it, its C driver (clang), as every clang installation has."""
    path.parent.mkdir(parents=True, exist_ok=True)
    for each in (path, path.with_name(path.name.replace("clang++", "clang"))):
        each.write_text(FAKE_CLANG)
        each.chmod(0o755)
    return path


def bitcode(directory: Path, archs: tuple[str, ...] = ALL_ARCHS) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "ocml.bc").write_bytes(b"BC")
    for arch in archs:
        (directory / f"oclc_isa_version_{arch}.bc").write_bytes(b"BC")
    return directory


def hip_header(root: Path, major: int, minor: int) -> None:
    (root / "include" / "hip").mkdir(parents=True, exist_ok=True)
    (root / "include" / "hip" / "hip_version.h").write_text(
        f"#define HIP_VERSION_MAJOR {major}\n#define HIP_VERSION_MINOR {minor}\n#define HIP_VERSION_PATCH 1\n"
    )


def rccl_header(root: Path, code: int = 22707) -> None:
    (root / "include" / "rccl").mkdir(parents=True, exist_ok=True)
    (root / "include" / "rccl" / "rccl.h").write_text(f"#define NCCL_VERSION_CODE {code}\n")


def hip_lib(directory: Path, real: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / real).write_bytes(b"\x7fELF")
    (directory / "libamdhip64.so").symlink_to(real)


def amd_tree(base: Path, version: tuple[int, int] = (7, 2), *, resource_bitcode: bool = True) -> Path:
    """/opt/rocm-X.Y.0 as AMD's packages lay it out."""
    root = base / "opt" / f"rocm-{version[0]}.{version[1]}.0"
    hip_header(root, *version)
    (root / ".info").mkdir(parents=True)
    (root / ".info" / "version").write_text(f"{version[0]}.{version[1]}.0-43\n")
    fake_clang(root / "lib" / "llvm" / "bin" / "clang++")
    if resource_bitcode:
        bitcode(root / "lib" / "llvm" / "lib" / "clang" / "20" / "lib" / "amdgcn" / "bitcode")
    else:
        bitcode(root / "amdgcn" / "bitcode")
    hip_lib(root / "lib", f"libamdhip64.so.{version[0]}.{version[1]}.60000")
    rccl_header(root)
    return root


def debian_tree(base: Path, version: tuple[int, int] = (6, 4), llvm: int = 21) -> Path:
    """/usr as Debian's hipcc, libamdhip64-dev and rocm-device-libs-N lay it out (sid/experimental)."""
    root = base / "usr"
    hip_header(root, *version)
    fake_clang(root / "lib" / f"llvm-{llvm}" / "bin" / "clang++")
    bitcode(root / "lib" / f"llvm-{llvm}" / "lib" / "clang" / str(llvm) / "amdgcn" / "bitcode")
    hip_lib(root / "lib" / "x86_64-linux-gnu", f"libamdhip64.so.{version[0]}.{version[1]}.43484")
    rccl_header(root, 21304)
    return root


def env_for(root: Path, **extra: str) -> dict[str, str]:
    return {"ROCM_HOME": str(root), "PATH": "/nonexistent", "REJECT": "", **extra}


def run_detect(env: dict[str, str], archs: tuple[str, ...] = ()) -> rocm.Toolchain:
    old = dict(os.environ)
    os.environ.update({"REJECT": env.get("REJECT", "")})  # the stand-in compiler reads it from its environment
    try:
        return detect(Settings(platform="rocm", archs=archs, sources={"archs": "-C archs"}), env)
    finally:
        os.environ.clear()
        os.environ.update(old)


def test_amd_layout_with_bitcode_in_the_clang_resource_directory(tmp_path: Path) -> None:
    root = amd_tree(tmp_path)
    tc = run_detect(env_for(root))
    assert tc.version == (7, 2) and tc.layout == "amd"
    assert tc.compiler == root / "lib" / "llvm" / "bin" / "clang++"
    assert tc.device_lib_dir == root / "lib" / "llvm" / "lib" / "clang" / "20" / "lib" / "amdgcn" / "bitcode"
    assert tc.archs == ("gfx90a", "gfx942", "gfx950") and tc.code_object_version == 6
    assert tc.runtime_soname == "libamdhip64.so.7" and tc.lib_dir == root / "lib"
    assert tc.collective_header_version == 22707 and tc.local_label == "rocm7.2"


def test_amd_layout_with_bitcode_under_amdgcn_and_version_from_info(tmp_path: Path) -> None:
    root = amd_tree(tmp_path, (6, 2), resource_bitcode=False)
    (root / "include" / "hip" / "hip_version.h").unlink()  # only .info/version says which ROCm it is
    tc = run_detect(env_for(root))
    assert tc.version == (6, 2) and tc.device_lib_dir == root / "amdgcn" / "bitcode"
    assert tc.archs == ("gfx90a", "gfx942", "gfx950") and tc.code_object_version == 5  # 6.x: gfx950 optional


def test_rocm_path_and_the_opt_rocm_link(tmp_path: Path) -> None:
    real = amd_tree(tmp_path)
    (tmp_path / "opt" / "rocm").symlink_to(real.name)
    tc = run_detect({"ROCM_PATH": str(tmp_path / "opt" / "rocm"), "PATH": "/nonexistent"})
    assert tc.root == tmp_path / "opt" / "rocm" and tc.version == (7, 2)


def test_rocm_home_wins_over_rocm_path(tmp_path: Path) -> None:
    home, path = amd_tree(tmp_path / "a", (7, 2)), amd_tree(tmp_path / "b", (6, 4))
    tc = run_detect({"ROCM_HOME": str(home), "ROCM_PATH": str(path), "PATH": "/nonexistent"})
    assert tc.root == home


def test_debian_layout_takes_the_llvm_whose_resource_dir_has_bitcode(tmp_path: Path) -> None:
    root = debian_tree(tmp_path, (7, 2), llvm=22)
    fake_clang(root / "lib" / "llvm-23" / "bin" / "clang++")  # a newer clang without device libraries
    tc = run_detect(env_for(root))
    assert tc.compiler == root / "lib" / "llvm-22" / "bin" / "clang++" and tc.layout == "debian"
    assert tc.lib_dir == root / "lib" / "x86_64-linux-gnu" and tc.runtime_soname == "libamdhip64.so.7"


def test_version_from_debian_share_hip_version(tmp_path: Path) -> None:
    root = debian_tree(tmp_path)
    (root / "include" / "hip" / "hip_version.h").unlink()
    (root / "share" / "hip").mkdir(parents=True)
    (root / "share" / "hip" / "version").write_text("HIP_VERSION_MAJOR=6\nHIP_VERSION_MINOR=4\nHIP_VERSION_PATCH=3\n")
    assert rocm.hip_version(root) == (6, 4)


def test_hip64_adds_gfx950_only_when_the_compiler_accepts_it(tmp_path: Path) -> None:
    root = debian_tree(tmp_path, (6, 4))
    assert run_detect(env_for(root)).archs == ("gfx90a", "gfx942", "gfx950")
    assert run_detect(env_for(root, REJECT="gfx950")).archs == ("gfx90a", "gfx942")


def test_hip52_defaults_stay(tmp_path: Path) -> None:
    root = debian_tree(tmp_path, (5, 2), llvm=15)
    tc = run_detect(env_for(root, REJECT="gfx942"))
    assert tc.archs == ("gfx90a", "gfx940") and tc.code_object_version == 4


def test_targets_cover_every_version_in_order() -> None:
    assert [t.since for t in rocm.TARGETS] == sorted((t.since for t in rocm.TARGETS), reverse=True)
    assert rocm.target_for((7, 2)).code_object == 6 and rocm.target_for((7, 0)).oldest_runtime == "7.0"
    assert rocm.target_for((6, 4)).code_object == 5 and rocm.target_for((6, 0)).oldest_runtime == "6.0"
    assert rocm.target_for((5, 7)).code_object == 4


@pytest.mark.fault
def test_a_default_arch_without_device_bitcode_is_an_error_naming_it(tmp_path: Path) -> None:
    root = debian_tree(tmp_path, (7, 2), llvm=22)
    (root / "lib" / "llvm-22" / "lib" / "clang" / "22" / "amdgcn" / "bitcode" / "oclc_isa_version_950.bc").unlink()
    with pytest.raises(BuildError) as err:
        run_detect(env_for(root))
    assert "gfx950" in str(err.value) and "oclc_isa_version" in str(err.value) and "-C archs" in str(err.value)


@pytest.mark.fault
def test_a_requested_arch_the_compiler_rejects(tmp_path: Path) -> None:
    root = amd_tree(tmp_path)
    with pytest.raises(BuildError) as err:
        run_detect(env_for(root, REJECT="gfx1200"), archs=("gfx942", "gfx1200"))
    text = str(err.value)
    assert "gfx1200" in text and "rejects it" in text and "from -C archs" in text and "gfx942" in text


@pytest.mark.fault
def test_no_compiler_names_every_place_probed(tmp_path: Path) -> None:
    root = amd_tree(tmp_path)
    (root / "lib" / "llvm" / "bin" / "clang++").unlink()
    with pytest.raises(BuildError) as err:
        run_detect(env_for(root))
    text = str(err.value)
    assert "no HIP-capable compiler" in text
    for place in ("lib/llvm/bin/clang++", "llvm/bin/clang++", "amdgcn/bitcode", "HIP_CLANG_PATH"):
        assert place in text, place


@pytest.mark.fault
def test_compiler_without_bitcode_is_passed_over_and_said(tmp_path: Path) -> None:
    root = debian_tree(tmp_path, (7, 2), llvm=22)
    for item in sorted((root / "lib" / "llvm-22" / "lib" / "clang").rglob("*"), reverse=True):
        item.unlink() if item.is_file() else item.rmdir()
    with pytest.raises(BuildError) as err:
        run_detect(env_for(root))
    assert "no device bitcode" in str(err.value) and "llvm-22/bin/clang++" in str(err.value)


def test_hip_clang_path_is_taken_first(tmp_path: Path) -> None:
    root = debian_tree(tmp_path, (7, 2), llvm=22)
    chosen = fake_clang(tmp_path / "custom" / "bin" / "clang++")
    bitcode(tmp_path / "custom" / "lib" / "clang" / "22" / "amdgcn" / "bitcode")
    tc = run_detect(env_for(root, HIP_CLANG_PATH=str(chosen.parent)))
    assert tc.compiler == chosen and tc.layout == "HIP_CLANG_PATH"


@pytest.mark.fault
def test_missing_hip_runtime_library_names_the_directories(tmp_path: Path) -> None:
    root = amd_tree(tmp_path)
    (root / "lib" / "libamdhip64.so").unlink()
    with pytest.raises(BuildError) as err:
        run_detect(env_for(root))
    assert "libamdhip64.so" in str(err.value) and str(root / "lib64") in str(err.value)


@pytest.mark.fault
def test_no_hip_version_anywhere_names_the_files(tmp_path: Path) -> None:
    root = amd_tree(tmp_path)
    (root / "include" / "hip" / "hip_version.h").unlink()
    (root / ".info" / "version").unlink()
    with pytest.raises(BuildError) as err:
        run_detect(env_for(root))
    for name in ("hip_version.h", ".info/version", "share/hip/version"):
        assert name in str(err.value)


def test_bitcode_has_arch_reads_processor_names(tmp_path: Path) -> None:
    directory = bitcode(tmp_path / "bc", ("942",))
    assert rocm.bitcode_has_arch(directory, "gfx942") and rocm.bitcode_has_arch(directory, "gfx942:xnack-")
    assert not rocm.bitcode_has_arch(directory, "gfx950") and not rocm.bitcode_has_arch(directory, "sm_90")


def test_host_glibc_reads_features_h(tmp_path: Path) -> None:
    (tmp_path / "features.h").write_text("#define __GLIBC__ 2\n#define\t__GLIBC_MINOR__ 43\n")
    assert rocm.host_glibc([tmp_path]) == (2, 43)
    assert rocm.host_glibc([tmp_path / "missing"]) == (0, 0)


# ------------------------------------------------------------------------------------- archs=native
def arch_tool(path: Path, output: str, status: int = 0) -> Path:
    """A stand-in amdgpu-arch / offload-arch: prints ``output`` (one target per GPU) and exits ``status``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\nprintf '{output}'\necho 'a note on stderr' >&2\nexit {status}\n")
    path.chmod(0o755)
    return path


NO_BOOTSTRAP = {"ROCM_BOOTSTRAP_DISABLE_DETECTION": "1"}  # so an installed rocm-bootstrap does not answer first


def test_native_takes_the_gpus_amdgpu_arch_lists(tmp_path: Path) -> None:
    root = debian_tree(tmp_path, (7, 2), llvm=22)
    arch_tool(root / "lib" / "llvm-22" / "bin" / "amdgpu-arch", r"gfx942\ngfx942\ngfx90a\n")
    tc = run_detect(env_for(root, **NO_BOOTSTRAP), archs=("native",))
    assert tc.archs == ("gfx942", "gfx90a")  # one per GPU model, in the tool's order


def test_native_beside_named_archs_and_through_offload_arch(tmp_path: Path) -> None:
    root = amd_tree(tmp_path)
    arch_tool(root / "lib" / "llvm" / "bin" / "amdgpu-arch", "")  # finds nothing
    arch_tool(root / "lib" / "llvm" / "bin" / "offload-arch", r"gfx950\n")
    tc = run_detect(env_for(root, **NO_BOOTSTRAP), archs=("gfx90a", "native"))
    assert tc.archs == ("gfx90a", "gfx950")


@pytest.mark.fault
def test_native_without_a_gpu_names_every_probe(tmp_path: Path) -> None:
    root = debian_tree(tmp_path, (7, 2), llvm=22)
    arch_tool(root / "lib" / "llvm-22" / "bin" / "amdgpu-arch", "")
    arch_tool(root / "lib" / "llvm-22" / "bin" / "offload-arch", "", status=1)
    with pytest.raises(BuildError) as err:
        run_detect(env_for(root, **NO_BOOTSTRAP), archs=("native",))
    text = str(err.value)
    assert "archs=native (from -C archs)" in text and "none was found" in text, text
    assert "amdgpu-arch (found no GPU)" in text and "offload-arch (exited 1: a note on stderr)" in text, text
    assert "-C archs=gfx942" in text and "ROCM_BOOTSTRAP_FORCE_GFX_ARCH" in text, text


@pytest.mark.fault
def test_native_where_the_rocm_has_no_tool_to_ask(tmp_path: Path) -> None:
    root = amd_tree(tmp_path)
    with pytest.raises(BuildError) as err:
        run_detect(env_for(root, **NO_BOOTSTRAP), archs=("native",))
    assert "amdgpu-arch (not in " in str(err.value) and "offload-arch (not in " in str(err.value)


@pytest.mark.fault
def test_native_finding_an_arch_the_compiler_rejects_says_where_it_came_from(tmp_path: Path) -> None:
    root = debian_tree(tmp_path, (7, 2), llvm=22)
    arch_tool(root / "lib" / "llvm-22" / "bin" / "amdgpu-arch", r"gfx1200\n")
    with pytest.raises(BuildError) as err:
        run_detect(env_for(root, REJECT="gfx1200", **NO_BOOTSTRAP), archs=("native",))
    assert "gfx1200" in str(err.value) and "native: gfx1200 found by" in str(err.value), str(err.value)


def test_native_asks_rocm_bootstrap_first_which_honours_its_forced_arch(tmp_path: Path) -> None:
    """rocm-bootstrap (ci/requirements-test.txt), asked in a process of its own (detect_gfx_targets),
    answers before the ROCm's amdgpu-arch; on a machine without a GPU ROCM_BOOTSTRAP_FORCE_GFX_ARCH stands
    in for one."""
    root = debian_tree(tmp_path, (7, 2), llvm=22)
    arch_tool(root / "lib" / "llvm-22" / "bin" / "amdgpu-arch", r"gfx90a\n")
    forced = run_detect({**env_for(root), "ROCM_BOOTSTRAP_FORCE_GFX_ARCH": "gfx950,gfx942,gfx950"}, archs=("native",))
    assert forced.archs == ("gfx950", "gfx942")
    disabled = run_detect(env_for(root, **NO_BOOTSTRAP), archs=("native",))
    assert disabled.archs == ("gfx90a",)  # rocm-bootstrap found nothing: amdgpu-arch answered


# --------------------------------------------------------------------------- where users point ROCM_HOME
@pytest.mark.fault
def test_rocm_home_at_a_file(tmp_path: Path) -> None:
    root = debian_tree(tmp_path, (7, 2), llvm=22)
    (root / "bin").mkdir()
    (root / "bin" / "hipcc").write_text("#!/bin/sh\n")
    with pytest.raises(BuildError) as err:
        run_detect(env_for(root / "bin" / "hipcc"))
    text = str(err.value)
    assert f"ROCM_HOME={root / 'bin' / 'hipcc'} is a file, not a directory" in text, text
    assert f"that is {root}" in text and "include/hip" in text, text


@pytest.mark.fault
def test_rocm_home_at_a_cuda_toolkit(tmp_path: Path) -> None:
    cuda = tmp_path / "cuda"
    fake_clang(cuda / "bin" / "nvcc")
    with pytest.raises(BuildError) as err:
        run_detect({"ROCM_PATH": str(cuda), "PATH": "/nonexistent"})
    text = str(err.value)
    assert f"ROCM_PATH={cuda} is a CUDA toolkit" in text and "bin/nvcc" in text, text
    assert f"CUDA_HOME={cuda}" in text and "unset ROCM_PATH" in text, text


@pytest.mark.fault
def test_every_requested_arch_rejected_points_at_another_rocm(tmp_path: Path) -> None:
    root = debian_tree(tmp_path, (5, 2), llvm=15)
    with pytest.raises(BuildError) as err:
        run_detect(env_for(root, REJECT="gfx942 gfx950"), archs=("gfx942", "gfx950"))
    text = str(err.value)
    assert "none of the requested ROCm architectures gfx942" in text and "gfx950" in text, text
    assert "point ROCM_HOME (or ROCM_PATH) at a ROCm that builds them" in text and "gfx90a, gfx940" in text, text


@pytest.mark.fault
def test_an_arch_the_device_libraries_lack(tmp_path: Path) -> None:
    root = debian_tree(tmp_path, (7, 2), llvm=22)  # the compiler accepts gfx1100, the bitcode has none for it
    with pytest.raises(BuildError) as err:
        run_detect(env_for(root), archs=("gfx942", "gfx1100"))
    text = str(err.value)
    assert "ROCm architecture gfx1100" in text and "no oclc_isa_version bitcode" in text, text
    assert "point ROCM_HOME" not in text  # gfx942 is buildable: this ROCm is the right one


# --------------------------------------------------------------------------------- the host compilers
def test_without_cc_on_path_the_rocm_clang_builds_host_code_and_links(tmp_path: Path) -> None:
    root = debian_tree(tmp_path, (7, 2), llvm=22)
    tc = run_detect(env_for(root))  # PATH=/nonexistent: no cc, c++
    assert tc.host is not None
    bin_dir = root / "lib" / "llvm-22" / "bin"
    assert tc.host.c is not None and tc.host.c.path == bin_dir / "clang" and tc.host.c.passed
    assert tc.host.cxx is not None and tc.host.cxx.path == bin_dir / "clang++"
    assert tc.host.linker.path == bin_dir / "clang" and tc.host.linker.passed
    assert tc.host.c.why == "the ROCm clang: no cc on PATH" == tc.host.linker.why
    assert tc.host.cxx.why == "the ROCm clang: no c++ on PATH"


def _library_headers(include: Path, *headers: str) -> None:
    for header in headers:
        (include / header).parent.mkdir(parents=True, exist_ok=True)
        (include / header).write_text("#pragma once\n")


def test_rocm_libraries_found_in_both_layouts(tmp_path: Path) -> None:
    """The libraries' headers (hipCUB, hipBLAS, ...) are found where each layout installs them, and only those."""
    amd = amd_tree(tmp_path / "amd")
    _library_headers(
        amd / "include", "hipcub/hipcub.hpp", "rocprim/rocprim.hpp", "thrust/system/hip/execution_policy.h"
    )
    _library_headers(amd / "hipblas" / "include", "hipblas/hipblas.h")  # AMD's per-library layout (ROCm < 5.2)
    tc = run_detect(env_for(amd))
    assert tc.libraries == (
        ("hipCUB", amd / "include"),
        ("rocPRIM", amd / "include"),
        ("rocThrust", amd / "include"),
        ("hipBLAS", amd / "hipblas" / "include"),
    )
    debian = debian_tree(tmp_path / "debian")
    assert run_detect(env_for(debian)).libraries == ()  # none installed
    _library_headers(debian / "include", "hipsparse/hipsparse.h", "hipfft/hipfft.h", "thrust/version.h")
    # (a thrust/ without rocThrust's HIP system is CUDA's thrust, not rocThrust)
    assert run_detect(env_for(debian)).libraries == (("hipSPARSE", debian / "include"), ("hipFFT", debian / "include"))
