"""PeerTransport's contract (tests/torchft/transport_cases.py, in the job venv: the CPU wheel installed
with its [torchft] extra): several receivers at once, in place and allocated; a step mismatch and a
shape mismatch named on both sides; every timeout honoured (no receiver, a silent donor, a stalled one);
disallow_checkpoint() aborting a send in flight and refusing later ones; a receiver failing after the
handshake freeing its donor at once; ten heals and shutdowns leaving
no descriptor or thread; metadata of another transport refused by name. ``commit="swap"``: the same
objects (parameters, optimizer state, grads, hooks) with the donor's data at new addresses, and the
next optimizer step the donor's; a re-heal into the kept buffers; every target whose memory anything
else can see (views, shared storages, NumPy, DLPack, shared memory, Module.state_dict()'s aliases)
copied instead, and right; failed heals (corrupted chunk, donor failing half-way, timeout, receiver
shut down) leaving every target bit for bit and at its address, for both commits. Also: ``import monarch_runtime``
never imports torch, and the wheel's [torchft] extra names torch and torchft (pip refuses it offline
without them, installs it with them)."""

from __future__ import annotations

import subprocess
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest
from _torchft_support import pip_install, venv_seeing

pytestmark = pytest.mark.slow

CASES = Path(__file__).with_name("transport_cases.py")


@pytest.mark.parametrize(
    "case",
    [
        "several_receivers_in_place_and_allocated",
        pytest.param("step_mismatch_named_on_both_sides", marks=pytest.mark.fault),
        pytest.param("mismatched_shape_named_on_both_sides", marks=pytest.mark.fault),
        pytest.param("timeouts_are_honoured", marks=pytest.mark.fault),
        pytest.param("disallow_stops_later_sends", marks=pytest.mark.fault),
        "shutdown_leaves_nothing",
        pytest.param("receiver_failing_early_frees_the_donor", marks=pytest.mark.fault),
        pytest.param("bad_metadata_is_named", marks=pytest.mark.fault),
        "swap_keeps_identity_and_steps_like_the_donor",
        "swap_falls_back_to_copy_where_memory_is_seen",
        "model_state_dict_aliases_are_copied_optimizer_state_swapped",
        pytest.param("failed_heals_leave_targets_bit_identical", marks=pytest.mark.fault),
        pytest.param("bad_commit_is_named", marks=pytest.mark.fault),
    ],
)
def test_transport_contract(case: str, torchft_python: Path) -> None:
    proc = subprocess.run(
        [str(torchft_python), str(CASES), case], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    assert f"OK {case}" in proc.stdout


def test_import_monarch_runtime_never_imports_torch(torchft_python: Path) -> None:
    """torch is importable there; importing the runtime (and using it) must not pull it in."""
    code = (
        "import sys, monarch_runtime as m; m.build_info(); m.checksum(b'abc');"
        "print(sorted(k for k in sys.modules if k.split('.')[0] in ('torch', 'torchft')));"
        "import monarch_runtime.torchft; print('torch' in sys.modules)"
    )
    out = subprocess.run([str(torchft_python), "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == ["[]", "True"], out


def test_the_torchft_extra(built_wheels: dict[str, Path], torchft_site: Path, tmp_path: Path) -> None:
    wheel = built_wheels["cpu"]
    with zipfile.ZipFile(wheel) as zf:
        meta = Parser().parsestr(zf.read(next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))).decode())
    assert meta.get_all("Provides-Extra") == ["torchft"]
    assert [r for r in meta.get_all("Requires-Dist") or [] if "extra" in r] == [
        'torch>=2.7; extra == "torchft"',
        'torchft>=0.2; extra == "torchft"',
    ]
    # Offline, the extra is refused where torch is missing (pip names it), and the plain wheel installs.
    bare = venv_seeing(tmp_path / "bare", None)
    refused = pip_install(bare, f"{wheel}[torchft]")
    assert refused.returncode != 0 and "torch>=2.7" in refused.stdout + refused.stderr
    assert pip_install(bare, str(wheel)).returncode == 0
    # Where torch and torchft are (the toolchain's), the extra is satisfied as it is.
    seeing = venv_seeing(tmp_path / "seeing", torchft_site)
    proc = pip_install(seeing, f"{wheel}[torchft]")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # Without torch, monarch_runtime.torchft says what to install.
    out = subprocess.run(
        [str(bare), "-c", "import monarch_runtime.torchft"], capture_output=True, text=True, check=False
    )
    assert out.returncode != 0 and "pip install 'monarch-runtime[torchft]'" in out.stderr
