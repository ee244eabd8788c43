"""Build one row's wheel with the project's PEP 517 backend, through pip, as the workflow does."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

from ci import proc, pythons, toolchains
from ci.errors import CIError
from ci.matrix import REPO_ROOT, Matrix, Row


def build_argv(python: str, row: Row, outdir: Path, archs: Sequence[str], isolation: bool) -> list[str]:
    argv = [
        python,
        "-m",
        "pip",
        "wheel",
        str(REPO_ROOT),
        "--no-deps",
        "-w",
        str(outdir),
        "-C",
        f"platform={row.flavour.platform}",
    ]
    if archs:
        argv += ["-C", f"archs={';'.join(archs)}"]
    if not isolation:
        argv.append("--no-build-isolation")
    return argv


def build(
    row: Row,
    matrix: Matrix,
    outdir: Path,
    *,
    archs: Sequence[str] | None = None,
    python: str | None = None,
    isolation: bool = True,
) -> Path:
    """Build the row's wheel into outdir (which must not already hold a wheel); return its path."""
    ready = toolchains.check(row, matrix)
    blocking = [m for m in ready.missing if not m.startswith("no python") or python is None]
    if blocking:
        raise CIError(f"row {row.name} cannot be built on this machine: {'; '.join(blocking)}.")
    exe = python or pythons.find(matrix.build_python)
    if exe is None:
        raise CIError(f"no python{matrix.build_python} to build with; pass --build-python.")
    outdir.mkdir(parents=True, exist_ok=True)
    before = set(outdir.glob("*.whl"))
    if before:
        raise CIError(f"{outdir} already holds {', '.join(p.name for p in sorted(before))}: use an empty directory.")
    env = toolchains.build_env(row, matrix)
    for key, value in sorted(env.items()):
        proc.log(f"env {key}={value}")
    start = time.monotonic()
    proc.run(
        build_argv(exe, row, outdir, row.flavour.archs if archs is None else archs, isolation),
        env=env,
        cwd=REPO_ROOT,
        what=f"building the {row.name} wheel",
    )
    wheels = sorted(set(outdir.glob("*.whl")) - before)
    if len(wheels) != 1:
        raise CIError(f"the build wrote {len(wheels)} wheels into {outdir}, expected exactly one.", exit_code=1)
    proc.log(f"built {wheels[0].name} in {time.monotonic() - start:.0f} s")
    if row.flavour.repair:
        return repair(wheels[0], row.flavour.repair, outdir)
    return wheels[0]


def repair(wheel: Path, template: Sequence[str], outdir: Path) -> Path:
    """Run the flavour's repair argv ({wheel}, {outdir} substituted); it replaces the built wheel."""
    repaired_dir = outdir / "repaired"
    repaired_dir.mkdir()
    argv = [a.replace("{wheel}", str(wheel)).replace("{outdir}", str(repaired_dir)) for a in template]
    proc.run(argv, what=f"repairing {wheel.name}")
    repaired = sorted(repaired_dir.glob("*.whl"))
    if len(repaired) != 1:
        raise CIError(f"the repair command wrote {len(repaired)} wheels, expected exactly one.", exit_code=1)
    wheel.unlink()
    final = outdir / repaired[0].name
    repaired[0].replace(final)
    repaired_dir.rmdir()
    proc.log(f"repaired into {final.name}")
    return final
