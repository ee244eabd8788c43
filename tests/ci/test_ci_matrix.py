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
        "rocm6.4-x86_64",
        "rocm7.2-x86_64",
    ]
    assert dict(real_matrix.excluded_rows).keys() == {"rocm5.2-aarch64", "rocm6.4-aarch64", "rocm7.2-aarch64"}
    # abi3: one build per row with the minimum python, tests on every python of the axis...
    assert real_matrix.build_python == "3.9"
    host_rows = [r for r in real_matrix.rows if not r.in_root]
    assert [r.name for r in host_rows] == names[:5]
    assert all(r.pythons == real_matrix.pythons for r in host_rows)
    # ...except root rows: built and tested with the root's own python (declared by its toolchain).
    for row in real_matrix.rows:
        if row.in_root:
            assert row.pythons == (real_matrix.toolchains[row.flavour.toolchain].root_python,) == ("3.14",)
            assert row.skipped_pythons == ()


def test_flavour_declarations(real_matrix: Matrix) -> None:
    cuda = real_matrix.flavours["cuda13"]
    assert (cuda.platform, cuda.local_version, cuda.collective) == ("cuda", "cu13", "nccl")
    assert cuda.archs == ("80", "90")
    rocm = real_matrix.flavours["rocm5.2"]
    assert (rocm.platform, rocm.local_version, rocm.collective) == ("rocm", "rocm5.2", "rccl")
    assert "gfx942" not in rocm.archs  # clang-15 rejects it
    for fl in real_matrix.flavours.values():
        assert fl.size_budget_mib > 0 and fl.validate and fl.needed
        if fl.in_root:
            assert fl.image == {}  # a root row runs on the runner itself
        else:
            assert set(fl.image) >= {r.arch for r in real_matrix.rows if r.flavour is fl}
        assert real_matrix.toolchains[fl.toolchain].description
        # The ceiling: RHEL 9 / Ubuntu 22.04 (manylinux_2_34) for every flavour today.
        assert fl.glibc_max == (2, 34) and fl.glibcxx_max == (3, 4, 29)


@pytest.mark.parametrize(("flavour", "hip_major"), [("rocm6.4", "6"), ("rocm7.2", "7")])
def test_root_flavours(real_matrix: Matrix, tmp_path: Path, flavour: str, hip_major: str) -> None:
    fl = real_matrix.flavours[flavour]
    assert fl.in_root and (fl.platform, fl.local_version, fl.toolkit) == ("rocm", flavour, flavour[4:])
    assert fl.archs == ("gfx90a", "gfx942", "gfx950")
    assert f"libamdhip64.so.{hip_major}" in fl.needed and f"libamdhip64.so.{hip_major}" in fl.external_libs
    assert "librccl.so.1" in fl.external_libs  # loaded at run time: allowed outside, never NEEDED
    assert "librccl.so.1" not in fl.needed
    tc = real_matrix.toolchains[fl.toolchain]
    assert tc.is_root and tc.install["kind"] == "root" and tc.root_version == flavour[4:]
    assert tc.root_dir(tmp_path) == tmp_path / "roots" / flavour
    assert f"{{toolchains}}/roots/{flavour}/.monarch-root" in tc.probe
    assert tc.env["ROCM_HOME"] == "/usr"
    assert ("RCCL_HOME" in tc.env) == (flavour == "rocm6.4")  # 6.4's root has RCCL's header only
    assert not any("{toolchains}" in v for v in tc.env.values())
    # The old rocm7.2 row ran in AMD's docker image; nothing points at it any more.
    assert "rocm/dev-ubuntu" not in REAL.read_text()


ROOT_TC = """[toolchain."rocm7.2-root"]
description = "HIP 7.2 + RCCL 7.2 (Debian experimental, clang 22) in a Debian sid root made by ci/rocm-root.sh"
commands = ["bash", "unshare", "chroot", "rustc", "cargo"]
probe = ["{toolchains}/roots/rocm7.2/.monarch-root"]
env = { ROCM_HOME = "/usr", HIP_PLATFORM = "amd" }
install = { kind = "root", version = "7.2", python = "3.14" }"""


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ('probe = ["{toolchains}/roots/rocm7.2/.monarch-root"]', 'probe = ["/usr/include/hip/hip_runtime.h"]', "stamp"),
        ('ROCM_HOME = "/usr", HIP', 'ROCM_HOME = "{toolchains}/rocm", HIP', "applies inside the root"),
        ('version = "7.2", python', 'version = "7", python', "'version' must be a version like '7.2'"),
        (', python = "3.14" }', " }", "'python' must be a version"),
        ('kind = "root"', 'kind = "chroot"', "install.kind must be one of none, pypi, apt, root"),
    ],
)
def test_malformed_root_toolchain(tmp_path: Path, old: str, new: str, message: str) -> None:
    assert old in ROOT_TC
    with pytest.raises(CIError, match=message):
        load_with(tmp_path, replace=(ROOT_TC, ROOT_TC.replace(old, new)))


def test_root_flavour_takes_no_container_image(tmp_path: Path) -> None:
    marker = 'toolchain = "rocm7.2-root"\n'
    with pytest.raises(CIError, match=r"root.*runs on the runner itself.*remove 'image'"):
        load_with(tmp_path, replace=(marker, marker + 'image = "debian:sid"\n'))


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (
            'glibc_max = "2.34"\nglibcxx_max',
            'glibc_max = "2.34.1"\nglibcxx_max',
            "'glibc_max' must be a version like '2.34'",
        ),
        ('glibcxx_max = "3.4.29"', 'glibcxx_max = "3.4"', "'glibcxx_max' must be a version like '3.4.29'"),
        ('glibc_max = "2.34"\nglibcxx_max', "glibcxx_max", "'glibc_max' must be a version"),
    ],
)
def test_glibc_ceiling_is_required_and_checked(tmp_path: Path, old: str, new: str, message: str) -> None:
    with pytest.raises(CIError, match=message):
        load_with(tmp_path, replace=(old, new))


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
    assert len(m.rows) == 7


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
    # A root row's environment applies inside the root: paths as the root sees them.
    assert toolchains.build_env(real_matrix.row("rocm7.2-x86_64"), real_matrix, tmp_path) == {
        "ROCM_HOME": "/usr",
        "HIP_PLATFORM": "amd",
    }
    assert (
        toolchains.build_env(real_matrix.row("rocm6.4-x86_64"), real_matrix, tmp_path)["RCCL_HOME"] == "/opt/rccl/usr"
    )
