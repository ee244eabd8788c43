"""The three real wheels: each built from this tree, installed in a fresh venv and imported."""

from __future__ import annotations

import json
import os
import re
import subprocess
import zipfile
from pathlib import Path

import pytest
from _support import ROOT, BuildOutcome, InstalledWheel, Toolchains, tree_digest
from elftools.elf.elffile import ELFFile
from gen_collective_stub import build_stub

pytestmark = pytest.mark.slow

EXPECTED = {
    "cpu": {"label": "+cpu", "collective": None, "archs": []},
    "cuda": {"label": "+cu13", "collective": "nccl", "archs": ["sm_80", "sm_90"]},
    "rocm": {"label": "+rocm5.2", "collective": "rccl", "archs": ["gfx90a", "gfx940"]},
}

PROBE = """
import json, os, monarch_runtime as m
out = {"info": m.build_info()}
try:
    out["device_count"] = m.device_count()
except m.MonarchError as e:
    out["device_error"] = [type(e).__name__, str(e)]
data = os.urandom(4099)
out["checksum_equal"] = None
try:
    out["checksum_equal"] = m.checksum(data) == m.checksum_reference(data)
except m.NoDeviceError as e:
    out["checksum_error"] = str(e)
print(json.dumps(out))
"""


def extract_extension(wheel: Path, directory: Path) -> Path:
    """The wheel's extension module, written to ``directory``."""
    so = directory / "_native.so"
    with zipfile.ZipFile(wheel) as zf:
        so.write_bytes(zf.read("monarch_runtime/_native.abi3.so"))
    return so


def probe(inst: InstalledWheel, env: dict[str, str] | None = None) -> dict[str, object]:
    proc = inst.run(PROBE, env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize("flavour", ["cpu", "cuda", "rocm"])
def test_wheel_name_version_and_build_info(flavour: str, built_wheels: dict[str, Path]) -> None:
    wheel = built_wheels[flavour]
    exp = EXPECTED[flavour]
    assert wheel.name.startswith(f"monarch_runtime-0.1.0{exp['label']}-cp39-abi3-")
    with zipfile.ZipFile(wheel) as zf:
        info = json.loads(zf.read("monarch_runtime/build_info.json"))
        metadata = zf.read(f"monarch_runtime-0.1.0{exp['label']}.dist-info/METADATA").decode()
        names = zf.namelist()
    assert info["platform"] == flavour
    assert info["archs"] == exp["archs"]
    assert info["collective"] == exp["collective"]
    assert "monarch_runtime/_native.abi3.so" in names
    requires = [line for line in metadata.splitlines() if line.startswith("Requires-Dist:")]
    # Unconditional requirements: only NCCL's wheel, for the CUDA build (the [torchft] extra's are marked).
    assert [r for r in requires if "extra ==" not in r] == (
        ["Requires-Dist: nvidia-nccl-cu13"] if flavour == "cuda" else []
    )


@pytest.mark.parametrize("flavour", ["cpu", "cuda", "rocm"])
def test_runpath_is_origin_relative(flavour: str, built_wheels: dict[str, Path], tmp_path: Path) -> None:
    so = extract_extension(built_wheels[flavour], tmp_path)
    with so.open("rb") as fh:
        dynamic = ELFFile(fh).get_section_by_name(".dynamic")
        paths = [
            t.runpath if t.entry.d_tag == "DT_RUNPATH" else t.rpath
            for t in dynamic.iter_tags()
            if t.entry.d_tag in ("DT_RUNPATH", "DT_RPATH")
        ]
        needed = [t.needed for t in dynamic.iter_tags() if t.entry.d_tag == "DT_NEEDED"]
    for entry in ":".join(paths).split(":"):
        assert not entry or entry.startswith("$ORIGIN"), paths
    if flavour == "cuda":
        assert paths == ["$ORIGIN/../nvidia/nccl/lib"]
        assert not any("cudart" in n or "nccl" in n for n in needed), needed  # static cudart, dlopened NCCL
    if flavour == "rocm":
        assert "libamdhip64.so.5" in needed
        assert not any("rccl" in n for n in needed), needed  # RCCL is dlopened, never linked


def test_cpu_wheel_runs_everything_on_the_host(installed: dict[str, InstalledWheel]) -> None:
    out = probe(installed["cpu"])
    assert out["device_count"] == 0
    assert out["checksum_equal"] is True
    info = out["info"]
    assert isinstance(info, dict)
    assert info["native_platform"] == "cpu" and info["collective_loaded"] is False
    proc = installed["cpu"].run(
        "import monarch_runtime as m\ntry:\n m.all_reduce_single_rank([1.0])\nexcept m.CollectiveError as e: print(e)"
    )
    assert "CPU build has no collective library" in proc.stdout


def test_cuda_wheel_without_gpu(installed: dict[str, InstalledWheel]) -> None:
    out = probe(installed["cuda"])
    info = out["info"]
    assert isinstance(info, dict)
    # The real libnccl.so.2 from nvidia-nccl-cu13 loads through the $ORIGIN RUNPATH; every symbol the
    # bridge resolves exists in it (RTLD_NOW + dlsym of each), and ncclGetVersion answers without a GPU.
    assert info["collective_loaded"] is True, info
    assert isinstance(info["collective_version"], int) and info["collective_version"] >= 22000
    assert info["toolkit_version"].startswith("13.")
    # No GPU here: cudaGetDeviceCount says no driver (35) or no device (100); either way a named error.
    name, message = out["device_error"]  # type: ignore[misc]
    assert name == "NoDeviceError"
    assert "cudaErrorInsufficientDriver" in message or "cudaErrorNoDevice" in message


def test_rocm_wheel_without_gpu(installed: dict[str, InstalledWheel]) -> None:
    out = probe(installed["rocm"])
    info = out["info"]
    assert isinstance(info, dict)
    assert info["toolkit_version"] == "5.2"
    assert info["collective_loaded"] is False
    assert "librccl.so.1" in info["collective_error"]  # no RCCL library on Debian 12: named, not fatal
    name, message = out["device_error"]  # type: ignore[misc]
    assert name == "NoDeviceError" and "NoDevice" in message


def test_cuda_extension_has_cubins_for_each_arch(
    built_wheels: dict[str, Path], toolchains: Toolchains, tmp_path: Path
) -> None:
    so = extract_extension(built_wheels["cuda"], tmp_path)
    listing = subprocess.run(
        [str(toolchains.cuda_home / "bin" / "cuobjdump"), "--list-elf", str(so)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    archs = {line.rsplit(".", 2)[-2] for line in listing.splitlines() if line.endswith(".cubin")}
    assert archs == {"sm_80", "sm_90"}, listing


def test_rocm_extension_has_code_objects_for_each_arch(built_wheels: dict[str, Path], tmp_path: Path) -> None:
    so = extract_extension(built_wheels["rocm"], tmp_path)
    with so.open("rb") as fh:
        section = ELFFile(fh).get_section_by_name(".hip_fatbin")
        assert section is not None, "no .hip_fatbin section: no device code linked"
        bundle = tmp_path / "bundle.hipfb"
        bundle.write_bytes(section.data())
    # A static library may carry one bundle per translation unit, each aligned in the section;
    # the bundler lists the first; every unit is compiled for the same archs.
    listing = subprocess.run(
        ["clang-offload-bundler-15", "--list", "--type=o", f"--input={bundle}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    targets = {line.rsplit("-", 1)[-1] for line in listing.split() if line.startswith("hipv4-")}
    assert targets == {"gfx90a", "gfx940"}, listing


def test_builds_never_write_csrc(
    all_builds: dict[tuple[str, str], object], hostile_paths: tuple[Path, Toolchains]
) -> None:
    """After all six builds (ROCm hipifies csrc/), the built tree's csrc/ is still identical to the checkout's."""
    tree, _ = hostile_paths
    assert tree_digest(tree / "csrc") == tree_digest(ROOT / "csrc")


def test_builds_leave_nothing_in_the_temp_directory(all_builds: dict[tuple[str, str], BuildOutcome]) -> None:
    """Each of the six builds ran (pip included) with TMPDIR, TMP and TEMP set to a fresh empty directory of
    its own, and left it empty: Debian's clang-15 leaves two empty directories there per arch for every HIP
    compile (CMake's compiler identification and each csrc/ unit), so the backend points its tools at
    <build-dir>/tmp, which it removes when the build ends."""
    failed = [job for job, o in all_builds.items() if o.wheel is None]
    assert not failed, {job: all_builds[job].log[-3000:] for job in failed}
    left = {
        f"{origin} {flavour}": sorted(p.name for p in o.tmpdir.iterdir()) for (origin, flavour), o in all_builds.items()
    }
    assert not any(left.values()), f"the builds left files in the user's temporary directory: {left}"
    assert not [o.build_dir / "tmp" for o in all_builds.values() if (o.build_dir / "tmp").exists()]


def test_collective_stub_from_rccl_header_satisfies_the_bridge(
    installed: dict[str, InstalledWheel], toolchains: Toolchains, tmp_path: Path
) -> None:
    """Test-only RCCL link stub generated from the real rccl.h: the bridge resolves every function it
    needs from it (so the names match the header). Never shipped, never on the run-time path."""
    header = toolchains.rccl_home / "include" / "rccl" / "rccl.h"
    stub = build_stub(header, tmp_path)
    env = {**os.environ, "MONARCH_COLLECTIVE_LIBRARY": str(stub)}
    info = probe(installed["rocm"], env)["info"]
    assert isinstance(info, dict)
    assert info["collective_loaded"] is True, info
    header_version = int(re.search(r"#define\s+NCCL_VERSION_CODE\s+(\d+)", header.read_text()).group(1))
    assert info["collective_version"] == header_version  # the stub answers the header's version
    assert info["collective_header_version"] == header_version
    # And it never ends up in a wheel.
    for flavour in ("cpu", "cuda", "rocm"):
        with zipfile.ZipFile(installed[flavour].wheel) as zf:
            assert not any("rccl" in n.lower() for n in zf.namelist())


def test_collective_library_of_another_api_major_is_refused(
    installed: dict[str, InstalledWheel], toolchains: Toolchains, tmp_path: Path
) -> None:
    """A collective library whose API major differs from the header the wheel was built with is not used:
    collective_loaded is false and the reason names both versions."""
    stub = build_stub(toolchains.rccl_home / "include" / "rccl" / "rccl.h", tmp_path, version=30102)
    info = probe(installed["rocm"], {**os.environ, "MONARCH_COLLECTIVE_LIBRARY": str(stub)})["info"]
    assert isinstance(info, dict)
    assert info["collective_loaded"] is False, info
    error = str(info.get("collective_error"))
    assert "3.1.2" in error and "built against" in error, error
