"""``port --add``'s registration (tools/port/manifest.py) against a scratch csrc/; fast, no compiler."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from _port_support import DATA

from buildcore.kernels import read_manifest
from tools.errors import ToolError
from tools.port.manifest import check_manifest, entry_points, register

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

KERNELS = DATA / "kernels"


@pytest.fixture
def csrc(tmp_path: Path) -> Path:
    root = tmp_path / "csrc"
    root.mkdir()
    (root / "bridge.h").write_text("#pragma once\n#include <cuda_runtime.h>\n")
    return root


def test_entry_points_need_the_right_shape() -> None:
    text = (KERNELS / "two_entries.cu").read_text()
    assert entry_points(text) == ["mr_kernel_a", "mr_kernel_b"]
    assert entry_points('// extern "C" cudaError_t x(void* d, size_t n, cudaStream_t s) {}\n') == []
    assert entry_points('extern "C" cudaError_t e(void*, size_t, cudaStream_t) {') == ["e"]


def test_register_copies_kernel_and_local_header(csrc: Path) -> None:
    reg = register(KERNELS / "scale2.cu", csrc)
    assert (reg.name, reg.entry, reg.source) == ("scale2", "mr_kernel_scale2", "kernels/scale2.cu")
    assert (csrc / "kernels" / "scale2.cu").read_bytes() == (KERNELS / "scale2.cu").read_bytes()
    assert (csrc / "kernels" / "scale2_params.h").is_file()
    assert not (csrc / "kernels" / "bridge.h").exists()  # a csrc/ header stays where it is
    kernels = read_manifest(csrc)  # the backend's reader accepts it
    assert [(k.name, k.source, k.entry) for k in kernels] == [("scale2", "kernels/scale2.cu", "mr_kernel_scale2")]
    assert check_manifest(csrc) == []


def test_register_twice_is_a_no_op_and_appends_others(csrc: Path, tmp_path: Path) -> None:
    register(KERNELS / "scale2.cu", csrc)
    before = (csrc / "manifest.toml").read_text()
    assert register(KERNELS / "scale2.cu", csrc).already
    assert (csrc / "manifest.toml").read_text() == before
    other = tmp_path / "src" / "double_it.cu"
    other.parent.mkdir()
    other.write_text((KERNELS / "scale2.cu").read_text().replace("mr_kernel_scale2", "mr_kernel_double_it"))
    shutil.copy(KERNELS / "scale2_params.h", other.parent)
    register(other, csrc)
    data = tomllib.loads((csrc / "manifest.toml").read_text())
    assert [k["name"] for k in data["kernel"]] == ["scale2", "double_it"]
    assert (csrc / "manifest.toml").read_text().startswith(before)


def test_refuses_to_overwrite_a_different_file(csrc: Path, tmp_path: Path) -> None:
    (csrc / "kernels").mkdir()
    (csrc / "kernels" / "scale2.cu").write_text("// someone else's kernel\n")
    with pytest.raises(ToolError, match="already exists with different contents"):
        register(KERNELS / "scale2.cu", csrc)
    assert (csrc / "kernels" / "scale2.cu").read_text() == "// someone else's kernel\n"
    assert not (csrc / "manifest.toml").exists() and not (csrc / "kernels" / "scale2_params.h").exists()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "several entry points"),
        ({"entry": "mr_kernel_c"}, "with other parameters"),
        ({"entry": "mr_kernel_zz"}, "does not define it"),
        ({"entry": "mr_kernel_a", "name": "bad name"}, "kernel name"),
    ],
)
def test_entry_point_problems(csrc: Path, kwargs: dict[str, str], message: str) -> None:
    with pytest.raises(ToolError, match=message):
        register(KERNELS / "two_entries.cu", csrc, **kwargs)
    assert not (csrc / "manifest.toml").exists()


def test_name_and_entry_conflicts(csrc: Path, tmp_path: Path) -> None:
    register(KERNELS / "two_entries.cu", csrc, entry="mr_kernel_a", name="a")
    with pytest.raises(ToolError, match="already has a kernel named 'a'"):
        register(KERNELS / "scale2.cu", csrc, name="a")
    clash = tmp_path / "clash.cu"
    clash.write_text((KERNELS / "two_entries.cu").read_text())
    with pytest.raises(ToolError, match="mr_kernel_a is already registered"):
        register(clash, csrc, entry="mr_kernel_a", name="clash")


def test_no_entry_point_explains_the_signature(csrc: Path) -> None:
    with pytest.raises(ToolError, match=r'extern "C" cudaError_t mr_kernel_NAME\(void\* data, size_t nbytes'):
        register(DATA / "hazards" / "clean.cu", csrc)


def test_check_manifest_reports_a_missing_entry(csrc: Path) -> None:
    register(KERNELS / "scale2.cu", csrc)
    path = csrc / "kernels" / "scale2.cu"
    path.write_text(path.read_text().replace("mr_kernel_scale2", "mr_kernel_renamed"))
    assert any("does not define" in p for p in check_manifest(csrc))


def test_kernel_already_under_csrc_is_not_copied(csrc: Path) -> None:
    (csrc / "mine").mkdir()
    shutil.copy(KERNELS / "scale2.cu", csrc / "mine" / "scale2.cu")
    shutil.copy(KERNELS / "scale2_params.h", csrc / "mine" / "scale2_params.h")
    reg = register(csrc / "mine" / "scale2.cu", csrc)
    assert reg.source == "mine/scale2.cu" and reg.copied == ()
    assert not (csrc / "kernels").exists()
