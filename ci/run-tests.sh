#!/usr/bin/env bash
# The README's test command: installs every toolchain the tests need (idempotent; a second run
# reuses what is there), then runs the whole suite: Python (pytest), Rust (cargo test + clippy,
# run from tests/test_rust.py) and the type/lint checks (tests/test_quality.py).
# Extra arguments go to pytest, e.g. `bash ci/run-tests.sh -k hipify`.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
export MONARCH_TOOLCHAINS="${MONARCH_TOOLCHAINS:-$HOME/.cache/monarch-runtime/toolchains}"
export HIP_PLATFORM=amd
# The ROCm 6.4/7.2 roots (tests/_roots.py) are made by install-toolchains.sh and required here: their tests
# fail rather than skip without them.
export MONARCH_TEST_REQUIRE_ROOTS="${MONARCH_TEST_REQUIRE_ROOTS:-1}"
# And torch + torchft (the torchft-venv toolchain): the TorchFT job tests (tests/torchft/) fail rather than skip.
export MONARCH_TEST_REQUIRE_TORCHFT="${MONARCH_TEST_REQUIRE_TORCHFT:-1}"
bash "$here/ci/install-toolchains.sh"
cd "$here"
exec "$MONARCH_TOOLCHAINS/test-venv/bin/python" -m pytest "$@"
