"""Wheel variants (build_backend/variant.py, docs/wheels.md): the properties derived from each toolchain,
the label rules, the setting, and the conversion applied to the real wheels of the session, checked with
variantlib (its own parser/validator of variant.json, of the file name, validate_variant) and with the
providers an installer would run: AMD's real plugin (rocm-bootstrap, from ci/requirements-test.txt) and a
stand-in for NVIDIA's (PyPI has only a placeholder of it). One end-to-end `pip wheel -C variant=auto` (slow)."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _roots import RootBuild
from _support import FLAVOURS, ROOT, SOURCE_DATE_EPOCH, pip_wheel
from variantlib.api import VariantDescription, VariantProperty, get_variants_by_priority, validate_variant
from variantlib.constants import VALIDATION_WHEEL_NAME_REGEX
from variantlib.plugins import loader as plugin_loader
from variantlib.variant_dist_info import VariantDistInfo
from variantlib.variants_json import VariantsJson

import build_backend
from build_backend import variant, wheel
from buildcore import settings
from buildcore.errors import BuildError
from buildcore.toolchain import Toolchain

CPU = Toolchain(platform="cpu")
CUDA = Toolchain(platform="cuda", version=(13, 5), archs=("80", "90"))
ROCM = Toolchain(platform="rocm", version=(5, 2), archs=("gfx90a", "gfx940"))
ROCM72 = Toolchain(platform="rocm", version=(7, 2), archs=("gfx90a", "gfx942", "gfx950"))
ROCM64 = Toolchain(platform="rocm", version=(6, 4), archs=("gfx90a", "gfx942", "gfx950"))
AUTO_LABELS = {"cpu": "null", "cuda": "cu13", "rocm": "rocm5.2"}
AMD_PLUGIN = "rocm_bootstrap.variant_provider:AMDVariantPlugin"


# --- properties -------------------------------------------------------------------------------------


def test_cpu_build_is_the_null_variant() -> None:
    assert variant.variant_properties(CPU) == []
    assert variant.variant_label(CPU, "auto") == "null"


def test_cuda_properties_use_the_nvidia_provider_names() -> None:
    assert variant.variant_properties(CUDA) == [
        "nvidia :: cuda_version_lower_bound :: 13.5",
        "nvidia :: sm_arch :: 80_real",
        "nvidia :: sm_arch :: 90_real",
    ]
    one_arch = Toolchain(platform="cuda", version=(12, 9), archs=("90",))
    assert variant.variant_properties(one_arch) == [
        "nvidia :: cuda_version_lower_bound :: 12.9",
        "nvidia :: sm_arch :: 90_real",
    ]


def test_rocm_properties_are_the_gfx_arch_values_of_amds_plugin(capsys: pytest.CaptureFixture[str]) -> None:
    """rocm-bootstrap reports a GPU's own gfx name as its gfx_arch value, and no ROCm version."""
    assert variant.variant_properties(ROCM72) == [
        "amd :: gfx_arch :: gfx90a",
        "amd :: gfx_arch :: gfx942",
        "amd :: gfx_arch :: gfx950",
    ]
    assert variant.variant_properties(ROCM64) == variant.variant_properties(ROCM72)  # no ROCm version to differ
    assert "left out" not in capsys.readouterr().err
    # gfx940 (early MI300; LLVM folded it into gfx942) is not a value the plugin knows: left out, and said so
    assert variant.variant_properties(ROCM) == ["amd :: gfx_arch :: gfx90a"]
    assert "variant: gfx940 left out of the variant's gfx_arch values" in capsys.readouterr().err


@pytest.mark.parametrize("toolchain", [ROCM, ROCM72], ids=["rocm5.2", "rocm7.2"])
def test_rocm_properties_validate_against_amds_plugin(toolchain: Toolchain) -> None:
    label, _, text = variant.variant_dist_info(toolchain, "auto")
    dist = VariantDistInfo(text, expected_label=label)
    assert dist.providers["amd"].plugin_api == AMD_PLUGIN
    assert dist.providers["amd"].requires == ["rocm-bootstrap>=0.3.0,<1.0.0"]
    result = validate_variant(dist.variant_desc, dist)  # loads rocm-bootstrap's plugin through variant.json
    assert result.is_valid(allow_unknown_plugins=False), result
    # what the old variant.json also said is not a feature of the plugin, and gfx940 is not one of its values
    for extra in (VariantProperty("amd", "rocm_version", "7.2"), VariantProperty("amd", "gfx_arch", "gfx940")):
        bad = VariantDescription(properties=[*dist.variant_desc.properties, extra])
        assert validate_variant(bad, dist).invalid_properties == [extra]


def test_rocm_archs_the_plugin_does_not_know_are_an_error() -> None:
    with pytest.raises(BuildError, match=r"none of the archs gfx940 is a gfx_arch value .*rocm-bootstrap 0\.3"):
        variant.variant_properties(Toolchain(platform="rocm", version=(5, 2), archs=("gfx940",)))


def test_rocm_variant_without_amds_plugin_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_plugin_answers: None
) -> None:
    """variantlib runs the plugin in a subprocess; one that cannot be imported there is one paragraph."""
    shadow = tmp_path / "shadow" / "rocm_bootstrap"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('as if rocm-bootstrap were not installed')\n")
    monkeypatch.setenv("PYTHONPATH", str(shadow.parent))
    with pytest.raises(BuildError) as err:
        variant.variant_dist_info(ROCM72, "auto")
    message = str(err.value)
    assert "the plugin could not be run:" in message and "as if rocm-bootstrap were not installed" in message
    assert "pip install 'rocm-bootstrap>=0.3.0,<1.0.0'" in message
    assert "Traceback" not in message and "\n" not in message


@pytest.mark.parametrize("toolchain", [CUDA, ROCM72], ids=["cuda", "rocm"])
def test_properties_round_trip_through_variantlib(toolchain: Toolchain) -> None:
    props = variant.variant_properties(toolchain)
    assert [VariantProperty.from_str(p).to_str() for p in props] == props
    assert [
        p.to_str() for p in VariantDescription(properties=[VariantProperty.from_str(p) for p in props]).properties
    ] == props


def test_arch_that_cannot_be_a_property_value_is_refused() -> None:
    odd = Toolchain(platform="rocm", version=(5, 2), archs=("gfx90a:xnack-",))
    with pytest.raises(BuildError, match=r"gfx90a:xnack-.*only 0-9, a-z"):
        variant.variant_properties(odd)


# --- labels and the setting -------------------------------------------------------------------------


@pytest.mark.parametrize(("toolchain", "flavour"), [(CPU, "cpu"), (CUDA, "cuda"), (ROCM, "rocm")])
def test_auto_label_is_the_local_version_label(toolchain: Toolchain, flavour: str) -> None:
    assert variant.variant_label(toolchain, "auto") == AUTO_LABELS[flavour]


def test_custom_and_hash_labels() -> None:
    assert variant.variant_label(CUDA, "cu135_sm90.fast") == "cu135_sm90.fast"
    assert variant.variant_label(CUDA, "hash") is None  # variantlib computes it
    label, props, _ = variant.variant_dist_info(CUDA, "hash")
    assert label == VariantDescription(properties=[VariantProperty.from_str(p) for p in props]).hexdigest
    assert len(label) == 8


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("CU13", "not a valid variant label"),
        ("cu-13", "not a valid variant label"),
        ("cu 13", "not a valid variant label"),
        ("cü13", "not a valid variant label"),
        ("nvidia :: sm_arch :: 90_real", "looks like a variant property"),
    ],
)
def test_bad_labels_are_refused_before_building(text: str, message: str) -> None:
    with pytest.raises(BuildError, match=message):
        settings.load({"variant": text}, {}, {})
    with pytest.raises(BuildError, match=message):
        settings.load(None, {"MONARCH_VARIANT": text}, {})


def test_null_label_only_for_the_null_variant() -> None:
    with pytest.raises(BuildError, match="null variant"):
        variant.variant_label(CUDA, "null")
    with pytest.raises(BuildError, match="always 'null'"):
        variant.variant_label(CPU, "mylabel")
    assert variant.variant_label(CPU, "null") == "null"


def test_setting_sources_and_default() -> None:
    assert settings.load(None, {}, {}).variant is None
    assert settings.load({"variant": "  "}, {}, {}).variant is None
    assert settings.load({"variant": "auto"}, {}, {}).variant == "auto"
    for off in ("false", "off", "0", "No"):
        assert settings.load({"variant": off}, {}, {}).variant is None, off
    for on in ("true", "on", "1", "Yes"):
        assert settings.load({"variant": on}, {}, {}).variant == "auto", on
    env = settings.load(None, {"MONARCH_VARIANT": "cu13"}, {})
    assert env.variant == "cu13"
    assert env.origin("variant") == "the environment variable MONARCH_VARIANT"
    assert settings.load({"variant": "hash"}, {"MONARCH_VARIANT": "cu13"}, {}).variant == "hash"  # -C wins
    assert "variant" in settings.KEYS


def test_variantlib_is_required_only_for_variant_builds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    for name in ("MONARCH_VARIANT", "MONARCH_PLATFORM", "CUDA_HOME", "CUDA_PATH", "ROCM_HOME", "ROCM_PATH"):
        monkeypatch.delenv(name, raising=False)
    assert build_backend.get_requires_for_build_wheel({}) == []
    assert build_backend.get_requires_for_build_wheel(None) == []
    assert build_backend.get_requires_for_build_wheel({"variant": "auto"}) == ["variantlib>=0.2"]
    monkeypatch.setenv("MONARCH_VARIANT", "cu13")
    assert build_backend.get_requires_for_build_wheel({}) == ["variantlib>=0.2"]
    # a ROCm variant also needs AMD's provider plugin, which names its gfx_arch values
    with_plugin = ["variantlib>=0.2", "rocm-bootstrap>=0.3.0,<1.0.0"]
    assert build_backend.get_requires_for_build_wheel({"platform": "rocm"}) == with_plugin
    monkeypatch.setenv("ROCM_HOME", "/usr")
    assert build_backend.get_requires_for_build_wheel({}) == with_plugin
    assert build_backend.get_requires_for_build_wheel({"platform": "cuda"}) == ["variantlib>=0.2"]
    monkeypatch.delenv("MONARCH_VARIANT")
    assert build_backend.get_requires_for_build_wheel({}) == []


def test_backend_works_without_variantlib(tmp_path: Path) -> None:
    """Plain builds never import variantlib; a variant build without it is a clear BuildError."""
    script = f"""
import sys
sys.modules["variantlib"] = None  # as if not installed
import build_backend
from build_backend import variant
from buildcore import settings
from buildcore.errors import BuildError
from buildcore.toolchain import Toolchain
assert build_backend.get_requires_for_build_wheel({{}}) == []
assert settings.load({{"variant": "auto"}}, {{}}, {{}}).variant == "auto"
assert variant.variant_properties(Toolchain("cuda", version=(13, 5), archs=("90",)))
try:
    variant.make_variant_wheel(__import__("pathlib").Path({str(tmp_path / "x.whl")!r}), Toolchain("cpu"), "auto",
                               __import__("pathlib").Path({str(tmp_path)!r}))
except BuildError as err:
    print("ERROR:", err)
"""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MONARCH_")}
    proc = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert "ERROR: a variant wheel was requested, but variantlib cannot be imported" in proc.stdout
    assert "pip install 'variantlib>=0.2'" in proc.stdout


# --- the conversion, on the session's real wheels -----------------------------------------------------


def _toolchain_of(plain: Path) -> Toolchain:
    """The Toolchain a built wheel records in build_info.json."""
    with zipfile.ZipFile(plain) as zf:
        info = json.loads(zf.read(f"{wheel.PACKAGE}/build_info.json"))
    if info["platform"] == "cpu":
        return CPU
    major, minor = (int(x) for x in info["toolkit_version"].split(".")[:2])
    archs = tuple(a.removeprefix("sm_") for a in info["archs"])
    return Toolchain(platform=info["platform"], version=(major, minor), archs=archs)


def _check_record(zf: zipfile.ZipFile) -> None:
    names = zf.namelist()
    assert names[-1].endswith(".dist-info/RECORD")
    rows = [line.split(",") for line in zf.read(names[-1]).decode().splitlines()]
    assert sorted(r[0] for r in rows) == sorted(names)
    for name, digest, size in rows:
        if name == names[-1]:
            assert (digest, size) == ("", "")
            continue
        data = zf.read(name)
        expected = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        assert digest == f"sha256={expected}", name
        assert int(size) == len(data), name


@pytest.fixture
def variant_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", SOURCE_DATE_EPOCH)  # as the session's wheels were built


@pytest.mark.slow
@pytest.mark.parametrize("flavour", FLAVOURS)
def test_variant_of_a_real_wheel(
    flavour: str, built_wheels: dict[str, Path], tmp_path: Path, variant_env: None
) -> None:
    original = built_wheels[flavour]
    plain = tmp_path / "a" / original.name
    plain.parent.mkdir()
    shutil.copyfile(original, plain)
    toolchain = _toolchain_of(plain)
    label = AUTO_LABELS[flavour]

    result = variant.make_variant_wheel(plain, toolchain, "auto", plain.parent)

    # the file name: the plain name without the local version, plus the label; nothing else is left there
    base_name, _, tag_part = original.name.partition("-")[2].partition("-")  # "0.1.0+cu13", rest
    version = base_name.split("+")[0]
    assert result.name == f"{wheel.DIST}-{version}-{tag_part[: -len('.whl')]}-{label}.whl"
    assert [p.name for p in plain.parent.iterdir()] == [result.name]
    parsed = VALIDATION_WHEEL_NAME_REGEX.fullmatch(result.name)
    assert parsed is not None
    assert parsed.group("variant_label") == label
    assert parsed.group("ver") == version

    with zipfile.ZipFile(original) as zo, zipfile.ZipFile(result) as zv:
        _check_record(zv)
        info = f"{wheel.DIST}-{version}.dist-info"
        # variant.json validates with variantlib and names exactly the derived properties
        dist = VariantDistInfo(zv.read(f"{info}/variant.json"), expected_label=label)
        assert [p.to_str() for p in dist.variant_desc.properties] == variant.variant_properties(toolchain)
        assert dist.namespace_priorities == ["nvidia", "amd"]
        assert set(dist.providers) == {"nvidia", "amd"}
        assert dist.providers["nvidia"].plugin_api == "nvidia_variant_provider.plugin:NvidiaVariantPlugin"
        assert dist.providers["amd"].plugin_api == AMD_PLUGIN
        assert dist.variant_desc.is_null_variant() == (flavour == "cpu")
        # the payload is untouched; METADATA differs only in its Version; build_info says the same version
        old_info = f"{wheel.DIST}-{base_name}.dist-info"
        payload = [n for n in zo.namelist() if ".dist-info/" not in n and not n.endswith(("build_info.json", "/"))]
        assert payload
        for name in payload:
            assert zv.read(name) == zo.read(name), name
            assert zv.getinfo(name).external_attr == zo.getinfo(name).external_attr, name
            assert zv.getinfo(name).date_time == zo.getinfo(name).date_time, name
        old_meta = zo.read(f"{old_info}/METADATA").decode().splitlines()
        new_meta = zv.read(f"{info}/METADATA").decode().splitlines()
        assert [i for i, (a, b) in enumerate(zip(old_meta, new_meta)) if a != b] == [
            old_meta.index(f"Version: {base_name}")
        ]
        assert f"Version: {version}" in new_meta and len(old_meta) == len(new_meta)
        assert zv.read(f"{info}/WHEEL") == zo.read(f"{old_info}/WHEEL")
        recorded = json.loads(zv.read(f"{wheel.PACKAGE}/build_info.json"))
        assert recorded["version"] == version
        assert recorded["variant"] == {"label": label, "properties": variant.variant_properties(toolchain)}
        before = json.loads(zo.read(f"{wheel.PACKAGE}/build_info.json"))
        assert {k: v for k, v in recorded.items() if k not in ("version", "variant")} == {
            k: v for k, v in before.items() if k != "version"
        }
        assert sorted(n for n in zv.namelist() if ".dist-info/" in n) == sorted(
            f"{info}/{leaf}" for leaf in ("METADATA", "RECORD", "WHEEL", "variant.json")
        )

    # deterministic: a second conversion of the same plain wheel is byte-identical
    again = tmp_path / "b" / original.name
    again.parent.mkdir()
    shutil.copyfile(original, again)
    assert variant.make_variant_wheel(again, toolchain, "auto", again.parent).read_bytes() == result.read_bytes()


def _variant_json_of(wheel_path: Path) -> VariantDistInfo:
    with zipfile.ZipFile(wheel_path) as zf:
        (name,) = [n for n in zf.namelist() if n.endswith(".dist-info/variant.json")]
        parsed = VALIDATION_WHEEL_NAME_REGEX.fullmatch(wheel_path.name)
        assert parsed is not None
        return VariantDistInfo(zf.read(name), expected_label=parsed.group("variant_label"))


@pytest.mark.slow
@pytest.mark.parametrize(("release", "gpu"), [("rocm5.2", "gfx90a"), ("rocm7.2", "gfx942")])
def test_amds_plugin_selects_the_variant_of_a_real_rocm_wheel(
    release: str,
    gpu: str,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    variant_env: None,
    installer_choice: Callable[[VariantsJson, str], list[str]],
) -> None:
    """The variant step on a real ROCm wheel (5.2: the session's Debian 12 build; 7.2: built in its sid root),
    then variantlib's installer path with rocm-bootstrap's plugin: chosen on a GPU it was built for, not on
    an RDNA3 card (gfx1100), where only the null variant is left."""
    if release == "rocm5.2":
        original = request.getfixturevalue("built_wheels")["rocm"]
    else:
        build: RootBuild = request.getfixturevalue("root_builds")["7.2"]
        if build.wheel is None:
            pytest.fail(f"the ROCm 7.2 wheel did not build in its root:\n{build.log[-5000:]}")
        original = build.wheel
    plain = tmp_path / original.name
    shutil.copyfile(original, plain)
    result = variant.make_variant_wheel(plain, _toolchain_of(plain), "auto", tmp_path)
    assert result.name.endswith(f"-{release}.whl")
    dist = _variant_json_of(result)
    assert dist.providers["amd"].plugin_api == AMD_PLUGIN
    assert installer_choice(dist, gpu) == [release, "null"]
    assert installer_choice(dist, "gfx1100") == ["null"]
    assert installer_choice(dist, f"gfx1100,{gpu}") == [release, "null"]  # any one of the machine's GPUs


@pytest.mark.slow
def test_custom_label_and_output_elsewhere(built_wheels: dict[str, Path], tmp_path: Path, variant_env: None) -> None:
    plain = tmp_path / built_wheels["cuda"].name
    shutil.copyfile(built_wheels["cuda"], plain)
    out = tmp_path / "out"
    out.mkdir()
    result = variant.make_variant_wheel(plain, _toolchain_of(plain), "cu13_hopper", out)
    assert result.parent == out and result.name.endswith("-cu13_hopper.whl")
    assert plain.exists()  # an input outside the output directory is left alone
    with zipfile.ZipFile(result) as zf:
        (name,) = [n for n in zf.namelist() if n.endswith("/variant.json")]
        assert VariantDistInfo(zf.read(name), expected_label="cu13_hopper").variant_label == "cu13_hopper"
    with pytest.raises(BuildError, match="not a plain"):
        variant.make_variant_wheel(result, _toolchain_of(plain), "auto", out)


@pytest.mark.slow
def test_uv_installs_the_null_variant(built_wheels: dict[str, Path], tmp_path: Path, variant_env: None) -> None:
    """uv's wheel-variants preview reads variant.json and installs the CPU null variant (offline: it needs
    no provider plugin); the installed distribution has the plain version and knows its variant."""
    uv = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    assert uv, "uv is in ci/requirements-test.txt"
    plain = tmp_path / built_wheels["cpu"].name
    shutil.copyfile(built_wheels["cpu"], plain)
    result = variant.make_variant_wheel(plain, CPU, "auto", tmp_path)
    venv = tmp_path / "venv"
    subprocess.run([uv, "venv", "-q", "-p", sys.executable, str(venv)], check=True, capture_output=True)
    python = venv / "bin" / "python"
    proc = subprocess.run(
        [uv, "pip", "install", "--offline", "--preview-features", "wheel-variants", "-p", str(python), str(result)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    check = "import importlib.metadata as m, monarch_runtime as r; print(m.version('monarch-runtime'), r.build_info()['variant']['label'])"
    out = subprocess.run([str(python), "-c", check], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [result.name.split("-")[1], "null"]
    assert "+" not in result.name


@pytest.mark.slow
def test_uv_chooses_the_cuda_variant_with_its_builtin_nvidia_provider(
    built_wheels: dict[str, Path], tmp_path: Path, variant_env: None
) -> None:
    """A release directory as an index serves it (the variant wheels plus the variants.json that
    `variantlib generate-index-json` writes for them): uv's wheel-variants preview has its own NVIDIA provider
    for nvidia_variant_provider.plugin:NvidiaVariantPlugin (PyPI has only a placeholder of the package), so it
    needs nothing installed; forced to a driver and a GPU, it picks cu13 where both suffice, else null."""
    uv = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    assert uv, "uv is in ci/requirements-test.txt"
    index = tmp_path / "index"
    index.mkdir()
    for flavour in FLAVOURS:
        plain = tmp_path / built_wheels[flavour].name
        shutil.copyfile(built_wheels[flavour], plain)
        variant.make_variant_wheel(plain, _toolchain_of(plain), "auto", index)
    generate = [str(Path(sys.executable).parent / "variantlib"), "generate-index-json", "-d", str(index)]
    subprocess.run(generate, check=True, capture_output=True)
    version = next(index.glob("*-null.whl")).name.split("-")[1]
    merged = VariantsJson(json.loads((index / f"{wheel.DIST}-{version}-variants.json").read_text()))
    assert sorted(merged.variants) == ["cu13", "null", "rocm5.2"]
    venv = tmp_path / "venv"
    subprocess.run([uv, "venv", "-q", "-p", sys.executable, str(venv)], check=True, capture_output=True)

    def chosen(driver: str, sm: str) -> str:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("NV_VARIANT_PROVIDER_", "ROCM_BOOTSTRAP_"))}
        env |= {"NV_VARIANT_PROVIDER_FORCE_CUDA_DRIVER_VERSION": driver, "NV_VARIANT_PROVIDER_FORCE_SM_ARCH": sm}
        install = [uv, "pip", "install", "--offline", "--no-index", "--find-links", str(index), "--no-deps"]
        install += ["--reinstall", "--preview-features", "wheel-variants", "-p", str(venv / "bin" / "python")]
        proc = subprocess.run(
            [*install, "monarch-runtime"],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        (info,) = venv.glob(f"lib/python*/site-packages/{wheel.PACKAGE}/build_info.json")
        label: str = json.loads(info.read_text())["variant"]["label"]
        return label

    assert chosen("13.5", "9.0") == "cu13"  # an H100 with a CUDA 13.5 driver
    assert chosen("13.6", "8.0") == "cu13"  # an A100, newer driver
    assert chosen("13.0", "9.0") == "null"  # the driver is older than the toolkit built with
    assert chosen("13.5", "7.5") == "null"  # a T4: no sm_75 code in the wheel


# --- validate_variant: the CUDA properties against the NVIDIA provider's value sets ---------------------

# A stand-in for nvidia-variant-provider 0.0.2, which cannot be installed from PyPI (PyPI has only the placeholder
# 0.0.0a0, with no plugin module): the same module path, plugin class and value sets as its get_all_configs(),
# so variantlib loads it through the provider entry of variant.json as it would load the real one. It checks
# that the CUDA properties are values of those lists; it is not NVIDIA's detection (it supports nothing).
_NVIDIA_STAND_IN = """
from dataclasses import dataclass

@dataclass(frozen=True)
class VariantFeatureConfig:
    name: str
    values: list
    multi_value: bool = False

class NvidiaVariantPlugin:
    namespace = "nvidia"
    is_build_plugin = False

    @classmethod
    def get_all_configs(cls):
        umd = [f"{M}.{m}" if m is not None else f"{M}" for M in range(15, 10, -1) for m in [*range(20, -1, -1), None]]
        sm = [f"{M}{m}_{kind}" for kind in ("real", "virtual") for M in range(12, 4, -1) for m in range(9, -1, -1)]
        return [
            VariantFeatureConfig("cuda_version_lower_bound", umd),
            VariantFeatureConfig("cuda_version_upper_bound", umd),
            VariantFeatureConfig("sm_arch", sm, multi_value=True),
        ]

    @classmethod
    def get_supported_configs(cls):
        return []
"""


@pytest.fixture
def nvidia_stand_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "providers" / "nvidia_variant_provider"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "plugin.py").write_text(_NVIDIA_STAND_IN)
    monkeypatch.setenv("PYTHONPATH", str(package.parent))


def test_cuda_variant_validates_against_the_nvidia_provider(nvidia_stand_in: None) -> None:
    label, _, text = variant.variant_dist_info(CUDA, "auto")
    dist = VariantDistInfo(text, expected_label=label)
    result = validate_variant(dist.variant_desc, dist)
    assert result.is_valid(), result
    assert set(result.results) == set(dist.variant_desc.properties)

    # and it can fail: an arch the provider does not know, or two CUDA lower bounds
    bad = VariantDescription(
        properties=[*dist.variant_desc.properties, VariantProperty("nvidia", "sm_arch", "300_real")]
    )
    assert not validate_variant(bad, dist).is_valid()
    twice = VariantDescription(
        properties=[*dist.variant_desc.properties, VariantProperty("nvidia", "cuda_version_lower_bound", "12.0")]
    )
    assert validate_variant(twice, dist).multi_value_violations


# --- the installer's choice: variantlib's resolver with the providers' plugins ----------------------------


@pytest.fixture
def fresh_plugin_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    """variantlib caches what the plugins answered per process, keyed by the call and not by the environment;
    each test (and each installer_choice) starts afresh, as each installer run would."""
    monkeypatch.setattr(plugin_loader, "VARIANT_PROVIDER_CACHE_TABLE", {})


@pytest.fixture
def installer_choice(
    monkeypatch: pytest.MonkeyPatch, fresh_plugin_answers: None
) -> Callable[[VariantsJson, str], list[str]]:
    """installer_choice(variants_json, gpus) -> the labels an installer would consider, best first, on a machine
    whose AMD GPUs are ``gpus`` (rocm-bootstrap's ROCM_BOOTSTRAP_FORCE_GFX_ARCH, comma-separated; "" for none):
    variantlib's get_variants_by_priority, which runs each provider named in variant.json in a subprocess."""

    def choose(variants_json: VariantsJson, gpus: str) -> list[str]:
        monkeypatch.delenv("ROCM_BOOTSTRAP_FORCE_GFX_ARCH", raising=False)
        monkeypatch.delenv("ROCM_BOOTSTRAP_DISABLE_DETECTION", raising=False)
        if gpus:
            monkeypatch.setenv("ROCM_BOOTSTRAP_FORCE_GFX_ARCH", gpus)
        else:  # this machine has none; detection off so the answer does not depend on the machine
            monkeypatch.setenv("ROCM_BOOTSTRAP_DISABLE_DETECTION", "1")
        monkeypatch.setattr(plugin_loader, "VARIANT_PROVIDER_CACHE_TABLE", {})
        chosen: list[Any] = get_variants_by_priority(variants_json=variants_json)
        return [str(vdesc.label) for vdesc in chosen]

    return choose


def _release(*toolchains: Toolchain) -> VariantsJson:
    """The index's {name}-{version}-variants.json for these builds' variant.json files, merged as
    `variantlib generate-index-json` merges them."""
    merged: VariantsJson | None = None
    for toolchain in toolchains:
        label, _, text = variant.variant_dist_info(toolchain, "auto")
        dist = VariantDistInfo(text, expected_label=label)
        if merged is None:
            merged = dist
        else:
            merged.merge(dist)
    assert merged is not None
    return merged


def test_installer_chooses_the_rocm_variant_with_amds_plugin(
    installer_choice: Callable[[VariantsJson, str], list[str]],
) -> None:
    """The acceptance test: with rocm-bootstrap's real plugin, forced to an MI300X (gfx942) the installer's
    choice includes the gfx90a/gfx942/gfx950 variant; forced to an RDNA3 card (gfx1100) it does not."""
    release = _release(CPU, ROCM72)
    assert installer_choice(release, "gfx942") == ["rocm7.2", "null"]
    assert installer_choice(release, "gfx950") == ["rocm7.2", "null"]
    assert installer_choice(release, "gfx1100") == ["null"]
    assert installer_choice(release, "") == ["null"]  # no AMD GPU at all
    # the old variant.json's extra property: a feature the plugin never reports, so never chosen
    old = VariantDescription(
        properties=[*release.variants["rocm7.2"].properties, VariantProperty("amd", "rocm_version", "7.2")],
        label="old",
    )
    release.variants["old"] = old
    assert installer_choice(release, "gfx942") == ["rocm7.2", "null"]


def test_installer_choice_across_a_whole_release(
    installer_choice: Callable[[VariantsJson, str], list[str]], nvidia_stand_in: None
) -> None:
    """Every variant of a release in one index (CUDA through the NVIDIA stand-in, which supports nothing
    here): the ROCm 5.2 variant (gfx90a only) is chosen on an MI200 but not on an MI300X; the 6.4 and 7.2
    variants have the same properties (the plugin reports no ROCm version), so an installer cannot tell them
    apart: both are offered (docs/wheels.md: one ROCm major per index)."""
    release = _release(CPU, CUDA, ROCM, ROCM64, ROCM72)
    on_mi300 = installer_choice(release, "gfx942")
    assert sorted(on_mi300[:2]) == ["rocm6.4", "rocm7.2"] and on_mi300[2:] == ["null"]
    on_mi200 = installer_choice(release, "gfx90a")
    assert sorted(on_mi200[:3]) == ["rocm5.2", "rocm6.4", "rocm7.2"] and on_mi200[3:] == ["null"]
    assert installer_choice(release, "gfx1100") == ["null"]


def test_null_variant_validates_without_any_provider() -> None:
    label, props, text = variant.variant_dist_info(CPU, "auto")
    assert (label, props) == ("null", [])
    dist = VariantDistInfo(text, expected_label="null")
    assert dist.variant_desc.is_null_variant()
    assert validate_variant(dist.variant_desc, dist).is_valid()


# --- end to end ---------------------------------------------------------------------------------------


@pytest.mark.slow
def test_pip_wheel_with_variant_auto(tmp_path: Path) -> None:
    """`pip wheel -C variant=auto` of the CPU flavour gives only the null-variant wheel. pip does not know
    variant wheel names yet and would reject the name it gets back, hence --no-verify (docs/wheels.md)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("CUDA_HOME", "CUDA_PATH", "ROCM_HOME", "ROCM_PATH") and not k.startswith("MONARCH_")
    }
    env["SOURCE_DATE_EPOCH"] = SOURCE_DATE_EPOCH
    out = tmp_path / "out"
    proc = pip_wheel(
        ROOT,
        out,
        env,
        "-v",
        "--no-verify",
        "-C",
        "platform=cpu",
        "-C",
        "variant=auto",
        "-C",
        f"build-dir={tmp_path / 'build'}",
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    wheels = sorted(p.name for p in out.iterdir())
    assert len(wheels) == 1 and wheels[0].endswith("-null.whl"), wheels
    assert "+cpu" not in wheels[0]
    assert "variant: done" in proc.stderr + proc.stdout
    with zipfile.ZipFile(out / wheels[0]) as zf:
        _check_record(zf)
        (name,) = [n for n in zf.namelist() if n.endswith(".dist-info/variant.json")]
        assert VariantDistInfo(zf.read(name), expected_label="null").variant_desc.is_null_variant()
