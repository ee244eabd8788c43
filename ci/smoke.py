"""Install a wheel into a fresh venv of a given python, import it, and compare build_info() with the row."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path

from ci import proc, pythons
from ci.errors import CIError
from ci.validate import Expected, Finding, compare_build_info

IMPORT_SNIPPET = (
    "import json, sys, {pkg} as m\n"
    "info = m.build_info()\n"
    "py = '%d.%d' % sys.version_info[:2]\n"
    "print(json.dumps({{'build_info': info, 'file': m.__file__, 'python': py}}))\n"
)


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env["PATH"] = proc.tool_path()
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def smoke(wheel: Path, exp: Expected, python: str, interpreter: str | None = None) -> list[Finding]:
    """One fresh venv with `python` (MAJOR.MINOR): install the wheel with its dependencies, import, check."""
    exe = interpreter or pythons.find(python)
    if exe is None:
        return [Finding(f"import py{python}", False, f"no python{python} interpreter found")]
    with tempfile.TemporaryDirectory(prefix=f"ci-smoke-{python}-") as tmp:
        venv = Path(tmp) / "venv"
        vpy = venv / "bin" / "python"
        env = _clean_env()
        uv = proc.which("uv")
        if uv:
            steps = [
                [uv, "venv", "--quiet", "--python", exe, str(venv)],
                [uv, "pip", "install", "--quiet", "--python", str(vpy), str(wheel.resolve())],
            ]
        else:
            steps = [
                [exe, "-m", "venv", str(venv)],
                [str(vpy), "-m", "pip", "install", "--quiet", str(wheel.resolve())],
            ]
        for argv in steps:
            proc.log("$ " + " ".join(argv))
            res = subprocess.run(argv, env=env, cwd=tmp, capture_output=True, text=True, check=False)
            if res.returncode != 0:
                tail = " | ".join((res.stdout + res.stderr).strip().splitlines()[-6:])
                return [Finding(f"import py{python}", False, f"{Path(argv[0]).name} failed: {tail}")]
        argv = [str(vpy), "-I", "-c", IMPORT_SNIPPET.format(pkg=exp.package)]
        proc.log(f"$ {vpy} -I -c 'import {exp.package} as m; print(m.build_info())'")
        res = subprocess.run(argv, env=env, cwd=tmp, capture_output=True, text=True, check=False)
        if res.returncode != 0:
            tail = " | ".join(res.stderr.strip().splitlines()[-6:])
            return [Finding(f"import py{python}", False, f"import failed: {tail}")]
        try:
            out = json.loads(res.stdout.strip().splitlines()[-1])
        except (json.JSONDecodeError, IndexError):
            return [Finding(f"import py{python}", False, f"unexpected output: {res.stdout[-300:]!r}")]
        findings = [
            Finding(
                f"import py{python}",
                out.get("python") == python and str(out.get("file", "")).startswith(tmp),
                f"imported {out.get('file')} on python {out.get('python')}",
            )
        ]
        info = out.get("build_info")
        if not isinstance(info, dict):
            return [*findings, Finding("build_info", False, f"build_info() returned {type(info).__name__}")]
        return findings + compare_build_info(info, exp, f"build_info() on py{python}")


def smoke_many(wheel: Path, exp: Expected, versions: list[str], require_all: bool) -> list[Finding]:
    findings: list[Finding] = []
    missing: list[str] = []
    for py in versions:
        exe = pythons.find(py)
        if exe is None:
            missing.append(py)
            continue
        findings += smoke(wheel, exp, py, exe)
    if missing and (require_all or len(missing) == len(versions)):
        findings.append(Finding("pythons", False, f"no interpreter for python {', '.join(missing)}"))
    elif missing:
        findings.append(Finding("pythons", True, f"skipped python {', '.join(missing)}: no interpreter here"))
    if not versions:
        raise CIError("no python to test with.")
    return findings
