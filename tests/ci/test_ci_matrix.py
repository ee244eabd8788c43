"""ci/matrix.toml parses, expands into the right rows, and rejects malformed declarations."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import tomllib

from ci import matrix as matrix_mod
from ci import toolchains
from ci.errors import CIError
from ci.matrix import Matrix

REAL = matrix_mod.DEFAULT_MATRIX


def load_with(tmp_path: Path, edit: str = "", replace: tuple[str, str] | None = None) -> Matrix:
    text = REAL.read_text()
    if replace:
        assert replace[0] in text, replace[0]
        text = text.replace(replace[0], replace[1])
    path = tmp_path / "matrix.toml"
    path.write_text(text + "\n" + edit)
    return matrix_mod.load(path)


def test_real_matrix_rows(real_matrix: Matrix) -> None:
    names = [r.name for r in real_matrix.rows]
    assert names == [
        "cpu-x86_64",
        "cpu-aarch64",
        "cuda13-x86_64",
        "cuda13-aarch64",
        "rocm5.2-x86_64",
        "rocm7.2-x86_64",
    ]
    assert dict(real_matrix.excluded_rows).keys() == {"rocm5.2-aarch64", "rocm7.2-aarch64"}
    # abi3: one build per row with the minimum python, tests on every python of the axis.
    assert real_matrix.build_python == "3.9"
    assert all(r.pythons == real_matrix.pythons for r in real_matrix.rows)


def test_flavour_declarations(real_matrix: Matrix) -> None:
    cuda = real_matrix.flavours["cuda13"]
    assert (cuda.platform, cuda.local_version, cuda.collective) == ("cuda", "cu13", "nccl")
    assert cuda.archs == ("80", "90")
    rocm = real_matrix.flavours["rocm5.2"]
    assert (rocm.platform, rocm.local_version, rocm.collective) == ("rocm", "rocm5.2", "rccl")
    assert "gfx942" not in rocm.archs  # clang-15 rejects it
    assert "gfx942" in real_matrix.flavours["rocm7.2"].archs
    for fl in real_matrix.flavours.values():
        assert fl.size_budget_mib > 0 and fl.validate and fl.needed
        assert set(fl.image) >= {r.arch for r in real_matrix.rows if r.flavour is fl}
        assert real_matrix.toolchains[fl.toolchain].description


def test_row_lookup(real_matrix: Matrix) -> None:
    assert real_matrix.row("cuda13-aarch64").arch == "aarch64"
    assert real_matrix.row("cpu").name == f"cpu-{matrix_mod.host_arch()}"
    with pytest.raises(CIError, match=r"unknown row 'cuda12'.*cpu-x86_64"):
        real_matrix.row("cuda12")
    with pytest.raises(CIError, match=r"excluded.*aarch64 release"):
        real_matrix.row("rocm5.2-aarch64")


def test_python_exclusion_removes_only_that_interpreter(tmp_path: Path) -> None:
    m = load_with(
        tmp_path,
        '[[exclude]]\nflavour = "cuda*"\narch = "aarch64"\npython = "3.13"\nreason = "no wheel yet"\n',
    )
    row = m.row("cuda13-aarch64")
    assert "3.13" not in row.pythons and row.skipped_pythons == (("3.13", "no wheel yet"),)
    assert "3.13" in m.row("cuda13-x86_64").pythons
    assert len(m.rows) == 6


def test_row_exclusion_by_glob(tmp_path: Path) -> None:
    m = load_with(tmp_path, '[[exclude]]\narch = "aarch64"\nreason = "no arm runners"\n')
    assert all(r.arch == "x86_64" for r in m.rows)
    assert ("cpu-aarch64", "no arm runners") in m.excluded_rows


@pytest.mark.parametrize(
    ("edit", "replace", "message"),
    [
        ('[[exclude]]\narch = "aarch64"\n', None, "needs a reason"),
        ('[[exclude]]\narch = "riscv64"\nreason = "x"\n', None, "matches nothing"),
        ('[[exclude]]\ncompiler = "gcc"\nreason = "x"\n', None, "unknown axis"),
        ('[[exclude]]\npython = "3.9"\nreason = "x"\n', None, "excludes the build python"),
        ("", ('python = "3.9"\n# The interpreter that runs', 'python = "3.11"\n# The interpreter that runs'), "oldest"),
        ("", ('flavour = ["cpu", ', 'flavour = ["cpu", "cuda12", '), "cuda12.*no \\[flavour\\] table"),
        ("", ('toolchain = "pypi-cuda13"', 'toolchain = "pypi-cuda12"'), "not declared under \\[toolchain\\]"),
        ("", ('sha = "3d3c42e5aac5ba805825da76410c181273ba90b1"', 'sha = "v7"'), "full 40-hex"),
        ("", ('platform = "cuda"', 'platform = "metal"'), "platform must be one of"),
        ("", ('archs = ["80", "90"]', "archs = []"), "needs default archs"),
        ("", ("size_budget_mib = 64", "size_budget_mib = -1"), "positive"),
        ("", ("schema = 1", "schema = 2"), "schema"),
    ],
)
def test_malformed_matrix_is_a_clear_error(
    tmp_path: Path, edit: str, replace: tuple[str, str] | None, message: str
) -> None:
    with pytest.raises(CIError, match=message):
        load_with(tmp_path, edit, replace)


def test_not_toml(tmp_path: Path) -> None:
    bad = tmp_path / "m.toml"
    bad.write_text("[axes\n")
    with pytest.raises(CIError, match="not valid TOML"):
        matrix_mod.load(bad)
    with pytest.raises(CIError, match="does not exist"):
        matrix_mod.load(tmp_path / "absent.toml")


def test_every_flavour_is_on_the_axis() -> None:
    data: dict[str, Any] = tomllib.loads(REAL.read_text())
    assert set(data["flavour"]) == set(data["axes"]["flavour"])


def test_build_env_points_at_the_toolchains(
    real_matrix: Matrix, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CI_NO_COMPILER_CACHE", "1")
    cuda = toolchains.build_env(real_matrix.row("cuda13-x86_64"), real_matrix, tmp_path)
    assert cuda == {"CUDA_HOME": str(tmp_path / "cuda-home"), "NCCL_HOME": str(tmp_path / "nccl-home")}
    rocm = toolchains.build_env(real_matrix.row("rocm5.2-x86_64"), real_matrix, tmp_path)
    assert rocm == {"ROCM_HOME": "/usr", "HIP_PLATFORM": "amd", "RCCL_HOME": str(tmp_path / "rccl" / "usr")}
    assert toolchains.build_env(real_matrix.row("cpu-x86_64"), real_matrix, tmp_path) == {}
