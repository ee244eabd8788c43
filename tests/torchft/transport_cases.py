"""PeerTransport's contract, in one process (donor and receivers are threads; the CPU build's
communicators work between threads as between processes). ``python transport_cases.py CASE`` runs one
case in the job venv (tests/torchft/conftest.py) and prints ``OK CASE``; test_transport.py runs them."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import monarch_runtime as m
import torch
from monarch_runtime.torchft import PeerTransport, StepMismatch

T = timedelta(seconds=20)


def make(seed: int) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(seed)
    net = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 8))
    opt = torch.optim.Adam(net.parameters())
    net(torch.randn(4, 64)).sum().backward()
    opt.step()
    return net, opt


def state(net: torch.nn.Module, opt: torch.optim.Optimizer, step: int) -> dict[str, Any]:
    return {"user": {"default": {"model": net.state_dict(), "optim": opt.state_dict()}}, "torchft": {"step": step}}


def snapshot(net: torch.nn.Module, opt: torch.optim.Optimizer) -> list[torch.Tensor]:
    return [t.clone() for t in (*net.state_dict().values(), *(v for s in opt.state.values() for v in s.values()))]


def same(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    return len(a) == len(b) and all(torch.equal(x, y) for x, y in zip(a, b))


def in_thread(fn: Callable[[], Any]) -> tuple[threading.Thread, dict[str, Any]]:
    box: dict[str, Any] = {}

    def body() -> None:
        try:
            box["value"] = fn()
        except BaseException as err:  # handed to the main thread
            box["error"] = err

    thread = threading.Thread(target=body)
    thread.start()
    return thread, box


def resources() -> tuple[int, int]:
    """(descriptors, threads) once they have settled: a closed communicator's native threads end on their
    own just after it returns."""
    last, stable_since = None, time.monotonic()
    while time.monotonic() - stable_since < 0.3:
        now = (len(os.listdir("/proc/self/fd")), len(os.listdir("/proc/self/task")))
        if now != last:
            last, stable_since = now, time.monotonic()
        time.sleep(0.02)
    assert last is not None
    return last


def several_receivers_in_place_and_allocated() -> None:
    donor_net, donor_opt = make(1)
    nets = [make(10 + i) for i in range(3)]
    donor = PeerTransport(T, staging_bytes=4096)
    # Receiver 0 and 1 in place (their own state_dict), receiver 2 allocates (no state_dict).
    receivers = [
        PeerTransport(T, state_dict=lambda n=n, o=o: state(n, o, 0)) if i < 2 else PeerTransport(T)
        for i, (n, o) in enumerate(nets)
    ]
    meta = donor.metadata()
    pointers = [n[0].weight.data_ptr() for n, _ in nets]
    jobs = [in_thread(lambda r=r: r.recv_checkpoint(0, meta, 5, T)) for r in receivers]
    donor.send_checkpoint([1, 2, 3], 5, state(donor_net, donor_opt, 5), T)
    for thread, _ in jobs:
        thread.join()
    want = snapshot(donor_net, donor_opt)
    assert len(donor.reports) == 3 and all(r["role"] == "donor" and r["chunks"] > 10 for r in donor.reports)
    # In place: a shadow until every tensor matched; allocating: the fresh tensors are the shadow.
    assert [r.reports[0]["shadow"] for r in receivers] == ["device", "device", "none"]
    for i, ((_, box), (net, opt)) in enumerate(zip(jobs, nets)):
        assert "error" not in box, box.get("error")
        got = box["value"]
        assert got["torchft"] == {"step": 5}
        assert got["user"]["default"]["optim"]["param_groups"] == donor_opt.state_dict()["param_groups"]
        weight = got["user"]["default"]["model"]["0.weight"]
        if i < 2:  # in place: the receiver's own tensors now hold the donor's data
            assert weight.data_ptr() == pointers[i]
            assert same(snapshot(net, opt), want)
        else:  # allocated: the receiver's own model untouched until the Manager loads the state
            assert weight.data_ptr() != pointers[i] and torch.equal(weight, donor_net[0].weight)
            net.load_state_dict(got["user"]["default"]["model"])
            opt.load_state_dict(got["user"]["default"]["optim"])
            assert same(snapshot(net, opt), want)
    for t in (donor, *receivers):
        t.shutdown()


def step_mismatch_named_on_both_sides() -> None:
    net, opt = make(1)
    rnet, ropt = make(2)
    before = snapshot(rnet, ropt)
    donor, receiver = PeerTransport(T), PeerTransport(T, state_dict=lambda: state(rnet, ropt, 0))
    meta = donor.metadata()
    thread, box = in_thread(lambda: receiver.recv_checkpoint(0, meta, 6, T))
    try:
        donor.send_checkpoint([1], 7, state(net, opt, 7), T)
        raise AssertionError("the donor sent despite the step mismatch")
    except StepMismatch as err:
        assert "sends step 7" in str(err) and "expects step 6" in str(err), err
    thread.join()
    assert isinstance(box.get("error"), StepMismatch) and "expects step 6" in str(box["error"]), box
    assert isinstance(box["error"], m.TransferError)
    assert same(snapshot(rnet, ropt), before)
    donor.shutdown()
    receiver.shutdown()


def mismatched_shape_named_on_both_sides() -> None:
    net, opt = make(1)
    other = torch.nn.Sequential(torch.nn.Linear(64, 100), torch.nn.ReLU(), torch.nn.Linear(100, 8))
    other_opt = torch.optim.Adam(other.parameters())
    before = [t.clone() for t in other.state_dict().values()]
    donor = PeerTransport(T)
    receiver = PeerTransport(T, state_dict=lambda: state(other, other_opt, 0))
    meta = donor.metadata()
    thread, box = in_thread(lambda: receiver.recv_checkpoint(0, meta, 3, T))
    try:
        donor.send_checkpoint([1], 3, state(net, opt, 3), T)
        raise AssertionError("sent a state the receiver cannot take")
    except m.TransferError as err:
        assert "user.default.model.0.weight" in str(err), err
    thread.join()
    assert isinstance(box.get("error"), m.TransferError) and "user.default.model.0.weight" in str(box["error"])
    assert same([t.clone() for t in other.state_dict().values()], before)
    donor.shutdown()
    receiver.shutdown()


def timeouts_are_honoured() -> None:
    net, opt = make(1)
    # A donor whose receiver never comes: TransferAborted after the timeout, not a hang.
    donor = PeerTransport(T)
    donor.metadata()
    start = time.monotonic()
    try:
        donor.send_checkpoint([1], 3, state(net, opt, 3), timedelta(seconds=1))
        raise AssertionError("no receiver came, yet the send returned")
    except m.TransferAborted as err:
        assert "timed out waiting for receivers" in str(err), err
    assert 0.9 < time.monotonic() - start < 5
    # A receiver whose donor never answers (it listens, and never serves): bounded by its timeout.
    receiver = PeerTransport(T)
    start = time.monotonic()
    try:
        receiver.recv_checkpoint(0, donor.metadata(), 3, timedelta(seconds=1))
        raise AssertionError("received from a donor that never served")
    except m.TransferAborted as err:
        assert "no answer from the donor" in str(err), err
    assert 0.9 < time.monotonic() - start < 5
    # A donor that stalls part-way (its progress hook sleeps): the receiver's transfer times out, its
    # tensors unchanged.
    rnet, ropt = make(2)
    before = snapshot(rnet, ropt)
    stalled = PeerTransport(T, staging_bytes=4096, progress=lambda name, off, n: time.sleep(0.05))
    receiver = PeerTransport(T, state_dict=lambda: state(rnet, ropt, 0))
    meta = stalled.metadata()
    thread, box = in_thread(lambda: receiver.recv_checkpoint(0, meta, 3, timedelta(seconds=1.5)))
    start = time.monotonic()
    try:
        stalled.send_checkpoint([1], 3, state(net, opt, 3), T)
    except m.TransferAborted:
        pass
    thread.join()
    assert isinstance(box.get("error"), m.TransferAborted), box
    assert "timed out" in str(box["error"]), box["error"]
    assert time.monotonic() - start < 10
    assert same(snapshot(rnet, ropt), before)
    for t in (donor, receiver, stalled):
        t.shutdown()


def disallow_stops_later_sends() -> None:
    net, opt = make(1)
    rnet, ropt = make(2)
    before = snapshot(rnet, ropt)
    donor = PeerTransport(T, staging_bytes=4096, progress=lambda name, off, n: time.sleep(0.02))
    receiver = PeerTransport(T, state_dict=lambda: state(rnet, ropt, 0))
    meta = donor.metadata()
    # A send in flight when disallow_checkpoint() comes: aborted, the receiver keeps its state.
    recv_thread, recv_box = in_thread(lambda: receiver.recv_checkpoint(0, meta, 3, T))
    send_thread, send_box = in_thread(lambda: donor.send_checkpoint([1], 3, state(net, opt, 3), T))
    time.sleep(0.5)
    donor.disallow_checkpoint()
    send_thread.join(5)
    recv_thread.join(5)
    assert not send_thread.is_alive() and not recv_thread.is_alive()
    assert isinstance(send_box.get("error"), m.TransferAborted), send_box
    assert isinstance(recv_box.get("error"), m.TransferAborted), recv_box
    assert same(snapshot(rnet, ropt), before)
    # After it, no receiver can connect to that metadata: refused at once, not after the timeout.
    start = time.monotonic()
    try:
        receiver.recv_checkpoint(0, meta, 3, T)
        raise AssertionError("received after disallow_checkpoint()")
    except m.TransferAborted as err:
        assert "disallow_checkpoint" in str(err), err
    assert time.monotonic() - start < 2
    # And a send without a new metadata() (nothing published) is refused too.
    try:
        donor.send_checkpoint([1], 3, state(net, opt, 3), T)
        raise AssertionError("sent with no listener")
    except m.TransferError as err:
        assert "no metadata() published" in str(err), err
    # The next quorum's metadata() opens a new listener, with a new token; the old metadata is stale.
    fresh = donor.metadata()
    assert fresh != meta
    donor.shutdown()
    receiver.shutdown()


def shutdown_leaves_nothing() -> None:
    net, opt = make(1)
    rnet, ropt = make(2)

    def heal() -> None:
        donor = PeerTransport(T, staging_bytes=4096)
        receiver = PeerTransport(T, state_dict=lambda: state(rnet, ropt, 0))
        meta = donor.metadata()
        receiver.metadata()
        thread, box = in_thread(lambda: receiver.recv_checkpoint(0, meta, 3, T))
        donor.send_checkpoint([1], 3, state(net, opt, 3), T)
        thread.join()
        assert "error" not in box, box
        donor.disallow_checkpoint()
        for t in (donor, receiver):
            t.shutdown()

    heal()  # the first makes the process' communicator rendezvous (one thread, one socket, for good)
    base = resources()
    for _ in range(10):
        heal()
    after = resources()
    assert after == base, f"(fds, threads) {base} before ten heals, {after} after"
    assert [t.name for t in threading.enumerate()] == ["MainThread"]
    # A shut-down transport refuses to publish.
    t = PeerTransport(T)
    t.shutdown()
    try:
        t.metadata()
        raise AssertionError("metadata() after shutdown()")
    except RuntimeError:
        pass


def receiver_failing_early_frees_the_donor() -> None:
    """A receiver whose own state_dict() raises after the handshake: the donor fails at once (the receiver
    joins and aborts), not after the communicator's join timeout."""
    net, opt = make(1)

    def broken() -> object:
        raise RuntimeError("the replica's state_dict() failed")

    donor, receiver = PeerTransport(T), PeerTransport(T, state_dict=broken)
    meta = donor.metadata()
    thread, box = in_thread(lambda: receiver.recv_checkpoint(0, meta, 3, T))
    start = time.monotonic()
    try:
        donor.send_checkpoint([1], 3, state(net, opt, 3), T)
        raise AssertionError("sent to a receiver that failed")
    except m.TransferAborted:
        pass
    assert time.monotonic() - start < 10
    thread.join()
    assert isinstance(box.get("error"), RuntimeError) and "state_dict() failed" in str(box["error"]), box
    donor.shutdown()
    receiver.shutdown()


def bad_metadata_is_named() -> None:
    receiver = PeerTransport(T)
    for meta in ("<n/a>", '{"protocol": "x"}', "http://host:1234/checkpoint"):
        try:
            receiver.recv_checkpoint(3, meta, 1, T)
            raise AssertionError(meta)
        except m.TransferError as err:
            assert "replica 3" in str(err) and "PeerTransport" in str(err), err


CASES = {
    f.__name__: f
    for f in (
        several_receivers_in_place_and_allocated,
        step_mismatch_named_on_both_sides,
        mismatched_shape_named_on_both_sides,
        timeouts_are_honoured,
        disallow_stops_later_sends,
        shutdown_leaves_nothing,
        receiver_failing_early_frees_the_donor,
        bad_metadata_is_named,
    )
}

if __name__ == "__main__":
    torch.set_num_threads(1)
    CASES[sys.argv[1]]()
    print(f"OK {sys.argv[1]}")
