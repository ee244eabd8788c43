"""Each wheel check passes on a good synthetic wheel and fails on one broken in exactly its way."""

from __future__ import annotations

import dataclasses
import platform
import sys
from pathlib import Path

import pytest
from ci_wheels import ElfSpec, WheelFactory

from ci import smoke, validate
from ci.matrix import Matrix
from ci.validate import Expected, Finding

PY = f"{sys.version_info[0]}.{sys.version_info[1]}"


def expected(m: Matrix, flavour: str = "cpu", **over: object) -> Expected:
    exp = Expected.for_row(m.row(f"{flavour}-x86_64"), m)
    return dataclasses.replace(exp, **over) if over else exp  # type: ignore[arg-type]


def failed(findings: list[Finding], check: str | None = None) -> list[Finding]:
    return [f for f in findings if not f.ok and (check is None or f.check == check)]


@pytest.fixture(autouse=True)
def _x86_only() -> None:
    if platform.machine() != "x86_64":
        pytest.skip("synthetic wheels are tagged x86_64")


def test_good_cpu_wheel_passes_static_checks(make_wheel: WheelFactory, real_matrix: Matrix) -> None:
    wheel = make_wheel()
    findings = validate.static_checks(wheel, expected(real_matrix))
    assert not failed(findings), "\n".join(map(str, findings))
    checks = {f.check for f in findings}
    assert {"tag", "size", "rpath", "needed", "symbols", "glibc-ceiling", "build_info", "auditwheel"} <= checks


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        ({"local": "cu13"}, "version"),
        ({"py_tag": "cp311", "abi": "cp311"}, "python/abi"),
        ({"plat": "linux_x86_64"}, "platform tag"),
        ({"plat": "manylinux_2_17_aarch64"}, "platform tag"),
        ({"wheel_tag": "cp39-abi3-manylinux_2_28_x86_64"}, "WHEEL Tag"),
    ],
)
def test_tag_check_fails(make_wheel: WheelFactory, real_matrix: Matrix, spec: dict[str, str], needle: str) -> None:
    bad = failed(validate.check_tag(make_wheel(**spec), expected(real_matrix)), "tag")
    assert bad and any(needle in f.detail for f in bad), bad


def test_tag_check_rejects_non_wheels(tmp_path: Path, real_matrix: Matrix) -> None:
    junk = tmp_path / "monarch_runtime-0.1.0+cpu-cp39-abi3-manylinux_2_17_x86_64.whl"
    junk.write_bytes(b"not a zip")
    assert failed(validate.check_tag(junk, expected(real_matrix)))
    assert failed(validate.check_tag(tmp_path / "foo.tar.gz", expected(real_matrix)))


def test_size_budget(make_wheel: WheelFactory, real_matrix: Matrix) -> None:
    wheel = make_wheel(padding=300_000)
    assert not failed(validate.check_size(wheel, expected(real_matrix)))
    assert failed(validate.check_size(wheel, expected(real_matrix, size_budget_mib=0.25)))


def test_rpath_must_be_origin_relative(make_wheel: WheelFactory) -> None:
    ok = make_wheel(elves=[ElfSpec(rpath="$ORIGIN/../nvidia/nccl/lib")])
    assert not failed(validate.check_rpath(list(validate.iter_elves(ok))))
    leak = make_wheel(elves=[ElfSpec(rpath="/home/runner/work/monarch/target/release")])
    bad = failed(validate.check_rpath(list(validate.iter_elves(leak))))
    assert bad and "not $ORIGIN-relative" in bad[0].detail
    escape = make_wheel(elves=[ElfSpec(rpath="$ORIGIN/../../lib")])
    bad = failed(validate.check_rpath(list(validate.iter_elves(escape))))
    assert bad and "leaves site-packages" in bad[0].detail


def test_needed_must_be_allowed_and_never_libpython(make_wheel: WheelFactory, real_matrix: Matrix) -> None:
    exp = expected(real_matrix)
    wheel = make_wheel(elves=[ElfSpec(libs=["libmystery.so.1"])])
    bad = failed(validate.check_symbols(list(validate.iter_elves(wheel)), exp), "needed")
    assert bad and "libmystery.so.1" in bad[0].detail
    wheel = make_wheel(elves=[ElfSpec(libs=["libpython3.11.so.1.0"])])
    bad = failed(validate.check_symbols(list(validate.iter_elves(wheel)), exp), "needed")
    assert bad and "abi3" in bad[0].detail
    # The CUDA flavour may need libnccl.so.2 (from the nvidia-nccl-cu13 wheel); the CPU one may not.
    nccl = make_wheel(elves=[ElfSpec(libs=["libnccl.so.2"], rpath="$ORIGIN/../nvidia/nccl/lib")])
    elves = list(validate.iter_elves(nccl))
    assert not failed(validate.check_symbols(elves, expected(real_matrix, "cuda13")), "needed")
    assert failed(validate.check_symbols(elves, exp), "needed")


def test_undefined_symbols(make_wheel: WheelFactory, real_matrix: Matrix) -> None:
    exp = expected(real_matrix)
    uses_python = ElfSpec(source="int PyLong_FromLong(long); int f(void) { return PyLong_FromLong(1); }\n")
    uses_libc = ElfSpec(source="#include <string.h>\nunsigned long f(const char *s) { return strlen(s); }\n")
    for spec in (uses_python, uses_libc):
        elves = list(validate.iter_elves(make_wheel(elves=[spec])))
        assert not failed(validate.check_symbols(elves, exp)), spec.source
    stray = ElfSpec(source="int mystery_fn(void); int f(void) { return mystery_fn(); }\n")
    bad = failed(validate.check_symbols(list(validate.iter_elves(make_wheel(elves=[stray]))), exp), "symbols")
    assert bad and "mystery_fn" in bad[0].detail
    # Defined by another ELF of the same wheel: fine.
    provider = ElfSpec(source="int mystery_fn(void) { return 1; }\n", name="libprovider.so")
    elves = list(validate.iter_elves(make_wheel(elves=[stray, provider])))
    assert not failed(validate.check_symbols(elves, exp), "symbols")
    # A CUDA symbol is expected in the CUDA flavour only.
    cuda = ElfSpec(source="int cuInit(unsigned); int f(void) { return cuInit(0); }\n")
    elves = list(validate.iter_elves(make_wheel(elves=[cuda])))
    assert not failed(validate.check_symbols(elves, expected(real_matrix, "cuda13")), "symbols")
    assert failed(validate.check_symbols(elves, exp), "symbols")


def test_wheel_without_native_code_fails(make_wheel: WheelFactory, real_matrix: Matrix) -> None:
    findings = validate.static_checks(make_wheel(elves=[]), expected(real_matrix), audit=False)
    assert any("no ELF" in f.detail for f in failed(findings))


def test_auditwheel_judgement(make_wheel: WheelFactory, real_matrix: Matrix) -> None:
    wheel = make_wheel()  # tagged manylinux_2_17
    exp = expected(real_matrix)
    good = {"pure": False, "sym_tag": "manylinux_2_5_x86_64", "external_libs": {}}
    assert not failed(validate.check_auditwheel(wheel, exp, good))
    too_new = {**good, "sym_tag": "manylinux_2_28_x86_64"}  # claims 2.17, needs 2.28: torchmonarch's bug
    assert failed(validate.check_auditwheel(wheel, exp, too_new))
    stray = {**good, "external_libs": {"libnccl.so.2": None}}
    assert failed(validate.check_auditwheel(wheel, exp, stray))
    assert not failed(validate.check_auditwheel(wheel, expected(real_matrix, "cuda13"), stray))
    assert failed(validate.check_auditwheel(wheel, exp, {**good, "pure": True}))


def test_auditwheel_runs_for_real(make_wheel: WheelFactory, real_matrix: Matrix) -> None:
    wheel = make_wheel(elves=[ElfSpec(libs=["libmystery.so.1"])])
    findings = validate.check_auditwheel(wheel, expected(real_matrix))
    assert any("libmystery.so.1" in f.detail for f in failed(findings)), findings


def test_build_info_file(make_wheel: WheelFactory, real_matrix: Matrix) -> None:
    exp = expected(real_matrix, "cuda13")
    good = make_wheel(flavour="cuda13", local="cu13")
    assert not failed(validate.check_build_info_file(good, exp))
    wrong_archs = make_wheel(
        flavour="cuda13",
        local="cu13",
        build_info={"platform": "cuda", "archs": ["75"], "toolkit_version": "13.0", "collective": "nccl"},
    )
    bad = failed(validate.check_build_info_file(wrong_archs, exp))
    assert [f for f in bad if "archs" in f.detail]
    # --archs, as for the build: the expectation follows it.
    assert not failed(validate.check_build_info_file(wrong_archs, dataclasses.replace(exp, archs=("75",))))
    wrong_platform = make_wheel(flavour="cpu", local="cu13")
    assert failed(validate.check_build_info_file(wrong_platform, exp))


def test_smoke_import_in_fresh_venv(make_wheel: WheelFactory, real_matrix: Matrix) -> None:
    exp = expected(real_matrix)
    good = smoke.smoke(make_wheel(), exp, PY, sys.executable)
    assert good and not failed(good), good
    broken = smoke.smoke(make_wheel(init_extra="raise ImportError('no native module')"), exp, PY, sys.executable)
    assert any("import failed" in f.detail for f in failed(broken))
    lying = make_wheel(
        runtime_build_info={"platform": "cuda", "archs": [], "toolkit_version": None, "collective": None}
    )
    bad = failed(smoke.smoke(lying, exp, PY, sys.executable))
    assert bad and "platform" in bad[0].detail


def test_missing_python_is_reported(make_wheel: WheelFactory, real_matrix: Matrix) -> None:
    wheel = make_wheel()
    exp = expected(real_matrix)
    findings = smoke.smoke_many(wheel, exp, ["2.1", PY], require_all=False)
    assert not failed(findings) and any("skipped python 2.1" in f.detail for f in findings)
    findings = smoke.smoke_many(wheel, exp, ["2.1", PY], require_all=True)
    assert failed(findings, "pythons")


def test_tag_may_not_claim_an_older_glibc_than_the_symbols_need(make_wheel: WheelFactory, real_matrix: Matrix) -> None:
    """The torchmonarch bug: tagged manylinux2014 (glibc 2.17) while it needs a newer glibc."""
    src = (
        "#include <pthread.h>\n"
        "static void *run(void *a) { return a; }\n"
        "int f(void) { pthread_t t; return pthread_create(&t, 0, run, 0); }\n"
    )
    elves = [ElfSpec(source=src, extra=["-pthread"])]
    wheel = make_wheel(elves=elves)  # tagged manylinux_2_17
    needed = validate.glibc_needed(list(validate.iter_elves(wheel)))
    if needed <= (2, 17):
        pytest.skip(f"this glibc gives pthread_create the version {needed}")
    bad = failed(validate.static_checks(wheel, expected(real_matrix)), "auditwheel")
    assert bad and "tag claims glibc 2.17" in bad[0].detail
    newer = make_wheel(elves=elves, plat=f"manylinux_{needed[0]}_{needed[1]}_x86_64")
    assert not failed(validate.static_checks(newer, expected(real_matrix)), "auditwheel")


# --- the glibc ceiling -------------------------------------------------------------------------------

ROCM72 = "monarch_runtime-0.1.0+rocm7.2-cp39-abi3-{plat}.whl"


def _elf(*undefined: tuple[str, str | None, str | None]) -> validate.ElfInfo:
    return validate.ElfInfo(
        path="monarch_runtime/_native.abi3.so",
        soname=None,
        needed=("libc.so.6", "libstdc++.so.6"),
        rpaths=(),
        defined=frozenset(),
        undefined=tuple(undefined),
    )


AT_THE_CEILING = (
    ("memcpy", "GLIBC_2.14", "libc.so.6"),
    ("__libc_start_main", "GLIBC_2.34", "libc.so.6"),
    ("_ZSt4cout", "GLIBCXX_3.4.29", "libstdc++.so.6"),
    ("_ZTVN10__cxxabiv117__class_type_infoE", "CXXABI_1.3", "libstdc++.so.6"),
    ("hipMalloc", "hip_4.2", "libamdhip64.so.7"),
)


def test_glibc_ceiling_on_a_synthesized_symbol_list(real_matrix: Matrix) -> None:
    """rocm7.2's ceiling is GLIBC_2.34 / GLIBCXX_3.4.29: sid's __isoc23_strtol (2.38) or a GCC 13 libstdc++
    symbol must fail, naming the symbol; so must a tag above manylinux_2_34."""
    exp = expected(real_matrix, "rocm7.2")
    assert (exp.glibc_max, exp.glibcxx_max) == ((2, 34), (3, 4, 29))
    name = ROCM72.format(plat="manylinux_2_34_x86_64")
    ok = validate.check_glibc_ceiling(name, [_elf(*AT_THE_CEILING)], exp)
    assert ok and not failed(ok), ok
    assert any("newest GLIBC_2.34" in f.detail for f in ok)
    isoc23 = _elf(*AT_THE_CEILING, ("__isoc23_strtol", "GLIBC_2.38", "libc.so.6"))
    bad = failed(validate.check_glibc_ceiling(name, [isoc23], exp), "glibc-ceiling")
    assert len(bad) == 1 and "__isoc23_strtol@GLIBC_2.38" in bad[0].detail and "ceiling GLIBC_2.34" in bad[0].detail
    cxx = _elf(
        *AT_THE_CEILING, ("_ZNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEE6resizeEm", "GLIBCXX_3.4.30", None)
    )
    bad = failed(validate.check_glibc_ceiling(name, [cxx], exp), "glibc-ceiling")
    assert len(bad) == 1 and "GLIBCXX_3.4.30" in bad[0].detail and "ceiling GLIBCXX_3.4.29" in bad[0].detail
    # GLIBC_2.34.1 style versions compare as versions, not strings (2.4 < 2.34).
    old = _elf(("stat", "GLIBC_2.4", "libc.so.6"), ("f", "GLIBC_2.2.5", "libc.so.6"))
    assert not failed(validate.check_glibc_ceiling(name, [old], exp))
    # The tag is part of the promise: manylinux_2_38 does not install on a glibc 2.34 system.
    too_new_tag = validate.check_glibc_ceiling(
        ROCM72.format(plat="manylinux_2_38_x86_64"), [_elf(*AT_THE_CEILING)], exp
    )
    bad = failed(too_new_tag, "glibc-ceiling")
    assert len(bad) == 1 and "tag claims glibc 2.38" in bad[0].detail
    compressed = ROCM72.format(plat="manylinux_2_17_x86_64.manylinux2014_x86_64")
    assert not failed(validate.check_glibc_ceiling(compressed, [_elf(*AT_THE_CEILING)], exp))


def test_glibc_ceiling_on_a_real_elf(make_wheel: WheelFactory, real_matrix: Matrix) -> None:
    """A compiled library and the whole static validation: a ceiling one glibc below what it needs fails."""
    src = (
        "#include <pthread.h>\n"
        "static void *run(void *a) { return a; }\n"
        "int f(void) { pthread_t t; return pthread_create(&t, 0, run, 0); }\n"
    )
    wheel = make_wheel(elves=[ElfSpec(source=src, extra=["-pthread"])])
    needed = validate.glibc_needed(list(validate.iter_elves(wheel)))
    if needed <= (2, 17):
        pytest.skip(f"this glibc gives pthread_create the version {needed}")
    at = expected(real_matrix, glibc_max=needed)
    assert not failed(validate.static_checks(wheel, at, audit=False), "glibc-ceiling")
    below = expected(real_matrix, glibc_max=(needed[0], needed[1] - 1))
    bad = failed(validate.static_checks(wheel, below, audit=False), "glibc-ceiling")
    assert bad and "pthread_create@GLIBC_" in bad[0].detail
