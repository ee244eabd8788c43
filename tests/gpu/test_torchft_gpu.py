"""PeerTransport on a GPU build (skipped without a GPU, or without torch/torchft): a donor and a receiver
(threads, one GPU each: NCCL/RCCL refuse two ranks on one GPU) heal a CUDA model + Adam state in place;
a chunk corrupted in flight is a ChecksumMismatch on both sides with the receiver's tensors unchanged; a
send aborted half-way by disallow_checkpoint() leaves them unchanged too; commit="swap" copies device
memory in (it swaps host memory only), saying so. Run on a GPU machine with
``tests/gpu/run.sh WHEEL`` (pytest), after ``pip install torch torchft``."""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from typing import Any

import pytest

pytestmark = pytest.mark.gpu


def _setup() -> tuple[Any, Any, str]:
    try:
        import monarch_runtime as m  # noqa: PLC0415
    except ImportError as err:
        return None, None, f"monarch_runtime is not installed: {err}"
    if m.PLATFORM == "cpu":
        return None, None, "the CPU build (the same transport is tested there by tests/torchft/)"
    try:
        count = int(m.device_count())
    except m.NoDeviceError as err:
        return None, None, str(err)
    if count < 2:
        return None, None, f"{count} GPU(s): a heal needs two (one per rank)"
    try:
        import torch  # noqa: PLC0415
        import torchft  # noqa: F401, PLC0415
    except ImportError as err:
        return None, None, f"torch/torchft not installed: {err}"
    return m, torch, ""


M, TORCH, WHY = _setup()
if WHY:
    pytestmark = [pytest.mark.gpu, pytest.mark.skip(reason=WHY)]

T = timedelta(seconds=120)


def replica(device: int, seed: int) -> tuple[Any, Any]:
    torch = TORCH
    torch.manual_seed(seed)
    with torch.cuda.device(device):
        net = torch.nn.Sequential(torch.nn.Linear(512, 2048), torch.nn.ReLU(), torch.nn.Linear(2048, 64)).cuda()
        opt = torch.optim.Adam(net.parameters(), capturable=True)  # its step counters on the GPU too
        net(torch.randn(8, 512, device="cuda")).sum().backward()
        opt.step()
    return net, opt


def state(net: Any, opt: Any) -> dict[str, Any]:
    return {"user": {"default": {"model": net.state_dict(), "optim": opt.state_dict()}}, "torchft": {"step": 4}}


def tensors(net: Any, opt: Any) -> list[Any]:
    return [
        t.detach().cpu().clone()
        for t in (*net.state_dict().values(), *(v for s in opt.state.values() for v in s.values()))
    ]


def heal(
    make_progress: Any = None, during: Any = None, commit: str = "copy"
) -> tuple[Any, Any, list[Any], list[Any], list[Any]]:
    """One heal, GPU 0 to GPU 1; ``make_progress(donor_net)`` gives the donor's progress hook."""
    from monarch_runtime.torchft import PeerTransport  # noqa: PLC0415

    donor_net, donor_opt = replica(0, 1)
    progress = make_progress(donor_net) if make_progress else None
    net, opt = replica(1, 2)
    before = tensors(net, opt)
    donor = PeerTransport(T, device=0, staging_bytes=1 << 20, progress=progress)
    receiver = PeerTransport(T, device=1, state_dict=lambda: state(net, opt), commit=commit)
    meta = donor.metadata()
    box: dict[str, Any] = {}

    def receive() -> None:
        TORCH.cuda.set_device(1)
        try:
            box["state"] = receiver.recv_checkpoint(0, meta, 4, T)
            box["report"] = receiver.reports[0]
        except Exception as err:  # handed to the test
            box["error"] = err

    thread = threading.Thread(target=receive)
    thread.start()
    if during is not None:
        threading.Timer(0.2, during, args=(donor,)).start()
    sent: Any = None
    try:
        TORCH.cuda.set_device(0)
        donor.send_checkpoint([1], 4, state(donor_net, donor_opt), T)
    except Exception as err:
        sent = err
    thread.join(300)
    donor.shutdown()
    receiver.shutdown()
    return box, sent, before, tensors(net, opt), tensors(donor_net, donor_opt)


def test_heal_in_place_on_gpus() -> None:
    box, sent, _, after, want = heal()
    assert sent is None and "error" not in box, (sent, box.get("error"))
    assert all(TORCH.equal(a, b) for a, b in zip(after, want))


def test_corrupted_chunk_on_gpus() -> None:
    corrupted: dict[str, int] = {}

    def make_progress(donor_net: Any) -> Any:
        weight = donor_net[0].weight.detach().view(-1)

        def flip(name: str, offset: int, nbytes: int) -> None:
            if name == "user.default.model.0.weight" and offset and not corrupted:
                corrupted["at"] = offset  # after the donor's checksum: this chunk differs from it
                weight[offset // 4] += 1.0
                TORCH.cuda.synchronize(0)

        return flip

    box, sent, before, after, _ = heal(make_progress)
    assert corrupted, "the hook never fired"
    assert isinstance(sent, M.ChecksumMismatch) and isinstance(box.get("error"), M.ChecksumMismatch)
    assert all(TORCH.equal(a, b) for a, b in zip(after, before))


def test_send_aborted_half_way_on_gpus() -> None:
    box, sent, before, after, _ = heal(
        make_progress=lambda _net: lambda *_: time.sleep(0.01), during=lambda donor: donor.disallow_checkpoint()
    )
    assert isinstance(sent, M.TransferAborted) and isinstance(box.get("error"), M.TransferAborted), (sent, box)
    assert all(TORCH.equal(a, b) for a, b in zip(after, before))


def test_swap_commit_copies_device_memory_on_gpus() -> None:
    """commit="swap" swaps host memory only (CUDA graphs and registered buffers may hold device addresses):
    on a GPU build every device tensor is copied in, as with commit="copy", and the report says why."""
    box, sent, _, after, want = heal(commit="swap")
    assert sent is None and "error" not in box, (sent, box.get("error"))
    assert all(TORCH.equal(a, b) for a, b in zip(after, want))
    report = box["report"]
    assert report["swapped"] == [] and len(report["copied"]) == 4 + 4 * 3
    assert all("cuda" in why for why in report["copied"].values()), report["copied"]
