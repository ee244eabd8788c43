"""Replicas as processes on the session's CPU wheel (tests/runtime/replicas.py): peer recovery of a
numpy state between processes, with real process death (SIGKILL of the donor, of the receiver),
a stopped donor, a corrupted chunk, mismatched or read-only states, a state large enough for the
prefaulted shadow killed part-way then received, 20 kill-and-recover rounds
counting descriptors, threads and /dev/shm; zero-copy DLPack; and the thread scenarios of
scenarios.py again over the loopback transport (MONARCH_HOST_COMM_TRANSPORT=tcp).

numpy comes from the test venv (ci/requirements-test.txt): a directory holding only links to it is
put on the wheel venv's PYTHONPATH, so nothing else leaks in and nothing is downloaded."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from _support import InstalledWheel

pytestmark = pytest.mark.slow

HERE = Path(__file__).parent
REPLICAS = HERE / "replicas.py"
SCENARIOS = HERE / "scenarios.py"


@pytest.fixture(scope="module")
def numpy_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    numpy = pytest.importorskip("numpy")
    site = Path(numpy.__file__).resolve().parent.parent
    links = tmp_path_factory.mktemp("numpy-only")
    for name in ("numpy", "numpy.libs"):
        if (site / name).exists():
            (links / name).symlink_to(site / name, target_is_directory=True)
    return str(links)


def run(inst: InstalledWheel, script: Path, name: str, **env: str) -> str:
    proc = inst.run(
        f"import runpy, sys; sys.argv = [{str(script)!r}, {name!r}]; runpy.run_path({str(script)!r}, run_name='__main__')",
        {**os.environ, "MONARCH_HOST_COMM_TIMEOUT": "20", **env},
    )
    assert proc.returncode == 0, f"{name} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    assert f"OK {name}" in proc.stdout
    return proc.stdout


@pytest.mark.fault
@pytest.mark.parametrize(
    "name",
    [
        "donor_killed_then_new_donor_recovers",
        "receiver_killed_donor_errors",
        "corrupted_chunk_both_sides",
        "hung_donor_times_out",
        "mismatched_states_named_on_both_sides",
        "read_only_target_refused_on_both_sides",
        "large_state_killed_then_recovers",
    ],
)
def test_replica_processes(name: str, installed: dict[str, InstalledWheel], numpy_path: str) -> None:
    run(installed["cpu"], REPLICAS, name, PYTHONPATH=numpy_path)


@pytest.mark.fault
def test_twenty_kill_and_recover_rounds_leak_nothing(installed: dict[str, InstalledWheel], numpy_path: str) -> None:
    out = run(installed["cpu"], REPLICAS, "kill_and_recover_rounds", PYTHONPATH=numpy_path)
    sys.stdout.write(out)


@pytest.mark.fault
def test_peer_never_arrives(installed: dict[str, InstalledWheel], numpy_path: str) -> None:
    run(installed["cpu"], REPLICAS, "peer_never_arrives", PYTHONPATH=numpy_path, MONARCH_HOST_COMM_TIMEOUT="1")


def test_collectives_across_processes(installed: dict[str, InstalledWheel], numpy_path: str) -> None:
    run(installed["cpu"], REPLICAS, "collectives_across_processes", PYTHONPATH=numpy_path)


@pytest.mark.parametrize("name", ["dlpack_zero_copy_and_keepalive", "dlpack_errors"])
def test_dlpack(name: str, installed: dict[str, InstalledWheel], numpy_path: str) -> None:
    run(installed["cpu"], REPLICAS, name, PYTHONPATH=numpy_path)


@pytest.mark.parametrize(
    "name",
    [
        "all_reduce_ops_and_dtypes",
        "broadcast_send_recv_barrier",
        "collective_errors",
        "abort_wakes_blocked_ops",
        "transfer_larger_than_staging",
        "transfer_detects_corruption",
        "abort_mid_transfer_keeps_state",
        "watchdog_abort_frees_receiver",
        "transfer_rejects_mismatched_state",
    ],
)
def test_thread_scenarios_over_the_loopback_transport(name: str, installed: dict[str, InstalledWheel]) -> None:
    """The same semantics whichever transport: thread ranks forced onto the sockets."""
    run(installed["cpu"], SCENARIOS, name, MONARCH_HOST_COMM_TRANSPORT="tcp")
