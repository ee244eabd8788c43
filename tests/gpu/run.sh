#!/usr/bin/env bash
# Runs the GPU tests (tests/gpu/test_gpu.py, and test_torchft_gpu.py where torch + torchft are installed) against a CUDA (or ROCm) wheel built elsewhere, on a
# machine with a GPU, in a few minutes and without network access if need be.
#
#   tests/gpu/run.sh WHEEL [WHEELHOUSE]
#
# - WHEEL: monarch_runtime-*+cu13-*.whl (or +rocm) built on any machine (`pip wheel .` with CUDA_HOME).
# - WHEELHOUSE (optional): a directory of wheels to install from offline (nvidia-nccl-cu13, pytest).
#
# It makes a venv (MONARCH_GPU_VENV, default /tmp/monarch-gpu-venv) that sees the packages of the
# Python that runs it (PYTHON, default python3; when that is itself a venv, as on images that keep
# PyTorch in one, its site-packages are added with a .pth file), installs the wheel without dependencies, then finds NCCL: the nvidia-nccl-cu13 wheel if installable
# (WHEELHOUSE or an index), otherwise an existing libnccl.so.2 on the machine (pip's nvidia/nccl of any
# Python, /usr/lib*, /usr/local/cuda*), passed to the runtime via MONARCH_COLLECTIVE_LIBRARY. Without
# NCCL the collective tests skip and say why. Tests run with pytest if available, else with the test
# file's own runner. Exit status: the tests'.
set -euo pipefail

WHEEL=${1:?usage: tests/gpu/run.sh WHEEL [WHEELHOUSE]}
HOUSE=${2:-}
HERE=$(cd "$(dirname "$0")" && pwd)
VENV=${MONARCH_GPU_VENV:-/tmp/monarch-gpu-venv}
PY=${PYTHON:-python3}
start=$SECONDS

command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
command -v rocm-smi >/dev/null && rocm-smi --showproductname || true

"$PY" -m venv --system-site-packages "$VENV"
VPY=$VENV/bin/python
# --system-site-packages reaches the base interpreter's packages only; a venv's own (pytest, NCCL's
# wheel) are added after the new venv's, so the wheel installed below takes precedence.
"$PY" -c "import site, sys; print('\n'.join(p for p in site.getsitepackages() if not p.startswith(sys.base_prefix)))" \
  >"$("$VPY" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")/zz_monarch_parent.pth"
"$VPY" -m pip install --quiet --no-deps --force-reinstall "$WHEEL"

pip_try() {  # installs what it can, quietly; never fails the script
  if [[ -n "$HOUSE" ]]; then
    "$VPY" -m pip install --quiet --no-index --find-links "$HOUSE" "$@" 2>/dev/null || true
  else
    # offline machines: fail fast instead of pip's retries with back-off
    timeout 60 "$VPY" -m pip install --quiet --retries 0 --timeout 10 "$@" 2>/dev/null || true
  fi
}
case "$(basename "$WHEEL")" in
  *+cu13*) pip_try nvidia-nccl-cu13 ;;
esac
"$VPY" -c "import pytest" 2>/dev/null || pip_try pytest

# NCCL/RCCL: use what the wheel finds; otherwise the first libnccl.so.2 / librccl.so.1 on this machine.
loaded=$("$VPY" -c "import monarch_runtime as m; print(m.build_info()['collective_loaded'])")
if [[ "$loaded" != "True" && -z "${MONARCH_COLLECTIVE_LIBRARY:-}" ]]; then
  lib=$(timeout 60 find / -xdev \( -name libnccl.so.2 -o -name librccl.so.1 \) -not -path '*/proc/*' 2>/dev/null | head -n1 || true)
  if [[ -n "$lib" ]]; then
    export MONARCH_COLLECTIVE_LIBRARY=$lib
    echo "collective library: $lib (MONARCH_COLLECTIVE_LIBRARY)"
  fi
fi
"$VPY" - <<'PY'
import json, monarch_runtime as m
info = m.build_info()
print("build:", json.dumps({k: info.get(k) for k in ("platform", "archs", "toolkit_version", "collective_loaded",
      "collective_version", "collective_error")}))
try:
    print("devices:", json.dumps(m.devices()))
except m.NoDeviceError as err:  # the tests below skip and say why
    print("devices: none:", err)
PY

cd "$HERE"
if "$VPY" -c "import pytest" 2>/dev/null; then
  status=0
  timeout 600 "$VPY" -m pytest -q -rs -s -p no:cacheprovider --confcutdir "$HERE" "$HERE/test_gpu.py" "$HERE/test_torchft_gpu.py" || status=$?
else
  status=0
  timeout 600 "$VPY" "$HERE/test_gpu.py" || status=$?
fi
echo "tests/gpu/run.sh: status $status in $((SECONDS - start)) s"
exit $status
