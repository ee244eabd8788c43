"""Build one row's wheel with the project's PEP 517 backend, through pip, as the workflow does."""

from __future__ import annotations

import hashlib
import os
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import tomllib

from ci import proc, pythons, roots, toolchains
from ci.errors import CIError
from ci.matrix import REPO_ROOT, Matrix, Row, default_toolchains_dir

# How the build python gets the backend's build requirements:
#   "venv":   a venv made from the build python, with [build-system].requires installed (cached under
#             the toolchains directory, keyed by python and requirements), then pip --no-build-isolation;
#             the workflow's mode and the default;
#   "pip":    pip's own build isolation (plain `pip wheel .`, what a user with an sdist gets);
#   "none":   the given interpreter as it is (--no-build-isolation: its packages must be there).
MODES = ("venv", "pip", "none")


def build_argv(
    python: str,
    row: Row,
    outdir: Path,
    archs: Sequence[str],
    *,
    isolation: bool,
    build_dir: Path | None = None,
    launcher: str | None = None,
) -> list[str]:
    # --config-settings, not -C: the build python's bundled pip may predate -C (pip 23.1).
    argv = [python, "-m", "pip", "wheel", str(REPO_ROOT), "--no-deps", "-w", str(outdir)]
    argv += ["--config-settings", f"platform={row.flavour.platform}"]
    if archs:
        argv += ["--config-settings", f"archs={';'.join(archs)}"]
    if build_dir is not None:
        argv += ["--config-settings", f"build-dir={build_dir.resolve()}"]
    if launcher is not None:
        argv += ["--config-settings", f"compiler-launcher={launcher}"]
    if not isolation:
        argv.append("--no-build-isolation")
    return argv


def build_requires() -> list[str]:
    try:
        data = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as err:
        raise CIError(f"cannot read [build-system] from pyproject.toml: {err}.") from None
    requires = data.get("build-system", {}).get("requires", [])
    if not isinstance(requires, list) or not all(isinstance(r, str) for r in requires):
        raise CIError("pyproject.toml: [build-system].requires must be a list of strings.")
    return list(requires)


def build_venv(python: str, toolchains_dir: Path | None = None) -> str:
    """A venv of `python` holding the build requirements, reused while they do not change."""
    requires = build_requires()
    version = subprocess.run(
        [python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"], capture_output=True, text=True, check=False
    ).stdout.strip()
    if not version:
        raise CIError(f"{python} is not a working Python interpreter.")
    key = hashlib.sha256("\n".join([python, version, *requires]).encode()).hexdigest()[:12]
    venv = (toolchains_dir or default_toolchains_dir()) / f"ci-build-venv-{version}-{key}"
    vpy = venv / "bin" / "python"
    stamp = venv / ".ci-complete"
    if not stamp.exists():
        proc.run([python, "-m", "venv", "--clear", str(venv)], what="creating the build venv")
        proc.run(
            [str(vpy), "-m", "pip", "install", "--quiet", "--upgrade", "pip", *requires],
            what="installing the build requirements",
        )
        stamp.write_text("\n".join(requires) + "\n", encoding="utf-8")
    return str(vpy)


def build(
    row: Row,
    matrix: Matrix,
    outdir: Path,
    *,
    archs: Sequence[str] | None = None,
    python: str | None = None,
    mode: str | None = None,
    build_dir: Path | None = None,
    toolchains_dir: Path | None = None,
) -> Path:
    """Build the row's wheel into outdir (which must not already hold a wheel); return its path.

    A root row (its toolchain is a ci/rocm-root.sh root) builds inside the root, with the root's
    /opt/monarch/venv python and --no-build-isolation: --build-python and --build-mode pip do not apply."""
    if mode is not None and mode not in MODES:
        raise CIError(f"unknown build mode {mode!r} (one of {', '.join(MODES)}).")
    tc_dir = toolchains_dir or default_toolchains_dir()
    ready = toolchains.check(row, matrix, tc_dir)
    blocking = [m for m in ready.missing if not m.startswith("no python") or python is None]
    if blocking:
        raise CIError(f"row {row.name} cannot be built on this machine: {'; '.join(blocking)}.")
    if row.in_root and (python is not None or mode == "pip"):
        given = "--build-python" if python is not None else "--build-mode pip"
        raise CIError(
            f"row {row.name} builds inside its ROCm root with the root's {roots.ROOT_BUILD_PYTHON} and "
            f"--no-build-isolation; {given} does not apply to it (leave it out)."
        )
    outdir.mkdir(parents=True, exist_ok=True)
    before = set(outdir.glob("*.whl"))
    if before:
        raise CIError(f"{outdir} already holds {', '.join(p.name for p in sorted(before))}: use an empty directory.")
    chosen_archs = row.flavour.archs if archs is None else archs
    if row.in_root:
        bdir = (build_dir or roots.default_build_dir(row)).resolve()
        out = outdir.resolve()
        root_cache = roots.cache_in_root(matrix.compiler_cache, os.environ, row, matrix, tc_dir)
        argv = build_argv(
            roots.ROOT_BUILD_PYTHON,
            row,
            out,
            chosen_archs,
            isolation=False,
            build_dir=bdir,
            launcher=root_cache.launcher if root_cache else None,
        )
        wheel = roots.build(row, matrix, argv, outdir=out, build_dir=bdir, tc_dir=tc_dir, cache=root_cache)
        return repair(wheel, row.flavour.repair, outdir) if row.flavour.repair else wheel
    mode = mode or "venv"
    exe = python or pythons.find(matrix.build_python)
    if exe is None:
        raise CIError(f"no python{matrix.build_python} to build with; pass --build-python.")
    env = toolchains.build_env(row, matrix, tc_dir)
    cache = toolchains.compiler_cache(matrix.compiler_cache)
    if cache is not None:
        env.update(cache.env)
    for key, value in sorted(env.items()):
        proc.log(f"env {key}={value}")
    if mode == "venv":
        exe = build_venv(exe)
    start = time.monotonic()
    proc.run(
        build_argv(
            exe,
            row,
            outdir,
            chosen_archs,
            isolation=mode == "pip",
            build_dir=build_dir,
            launcher=cache.launcher if cache else None,
        ),
        env=env,
        cwd=REPO_ROOT,
        what=f"building the {row.name} wheel",
    )
    if cache is not None:
        proc.run(cache.stats, env=env, check=False, what=f"{cache.launcher}'s statistics")
    wheels = sorted(set(outdir.glob("*.whl")) - before)
    if len(wheels) != 1:
        raise CIError(f"the build wrote {len(wheels)} wheels into {outdir}, expected exactly one.", exit_code=1)
    proc.log(f"built {wheels[0].name} in {time.monotonic() - start:.0f} s")
    if row.flavour.repair:
        return repair(wheels[0], row.flavour.repair, outdir)
    return wheels[0]


def repair(wheel: Path, template: Sequence[str], outdir: Path) -> Path:
    """Run the flavour's repair argv ({wheel}, {outdir} substituted) and return the repaired wheel in outdir.

    A built wheel that lives in outdir is replaced by its repaired copy; any other wheel is left alone.
    """
    with tempfile.TemporaryDirectory(prefix="ci-repair-", dir=outdir) as tmp:
        argv = [a.replace("{wheel}", str(wheel)).replace("{outdir}", tmp) for a in template]
        proc.run(argv, what=f"repairing {wheel.name}")
        repaired = sorted(Path(tmp).glob("*.whl"))
        if len(repaired) != 1:
            raise CIError(f"the repair command wrote {len(repaired)} wheels, expected exactly one.", exit_code=1)
        if wheel.parent.resolve() == outdir.resolve():
            wheel.unlink()
        final = outdir / repaired[0].name
        repaired[0].replace(final)
    proc.log(f"repaired into {final.name}")
    return final
