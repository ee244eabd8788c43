"""The packaged runtime API (docs/runtime.md) on the session-built wheels.

The CPU wheel runs every path (communicators between threads of one process): buffers, streams and
events, checksums against the host reference, every collective, errors naming the NCCL result, abort,
and state transfer (larger than the staging size, corruption detected, abort mid-transfer and a
watchdog abort leaving the receiver's state intact). The CUDA and ROCm wheels, on this GPU-less
machine, must import and fail every GPU call with NoDeviceError. Each scenario runs in its own
process inside the installed wheel's venv (tests/runtime/scenarios.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from _support import InstalledWheel

pytestmark = pytest.mark.slow

SCENARIOS = Path(__file__).with_name("scenarios.py")

CPU_SCENARIOS = [
    "devices_and_build_info",
    "buffer_copies",
    "stream_and_event",
    "checksum_random",
    "all_reduce_ops_and_dtypes",
    "broadcast_send_recv_barrier",
    "collective_errors",
    "abort_wakes_blocked_ops",
    "transfer_larger_than_staging",
    "transfer_detects_corruption",
    "abort_mid_transfer_keeps_state",
    "watchdog_abort_frees_receiver",
    "transfer_timeout_aborts_a_hung_transfer",
    "transfer_rejects_mismatched_state",
    "transfer_idle_rank_and_arguments",
]


def run_scenario(inst: InstalledWheel, name: str, **env: str) -> None:
    proc = inst.run(
        f"import runpy, sys; sys.argv = ['scenarios', {name!r}]; runpy.run_path({str(SCENARIOS)!r}, run_name='__main__')",
        {**os.environ, **env},
    )
    assert proc.returncode == 0, f"scenario {name} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    assert f"OK {name}" in proc.stdout


@pytest.mark.parametrize("name", CPU_SCENARIOS)
def test_cpu_runtime(name: str, installed: dict[str, InstalledWheel]) -> None:
    run_scenario(installed["cpu"], name)


@pytest.mark.parametrize(
    "name", ["transfer_larger_than_staging", "transfer_detects_corruption", "abort_mid_transfer_keeps_state"]
)
def test_cpu_transfer_with_a_device_shadow(name: str, installed: dict[str, InstalledWheel]) -> None:
    """The receiver's other strategy: the incoming state shadowed in device memory (in place, no staging)."""
    run_scenario(installed["cpu"], name, MR_TEST_SHADOW="device")


def test_cpu_communicator_init_times_out_naming_missing_ranks(installed: dict[str, InstalledWheel]) -> None:
    run_scenario(installed["cpu"], "init_timeout", MONARCH_HOST_COMM_TIMEOUT="0.3")


@pytest.mark.parametrize("flavour", ["cuda", "rocm"])
def test_gpu_builds_fail_with_no_device_error(flavour: str, installed: dict[str, InstalledWheel]) -> None:
    run_scenario(installed[flavour], "gpu_build_without_gpu")
