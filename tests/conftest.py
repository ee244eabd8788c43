"""Shared fixtures. Wheels are expensive (tens of seconds each on 2 cores), so every flavour is built
once per session, all three in parallel, and shared by every test that needs one."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from _roots import ROCM_ROOT_VERSIONS, RootBuild, build_in_root, make_amd_layout, require_root
from _support import (
    FLAVOURS,
    ROOT,
    SOURCE_DATE_EPOCH,
    TOOLCHAINS,
    WHEEL_FIXTURES,
    BuildOutcome,
    InstalledWheel,
    Toolchains,
    copy_tree,
    make_venv,
    pip_wheel,
    temp_env,
    unmarked_wheel_tests,
)


@pytest.fixture(scope="session")
def toolchains() -> Toolchains:
    tc = Toolchains(
        cuda_home=TOOLCHAINS / "cuda-home",
        nccl_home=TOOLCHAINS / "nccl-home",
        rccl_home=TOOLCHAINS / "rccl" / "usr",
        rocm_home=Path(os.environ.get("MONARCH_TEST_ROCM", "/usr")),
    )
    missing = [
        p
        for p in (
            tc.cuda_home / "bin" / "nvcc",
            tc.rccl_home / "include" / "rccl" / "rccl.h",
            tc.rocm_home / "include" / "hip" / "hip_version.h",
        )
        if not p.exists()
    ]
    if missing:
        pytest.skip(f"toolchains not installed (run ci/install-toolchains.sh): missing {missing}")
    return tc


@pytest.fixture(scope="session")
def sdist_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project's sdist, built by the backend and unpacked: the wheels below are built from it."""
    out = tmp_path_factory.mktemp("sdist")
    proc = subprocess.run(
        [sys.executable, "-c", "import build_backend, sys; print(build_backend.build_sdist(sys.argv[1]))", str(out)],
        cwd=ROOT,
        env={**os.environ, "SOURCE_DATE_EPOCH": SOURCE_DATE_EPOCH},
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    sdist = out / proc.stdout.strip().splitlines()[-1]
    with tarfile.open(sdist) as tar:
        tar.extractall(out / "unpacked", filter="data")
    (tree,) = (out / "unpacked").iterdir()
    return tree


def _build(source: Path, out: Path, build_dir: Path, env: dict[str, str]) -> BuildOutcome:
    """pip wheel into ``out``, with a fresh empty TMPDIR of its own (beside ``out``), which the tests check
    is left empty."""
    out.mkdir(parents=True)
    tmpdir = out.parent / f"tmp-{out.name}"
    env = {**env, **temp_env(tmpdir), "SOURCE_DATE_EPOCH": SOURCE_DATE_EPOCH}
    proc = pip_wheel(source, out, env, "-v", "-C", f"build-dir={build_dir}")
    wheels = sorted(out.glob("*.whl"))
    wheel = wheels[0] if proc.returncode == 0 and len(wheels) == 1 else None
    return BuildOutcome(wheel, proc.stdout + proc.stderr, tmpdir, build_dir)


@pytest.fixture(scope="session")
def hostile_paths(tmp_path_factory: pytest.TempPathFactory, toolchains: Toolchains) -> tuple[Path, Toolchains]:
    """A copy of this checkout, and the toolkits, reached through paths with spaces and non-ASCII letters."""
    base = tmp_path_factory.mktemp("hostile") / "dir with spaces ü"
    tree = copy_tree(base / "src tree ä")
    links = {}
    for name, target in (
        ("cuda home ü", toolchains.cuda_home),
        ("rocm root ü", toolchains.rocm_home),
        ("rccl home ü", toolchains.rccl_home),
    ):
        (base / name).symlink_to(target.resolve(), target_is_directory=True)
        links[name] = base / name
    odd = Toolchains(
        cuda_home=links["cuda home ü"],
        nccl_home=toolchains.nccl_home,
        rccl_home=links["rccl home ü"],
        rocm_home=links["rocm root ü"],
    )
    return tree, odd


@pytest.fixture(scope="session")
def all_builds(
    tmp_path_factory: pytest.TempPathFactory,
    toolchains: Toolchains,
    sdist_tree: Path,
    hostile_paths: tuple[Path, Toolchains],
) -> dict[tuple[str, str], BuildOutcome]:
    """Every flavour built twice, all in parallel: ("sdist", f) from the unpacked sdist, and ("checkout", f)
    from a copy of this checkout under a path with spaces and non-ASCII letters, with the toolkits behind
    such paths too, into build directories named likewise. Each pair must be byte-identical."""
    base = tmp_path_factory.mktemp("wheels")
    odd_tree, odd_toolchains = hostile_paths
    jobs = [(origin, f) for origin in ("sdist", "checkout") for f in FLAVOURS]

    def build(job: tuple[str, str]) -> BuildOutcome:
        origin, flavour = job
        if origin == "sdist":
            return _build(
                sdist_tree, base / origin / flavour, base / f"build-sdist-{flavour}", toolchains.env_for(flavour)
            )
        return _build(
            odd_tree,
            base / origin / flavour,
            odd_tree.parent / f"build dir ü {flavour}",
            odd_toolchains.env_for(flavour),
        )

    with ThreadPoolExecutor(max_workers=3) as pool:
        return dict(zip(jobs, pool.map(build, jobs)))


@pytest.fixture(scope="session")
def build_outcomes(all_builds: dict[tuple[str, str], BuildOutcome]) -> dict[str, BuildOutcome]:
    return {flavour: all_builds[("sdist", flavour)] for flavour in FLAVOURS}


@pytest.fixture(scope="session")
def built_wheels(build_outcomes: dict[str, BuildOutcome]) -> dict[str, Path]:
    """The three wheels, built from this tree; fails (with the build log) if any build failed."""
    failed = {f: o.log[-4000:] for f, o in build_outcomes.items() if o.wheel is None}
    if failed:
        pytest.fail("wheel builds failed:\n" + "\n\n".join(f"--- {f} ---\n{log}" for f, log in failed.items()))
    return {f: o.wheel for f, o in build_outcomes.items() if o.wheel is not None}


@pytest.fixture(scope="session")
def installed(built_wheels: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, InstalledWheel]:
    """Each wheel installed into its own fresh venv (pip from the test venv installs into it)."""
    base = tmp_path_factory.mktemp("venvs")

    def install(flavour: str) -> InstalledWheel:
        python = make_venv(base / flavour)
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", str(built_wheels[flavour])],
            capture_output=True,
            text=True,
            check=False,
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        site = subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['platlib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        return InstalledWheel(python, Path(site), built_wheels[flavour])

    with ThreadPoolExecutor(max_workers=3) as pool:
        return dict(zip(FLAVOURS, pool.map(install, FLAVOURS)))


@pytest.fixture(scope="session")
def root_builds(tmp_path_factory: pytest.TempPathFactory, sdist_tree: Path) -> dict[str, RootBuild]:
    """The current-ROCm wheels, each built inside its Debian sid root (ci/rocm-root.sh), all in parallel:
    "7.2" and "6.4" from the unpacked sdist with ROCM_HOME=/usr (Debian's layout), and "7.2-amd": the 7.2
    wheel again, from a copy of that tree elsewhere, into another build directory, with ROCM_PATH at an
    AMD-style /opt/rocm made of links into the root. "7.2" and "7.2-amd" must be byte-identical."""
    for version in ROCM_ROOT_VERSIONS:
        require_root(version)
    base = tmp_path_factory.getbasetemp()  # bound into the roots: every path below is the same inside
    work = tmp_path_factory.mktemp("root-wheels")
    amd_tree = work / "elsewhere" / "src"
    shutil.copytree(sdist_tree, amd_tree, symlinks=True)
    amd_rocm = make_amd_layout("7.2", work / "amd")
    jobs = {
        "7.2": ("7.2", sdist_tree, {"ROCM_HOME": "/usr"}),
        "6.4": ("6.4", sdist_tree, {"ROCM_HOME": "/usr"}),
        "7.2-amd": ("7.2", amd_tree, {"ROCM_PATH": str(amd_rocm)}),
    }

    def build(name: str) -> RootBuild:
        version, source, rocm = jobs[name]
        return build_in_root(version, source, work / f"out-{name}", work / f"build-{name}", [base], rocm)

    with ThreadPoolExecutor(max_workers=3) as pool:
        return dict(zip(jobs, pool.map(build, jobs)))


@pytest.fixture
def clean_env() -> Iterator[dict[str, str]]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("CUDA_HOME", "CUDA_PATH", "ROCM_HOME", "ROCM_PATH") and not k.startswith("MONARCH_")
    }
    yield env


class FaultTally:
    """Counts the tests marked `fault` (bad inputs and injected faults) and how many behaved as stated."""

    def __init__(self) -> None:
        self.tried = 0
        self.behaved = 0

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if "fault" not in report.keywords:
            return
        if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
            if report.skipped:
                return
            self.tried += 1
            self.behaved += int(report.passed)

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.tried:
            terminalreporter.write_line(f"faults and bad inputs: {self.tried} tried, {self.behaved} behaved as stated")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    unmarked = unmarked_wheel_tests(items)
    if unmarked:
        raise pytest.UsageError(
            "these tests build a wheel (through "
            + " or ".join(sorted(WHEEL_FIXTURES))
            + ") but are not marked slow; add @pytest.mark.slow:\n  "
            + "\n  ".join(unmarked)
        )


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(FaultTally(), "monarch-fault-tally")
