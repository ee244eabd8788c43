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
    # commit="copy" (the default): the in-place receivers' tensors copied in; the fresh ones are the caller's.
    assert [len(r.reports[0]["copied"]) for r in receivers] == [16, 16, 0]
    assert all(r.reports[0]["swapped"] == [] and r.reports[0]["commit"] == "copy" for r in receivers)
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
    for commit in ("copy", "swap"):  # with "swap" through a buffer shaped as the receiver's own tensor
        net, opt = make(1)
        other = torch.nn.Sequential(torch.nn.Linear(64, 100), torch.nn.ReLU(), torch.nn.Linear(100, 8))
        other_opt = torch.optim.Adam(other.parameters())
        before = [t.clone() for t in other.state_dict().values()]
        donor = PeerTransport(T)
        receiver = PeerTransport(T, state_dict=lambda o=other, oo=other_opt: state(o, oo, 0), commit=commit)
        meta = donor.metadata()
        thread, box = in_thread(lambda r=receiver, md=meta: r.recv_checkpoint(0, md, 3, T))
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


# -- commit="swap" ----------------------------------------------------------------------------------------


def own_state(net: torch.nn.Module, opt: torch.optim.Optimizer, step: int) -> dict[str, Any]:
    """A receiver's state holding its Parameter objects themselves (``keep_vars``), not Module.state_dict()'s
    detached aliases: the objects a swap commit can give new memory."""
    model = net.state_dict(keep_vars=True)
    return {"user": {"default": {"model": model, "optim": opt.state_dict()}}, "torchft": {"step": step}}


def heal(
    donor_state: dict[str, Any], receiver: PeerTransport, step: int, **send: Any
) -> tuple[dict[str, Any] | None, BaseException | None, BaseException | None]:
    """One heal, donor in this thread: (the receiver's result, its error, the donor's error)."""
    recv_timeout = send.pop("recv_timeout", T)
    donor = PeerTransport(T, staging_bytes=4096, **send)
    meta = donor.metadata()
    thread, box = in_thread(lambda: receiver.recv_checkpoint(0, meta, step, recv_timeout))
    sent: BaseException | None = None
    try:
        donor.send_checkpoint([1], step, donor_state, T)
    except BaseException as err:  # handed to the caller
        sent = err
    thread.join()
    donor.shutdown()
    return box.get("value"), box.get("error"), sent


def train_step(net: torch.nn.Module, opt: torch.optim.Optimizer, seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    opt.zero_grad()
    net(torch.randn(4, 64, generator=gen)).pow(2).sum().backward()
    opt.step()


def swap_keeps_identity_and_steps_like_the_donor() -> None:
    donor_net, donor_opt = make(1)
    net, opt = make(2)
    params = list(net.parameters())
    keys, groups = list(opt.state), [list(g["params"]) for g in opt.param_groups]
    states = {id(p): dict(opt.state[p]) for p in params}  # the state tensors objects, by parameter
    net[2].bias.grad = None  # one parameter without a grad, the others with theirs
    grads = [p.grad for p in params]
    before = {p: p.data_ptr() for p in params}
    calls: list[str] = []
    net[0].weight.register_hook(lambda g: calls.append("hook"))
    net[2].weight.register_post_accumulate_grad_hook(lambda p: calls.append("post"))
    receiver = PeerTransport(T, state_dict=lambda: own_state(net, opt, 0), commit="swap")
    got, err, sent = heal(state(donor_net, donor_opt, 5), receiver, 5)
    assert err is None and sent is None, (err, sent)
    assert got is not None and got["torchft"] == {"step": 5}
    report = receiver.reports[0]
    names = [k for k in report["checksums"]]
    assert report["commit"] == "swap" and report["copied"] == {}, report["copied"]
    assert sorted(report["swapped"]) == sorted(names) and len(names) == 4 + 4 * 3
    # The same objects everywhere, with their new data at new addresses.
    assert all(a is b for a, b in zip(net.parameters(), params)) and list(opt.state) == keys
    assert all(a is b for a, b in zip(keys, params))
    assert [list(g["params"]) for g in opt.param_groups] == groups
    assert all(all(opt.state[p][k] is v for k, v in states[id(p)].items()) for p in params)
    assert all(type(p) is torch.nn.Parameter and p.requires_grad and p.is_leaf for p in params)
    assert [p.grad for p in params] == grads and net[2].bias.grad is None
    assert all(p.data_ptr() != before[p] for p in params)
    assert same(snapshot(net, opt), snapshot(donor_net, donor_opt))
    assert got["user"]["default"]["model"]["0.weight"] is net[0].weight
    # The hooks fire, and the next optimizer step is the donor's, bit for bit.
    train_step(donor_net, donor_opt, 11)
    train_step(net, opt, 11)
    assert sorted(calls) == ["hook", "post"], calls  # both fired, once each
    assert same(snapshot(net, opt), snapshot(donor_net, donor_opt))
    # A second heal receives into the memory the first one displaced (mapped already), and swaps again.
    train_step(donor_net, donor_opt, 12)
    swapped_in = {p: p.data_ptr() for p in params}
    got, err, sent = heal(state(donor_net, donor_opt, 7), receiver, 7)
    assert err is None and sent is None, (err, sent)
    assert sorted(receiver.reports[0]["swapped"]) == sorted(names)
    assert all(p.data_ptr() == before[p] for p in params), "the second heal did not reuse the kept buffers"
    assert all(p.data_ptr() != swapped_in[p] for p in params)
    assert same(snapshot(net, opt), snapshot(donor_net, donor_opt))
    receiver.shutdown()
    assert receiver._buffers == {}, "shutdown() keeps buffers"


def swap_falls_back_to_copy_where_memory_is_seen() -> None:
    """Every target another tensor, C++ or NumPy can see the memory of is copied (and comes out right);
    only the plain one is swapped."""
    import numpy as np  # noqa: PLC0415 (torch's dependency, in the job venv)

    n = 1000
    gen = torch.Generator().manual_seed(3)
    donor = {k: torch.rand(n, generator=gen) for k in ("plain", "view", "a", "b", "numpy", "exported", "held")}
    donor.update({k: torch.rand(n, generator=gen) for k in ("shared", "dlpack", "inference")})
    donor["transposed"] = torch.rand(20, 50, generator=gen)
    base = torch.zeros(n + 10)
    a = torch.zeros(n)
    array = np.zeros(n, dtype=np.float32)
    exported = torch.zeros(n)
    exported_view = exported.numpy()
    held = torch.zeros(n)
    held_storage = held.untyped_storage()
    dlpacked = torch.zeros(n)
    capsule = torch.utils.dlpack.to_dlpack(dlpacked)
    with torch.inference_mode():
        inference = torch.zeros(n)
    mine = {
        "plain": torch.zeros(n),
        "view": base[5 : 5 + n],
        "a": a,
        "b": a.detach(),  # the same storage as "a"
        "numpy": torch.from_numpy(array),
        "exported": exported,
        "held": held,
        "shared": torch.zeros(n).share_memory_(),
        "dlpack": dlpacked,
        "transposed": torch.empty_strided((20, 50), (1, 20)).zero_(),  # not a view, not contiguous
        "inference": inference,
    }
    ptrs = {k: v.data_ptr() for k, v in mine.items()}
    receiver = PeerTransport(T, state_dict=lambda: mine, commit="swap")
    _, err, sent = heal(donor, receiver, 1)
    assert err is None and sent is None, (err, sent)
    report = receiver.reports[0]
    assert report["swapped"] == ["plain"], report
    reasons = report["copied"]
    assert sorted(reasons) == sorted(k for k in mine if k != "plain"), reasons
    assert "view" in reasons["view"] and "shared with another tensor" in reasons["a"] == reasons["b"]
    assert "not allocate" in reasons["numpy"] and "exported" in reasons["exported"]
    assert "storage object is held" in reasons["held"] and "shared memory" in reasons["shared"]
    assert "not contiguous" in reasons["transposed"], reasons
    assert "DLPack" in reasons["dlpack"] and "inference tensor" in reasons["inference"], reasons
    for k, v in mine.items():
        assert torch.equal(v, donor["b" if k == "a" else k] if k != "b" else donor["b"]), k
        assert (v.data_ptr() == ptrs[k]) == (k != "plain"), k
    # The copies reached whoever else sees that memory; the rest of the view's base is untouched.
    assert torch.equal(torch.from_numpy(array), donor["numpy"])
    assert torch.equal(torch.from_numpy(exported_view), donor["exported"])
    assert torch.equal(base[:5], torch.zeros(5)) and torch.equal(base[5 + n :], torch.zeros(5))
    assert held_storage.data_ptr() == held.data_ptr() and torch.equal(torch.from_dlpack(capsule), donor["dlpack"])
    receiver.shutdown()


def model_state_dict_aliases_are_copied_optimizer_state_swapped() -> None:
    """What a TorchFT Manager's state holds (Module.state_dict(): detached aliases of the parameters;
    Optimizer.state_dict(): the optimizer's own tensors): the first copied, the second swapped."""
    donor_net, donor_opt = make(1)
    net, opt = make(2)
    receiver = PeerTransport(T, state_dict=lambda: state(net, opt, 0), commit="swap")
    _, err, sent = heal(state(donor_net, donor_opt, 5), receiver, 5)
    assert err is None and sent is None, (err, sent)
    report = receiver.reports[0]
    model = [k for k in report["checksums"] if ".model." in k]
    optim = [k for k in report["checksums"] if ".optim." in k]
    assert sorted(report["copied"]) == sorted(model) and sorted(report["swapped"]) == sorted(optim)
    assert all("detached alias" in report["copied"][k] for k in model), report["copied"]
    assert same(snapshot(net, opt), snapshot(donor_net, donor_opt))
    train_step(donor_net, donor_opt, 5)
    train_step(net, opt, 5)
    assert same(snapshot(net, opt), snapshot(donor_net, donor_opt))
    receiver.shutdown()


def raw(tensors: list[torch.Tensor]) -> list[tuple[int, bytes]]:
    """The tensors' addresses and bytes (bit for bit, NaNs included), read from copies (.numpy() of the
    tensor itself would mark its memory exported, which a swap then refuses)."""
    return [(t.data_ptr(), t.detach().clone().reshape(-1).view(torch.uint8).numpy().tobytes()) for t in tensors]


def failed_heals_leave_targets_bit_identical() -> None:
    """For both commits: a corrupted chunk, a donor failing half-way, a stalled donor (timeout) and a
    receiver shut down mid-heal leave every target as it was, bit for bit and at its address; with
    commit="swap" the retry then heals (into the failed attempts' buffers)."""
    for commit in ("copy", "swap"):
        failed_heals(commit)


def failed_heals(commit: str) -> None:
    donor_net, donor_opt = make(1)
    donor_state = state(donor_net, donor_opt, 3)
    weight = donor_net[0].weight.detach().view(-1).view(torch.uint8)

    def corrupt(name: str, offset: int, nbytes: int) -> None:
        if name == "user.default.model.0.weight" and offset == 0:
            weight[17] ^= 0x10  # after the donor's checksum: the receiver must notice

    def fail_half_way(name: str, offset: int, nbytes: int) -> None:
        if name.endswith("optim.state.2.exp_avg"):
            raise RuntimeError("the donor fails half-way")

    net, opt = make(2)
    net[0].weight.data[0, 0] = float("nan")  # bit for bit, NaNs too
    objects = [*net.parameters(), *(v for s in opt.state.values() for v in s.values())]
    before = raw(objects)
    receiver = PeerTransport(T, state_dict=lambda: own_state(net, opt, 0), commit=commit)
    stall = {"progress": lambda *a: time.sleep(0.05), "recv_timeout": timedelta(seconds=1)}
    faults: list[tuple[str, dict[str, Any], type[BaseException]]] = [
        ("corrupted chunk", {"progress": corrupt}, m.ChecksumMismatch),
        ("donor failing half-way", {"progress": fail_half_way}, m.TransferAborted),
        ("stalled donor", stall, m.TransferAborted),
    ]
    for what, send, error in faults:
        _, err, _ = heal(donor_state, receiver, 3, **send)
        if what == "corrupted chunk":
            weight[17] ^= 0x10  # the donor's own state back
        assert isinstance(err, error), (commit, what, err)
        assert raw(objects) == before, f"commit={commit}, {what}: the receiver's tensors changed"
    if commit == "swap":
        kept = {t.data_ptr() for t in receiver._buffers.values()}
        assert len(kept) == len(objects), "the failed attempts' buffers were not kept"
    # The retry heals (with commit="swap" into the buffers the failed attempts left).
    _, err, sent = heal(donor_state, receiver, 3)
    assert err is None and sent is None, (commit, err, sent)
    assert same(snapshot(net, opt), snapshot(donor_net, donor_opt))
    if commit == "swap":
        assert {t.data_ptr() for t in objects} == kept
        assert sorted(receiver.reports[0]["swapped"]) == sorted(receiver.reports[0]["checksums"])
    else:
        assert [p for p, _ in raw(objects)] == [p for p, _ in before]
    # A receiver shut down mid-heal: aborted, its tensors unchanged.
    train_step(donor_net, donor_opt, 9)
    before = raw(objects)
    chunks = [0]

    def stop_receiver(name: str, offset: int, nbytes: int) -> None:
        chunks[0] += 1
        if chunks[0] == 10:
            receiver.shutdown()  # aborts the receive in flight

    halting = PeerTransport(T, staging_bytes=4096, progress=stop_receiver)
    meta = halting.metadata()
    thread, box = in_thread(lambda: receiver.recv_checkpoint(0, meta, 4, T))
    try:
        halting.send_checkpoint([1], 4, state(donor_net, donor_opt, 4), T)
        raise AssertionError("sent to a receiver that was shut down")
    except m.TransferAborted:
        pass
    thread.join()
    halting.shutdown()
    assert isinstance(box.get("error"), m.TransferAborted), (commit, box)
    assert raw(objects) == before, f"commit={commit}: shut down mid-heal, the receiver's tensors changed"


def bad_commit_is_named() -> None:
    try:
        PeerTransport(T, commit="move")
        raise AssertionError("commit='move' accepted")
    except ValueError as err:
        assert "'copy', 'swap'" in str(err) and "'move'" in str(err), err


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
        swap_keeps_identity_and_steps_like_the_donor,
        swap_falls_back_to_copy_where_memory_is_seen,
        model_state_dict_aliases_are_copied_optimizer_state_swapped,
        failed_heals_leave_targets_bit_identical,
        bad_commit_is_named,
    )
}

if __name__ == "__main__":
    torch.set_num_threads(1)
    CASES[sys.argv[1]]()
    print(f"OK {sys.argv[1]}")
