"""python/monarch_runtime/_hip_runtime.py on its own (no extension needed): the soname reader and the
choice of HIP runtime before a ROCm build's extension loads. The end-to-end cases run inside the ROCm 7.2
root (test_rocm_roots.py)."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path
from types import ModuleType

import pytest
from _support import ROOT

HOST_HIP = Path("/usr/lib/x86_64-linux-gnu/libamdhip64.so.5")


def load_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "hip_runtime", ROOT / "python" / "monarch_runtime" / "_hip_runtime.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


hip = load_module()


def test_soname_of_real_libraries() -> None:
    libc = Path("/lib/x86_64-linux-gnu/libc.so.6")
    assert hip.soname(libc) == "libc.so.6"
    if HOST_HIP.exists():
        assert hip.soname(HOST_HIP) == "libamdhip64.so.5"


def test_soname_of_things_that_are_not_shared_libraries(tmp_path: Path) -> None:
    (tmp_path / "text").write_text("not an ELF")
    assert hip.soname(tmp_path / "text") is None
    assert hip.soname(tmp_path / "missing") is None
    assert hip.soname(Path(__file__)) is None


@pytest.mark.fault
def test_an_override_of_the_wrong_soname_is_refused(tmp_path: Path) -> None:
    fake = tmp_path / "libamdhip64.so.7"
    shutil.copy(Path("/lib/x86_64-linux-gnu/libc.so.6"), fake)
    with pytest.raises(ImportError) as err:
        hip.preload("libamdhip64.so.7", {"MONARCH_HIP_RUNTIME": str(fake)})
    assert "libc.so.6" in str(err.value) and "auto or system" in str(err.value)


def test_system_choice_and_no_torch_leave_the_loader_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    assert hip.preload("libamdhip64.so.7", {"MONARCH_HIP_RUNTIME": "system"}) is None
    monkeypatch.setattr(hip, "torch_bundled", lambda: [])
    monkeypatch.setattr(hip, "mapped", lambda: [])
    assert hip.preload("libamdhip64.so.7", {}) is None


def test_a_torch_copy_of_another_major_is_not_taken(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    if not HOST_HIP.exists():
        pytest.skip("no host HIP runtime to stand in for torch's copy")
    copy = tmp_path / "libamdhip64.so"
    shutil.copy(HOST_HIP, copy)  # soname libamdhip64.so.5: not what a 7.2 build needs
    monkeypatch.setattr(hip, "torch_bundled", lambda: [copy])
    monkeypatch.setattr(hip, "mapped", lambda: [])
    assert hip.preload("libamdhip64.so.7", {}) is None
