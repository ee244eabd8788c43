"""Runs INSIDE a ROCm root (ci/roots.py copies it there), with the root's own python3; stdlib only.

    python3 root_probe.py WHEEL VENV PACKAGE [COLLECTIVE_SONAME]

Makes a fresh venv at VENV, installs WHEEL into it, then, in a child process of that venv's python
(so that a crash of the wheel's native code is seen as a signal, not lost), imports PACKAGE and reports
``build_info()``, what ``device_count()`` returns or raises, ``checksum_reference`` of a few bytes, and
whether COLLECTIVE_SONAME can be dlopened here independently of the wheel. Prints one line
``CI-ROOT-RESULT {json}``; a failed step is ``{"error": "..."}`` in it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import venv
from pathlib import Path

MARKER = "CI-ROOT-RESULT "

CHILD = r"""
import ctypes, json, sys
import {pkg} as m
out = {{"python": "%d.%d" % sys.version_info[:2], "file": m.__file__, "build_info": m.build_info()}}
try:
    out["device"] = {{"count": m.device_count()}}
except m.NoDeviceError as err:
    out["device"] = {{"error": "NoDeviceError", "message": str(err)}}
except Exception as err:  # reported, judged by ci/roots.py
    out["device"] = {{"error": type(err).__name__, "message": str(err)}}
out["checksum_reference"] = m.checksum_reference(b"monarch")
soname = sys.argv[1]
if soname:
    try:
        ctypes.CDLL(soname)
        out["collective_dlopen"] = True
    except OSError:
        out["collective_dlopen"] = False
print({marker!r} + json.dumps(out), flush=True)
"""


def _emit(result: dict[str, object]) -> int:
    print(MARKER + json.dumps(result), flush=True)
    return 0


def _tail(text: str) -> str:
    return " | ".join(text.strip().splitlines()[-8:])


def main(argv: list[str]) -> int:
    if len(argv) not in (3, 4):
        print("usage: root_probe.py WHEEL VENV PACKAGE [COLLECTIVE_SONAME]", file=sys.stderr)
        return 2
    wheel, venv_dir, package = Path(argv[0]), Path(argv[1]), argv[2]
    soname = argv[3] if len(argv) == 4 else ""
    try:
        venv.EnvBuilder(with_pip=True, clear=True).create(venv_dir)
    except (OSError, subprocess.CalledProcessError) as err:
        return _emit({"error": f"making a venv of the root's python {sys.version.split()[0]} failed: {err}"})
    python = str(venv_dir / "bin" / "python")
    install = subprocess.run(
        [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", str(wheel)],
        capture_output=True,
        text=True,
        check=False,
    )
    if install.returncode != 0:
        return _emit({"error": f"pip install {wheel.name} failed: {_tail(install.stdout + install.stderr)}"})
    code = CHILD.format(pkg=package, marker=MARKER)
    child = subprocess.run(
        [python, "-I", "-c", code, soname], capture_output=True, text=True, cwd=venv_dir.parent, check=False
    )
    sys.stderr.write(child.stderr)
    lines = [line for line in child.stdout.splitlines() if line.startswith(MARKER)]
    if child.returncode < 0:
        return _emit({"error": f"the import crashed (signal {-child.returncode}): {_tail(child.stderr)}"})
    if child.returncode != 0 or not lines:
        return _emit({"error": f"the import exited {child.returncode}: {_tail(child.stdout + child.stderr)}"})
    print(lines[-1], flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
