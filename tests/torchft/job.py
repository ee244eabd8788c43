"""A real TorchFT job on CPU with Gloo: two replica groups as processes, TorchFT's own lighthouse, a small
deterministic model, the Manager, and a checkpoint transport (ours: ``PeerTransport``, or TorchFT's
``PGTransport`` for the side-by-side runs). Runs in a venv holding the CPU wheel and torch/torchft
(tests/torchft/conftest.py makes it).

``python job.py run PLAN_JSON OUT_DIR`` is the orchestrator: it starts the lighthouse, the replicas
(``python job.py replica`` with their orders in ``MR_REPLICA``), restarts a replica that SIGKILLed itself
when the plan has another incarnation for it, stops when both finished (or the plan's stop condition
holds), and writes ``OUT_DIR/events.json``: every replica's events in order. The assertions are the
tests' (test_job.py); the orchestrator only checks that nothing it started is left.

A replica logs JSON events to its own file: ``start`` (pid, digests of its state), ``quorum`` (after each
``start_quorum``: step before and after, the Manager's error, the digests), ``commit`` (step, loss, digests,
its descriptors and threads), ``no_commit``, ``done``. Faults are planned per incarnation:
``kill_at`` (SIGKILL itself at that step, after the backward pass), ``donor_fault`` (when it first serves
a heal at a step > 0: ``corrupt`` one chunk in flight, or ``kill`` itself half-way). The plan's
``commit`` (default ``copy``) is PeerTransport's.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
from monarch_runtime.torchft import PeerTransport
from torch import nn
from torch.distributed import TCPStore
from torch.utils import _pytree as pytree
from torchft import Manager
from torchft._torchft import LighthouseServer
from torchft.checkpointing.pg_transport import PGTransport
from torchft.process_group import ProcessGroupGloo

HERE = Path(__file__).resolve()
#: The corrupted leaf and byte, the same for both transports (the first tensor the donor sends).
TARGET_LEAF = "user.default.model.0.weight"
TARGET_BYTE = 3 * 16384 + 5
STAGING = 16 << 10
BIT = 0x10


def digests(state: dict[str, Any]) -> dict[str, str]:
    out = {}
    for path, leaf in pytree.tree_flatten_with_path(state)[0]:
        if isinstance(leaf, torch.Tensor):
            name = ".".join(str(getattr(k, "key", getattr(k, "idx", k))) for k in path)
            # From a copy: .numpy() of the state's own memory would mark it exported (a swap refuses it).
            data = leaf.detach().clone().reshape(-1).view(torch.uint8).numpy().tobytes()
            out[name] = hashlib.sha256(data).hexdigest()[:16]
    return out


# ------------------------------------------------------------------------------------------------------
# A replica.


def replica() -> None:
    cfg = json.loads(os.environ["MR_REPLICA"])
    torch.set_num_threads(1)
    rid = int(cfg["replica"])
    log_file = open(cfg["log"], "a", encoding="utf-8")

    def log(event: str, **fields: Any) -> None:
        fields.update(ev=event, replica=rid, incarnation=cfg["incarnation"], t=time.time())
        log_file.write(json.dumps(fields) + "\n")
        log_file.flush()

    torch.manual_seed(cfg["seed"])
    model = nn.Sequential(nn.Linear(64, 256), nn.Tanh(), nn.Linear(256, 128), nn.Tanh(), nn.Linear(128, 10))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    # The optimizer's state exists before the first step (as Adam makes it), so a heal can fill it in place.
    for p in model.parameters():
        opt.state[p] = {"step": torch.tensor(0.0), "exp_avg": torch.zeros_like(p), "exp_avg_sq": torch.zeros_like(p)}

    def user_state() -> dict[str, Any]:
        return {"model": model.state_dict(), "optim": opt.state_dict()}

    def load_user_state(state: dict[str, Any]) -> None:
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optim"])

    def full_state() -> dict[str, Any]:
        return {"user": {"default": user_state()}}

    # A restarted incarnation is started ahead (imports done, state made from the seed) and waits here
    # until the orchestrator says its predecessor is dead: restarts then cost a Manager's start, not an
    # interpreter's.
    go = Path(cfg["go"])
    while not go.exists():
        if os.getppid() != cfg["orchestrator"]:
            return  # the orchestrator is gone
        time.sleep(0.01)
    store = TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
    pg = ProcessGroupGloo(timeout=timedelta(seconds=15))
    fault = cfg.get("donor_fault")
    manager: Any = None
    if cfg["transport"] == "peer":
        inner: Any = FaultyPeerTransport(
            fault,
            log,
            timeout=timedelta(seconds=30),
            state_dict=lambda: manager._manager_state_dict(),
            staging_bytes=STAGING,
            commit=cfg.get("commit", "copy"),
        )
    else:
        inner = PGTransport(
            FaultyPG(pg, fault, model[0].weight, log),
            timeout=timedelta(seconds=30),
            device=torch.device("cpu"),
            state_dict=lambda: manager._manager_state_dict(),
        )
    transport = Logged(inner, log)
    manager = Manager(
        pg=pg,
        min_replica_size=2,
        load_state_dict=load_user_state,
        state_dict=user_state,
        replica_id=f"replica_{rid}",
        store_addr="127.0.0.1",
        store_port=store.port,
        rank=0,
        world_size=1,
        lighthouse_addr=cfg["lighthouse"],
        hostname="127.0.0.1",
        port=0,
        timeout=timedelta(seconds=30),
        quorum_timeout=timedelta(seconds=cfg.get("quorum_timeout", 60)),
        connect_timeout=timedelta(seconds=20),
        use_async_quorum=False,  # the heal happens inside start_quorum: healed replicas take part at once
        init_sync=False,  # the same seed everywhere
        checkpoint_transport=transport,
    )
    log("start", pid=os.getpid(), digests=digests(full_state()))
    criterion = nn.CrossEntropyLoss()
    kill_at = cfg.get("kill_at")
    while manager.current_step() < cfg["steps"]:
        before = manager.current_step()
        manager.start_quorum()
        step = manager.current_step()
        err = manager.errored()
        log(
            "quorum",
            before=before,
            step=step,
            error=(f"{type(err.original_exception).__name__}: {err.original_exception}" if err else None),
            digests=digests(full_state()),
            participants=manager.num_participants(),
        )
        gen = torch.Generator().manual_seed(cfg["seed"] * 100003 + step * 17 + rid)
        x = torch.randn(32, 64, generator=gen)
        y = torch.randint(0, 10, (32,), generator=gen)
        opt.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        if kill_at == step:
            log("kill", step=step)
            os.kill(os.getpid(), signal.SIGKILL)
        grads = [p.grad for p in model.parameters()]
        flat = torch.cat([g.reshape(-1) for g in grads])
        manager.allreduce(flat).wait()
        offset = 0
        for g in grads:
            g.copy_(flat[offset : offset + g.numel()].view_as(g))
            offset += g.numel()
        if manager.should_commit():
            opt.step()
            log(
                "commit",
                step=manager.current_step(),
                loss=float(loss.item()).hex(),
                digests=digests(full_state()),
                fds=len(os.listdir("/proc/self/fd")),
                threads=len(os.listdir("/proc/self/task")),
            )
        else:
            err = manager.errored()
            log("no_commit", step=step, error=(repr(err.original_exception) if err else None))
    manager.shutdown(wait=True)
    log(
        "done",
        step=manager.current_step(),
        digests=digests(full_state()),
        py_threads=sorted(t.name for t in threading.enumerate()),
    )
    log_file.close()


class FaultyPeerTransport(PeerTransport):  # type: ignore[misc]
    """PeerTransport with a donor-side fault hook, through its ``progress`` callback (as
    transfer_state's tests do): flip a bit of one chunk just before it is sent and flip it back once
    it has gone (the next chunk's call: a send completes when the peer has it), or SIGKILL itself
    half-way through."""

    def __init__(self, fault: dict[str, Any] | None, log: Any, **kw: Any) -> None:
        super().__init__(progress=self._hook, **kw)
        self._fault = fault
        self._log = log
        self._armed = False
        self._chunks = 0
        self._restore: Any = None

    def send_checkpoint(self, dst_ranks: list[int], step: int, state_dict: Any, timeout: Any) -> None:
        self._armed = self._fault is not None and step > 0
        self._chunks = 0
        self._state = state_dict
        try:
            super().send_checkpoint(dst_ranks, step, state_dict, timeout)
        finally:
            self._undo()
            if self._armed:
                self._fault = None  # once
            self._armed = False

    def _undo(self) -> None:
        if self._restore is not None:
            tensor, index = self._restore
            tensor[index] ^= BIT
            self._restore = None

    def _hook(self, name: str, offset: int, nbytes: int) -> None:
        if not self._armed:
            return
        self._undo()
        self._chunks += 1
        assert self._fault is not None
        if self._fault["kind"] == "corrupt" and name == TARGET_LEAF and offset <= TARGET_BYTE < offset + nbytes:
            weight = self._state["user"]["default"]["model"]["0.weight"]
            raw = weight.detach().view(-1).view(torch.uint8)
            raw[TARGET_BYTE] ^= BIT
            self._restore = (raw, TARGET_BYTE)
            self._log("fault", kind="corrupt", leaf=name, byte=TARGET_BYTE)
        if self._fault["kind"] == "kill" and self._chunks == self._fault["at_chunk"]:
            self._log("fault", kind="kill", chunk=self._chunks, leaf=name, offset=offset)
            os.kill(os.getpid(), signal.SIGKILL)


class FaultyPG:
    """The ProcessGroup PGTransport sends with, with the same faults: the chunk (here: the tensor) that
    holds TARGET_BYTE goes out as a copy with that bit flipped, or the donor SIGKILLs itself once half of
    the tensors have gone. Everything else is the Manager's own group."""

    def __init__(self, pg: Any, fault: dict[str, Any] | None, target: Any, log: Any) -> None:
        self._pg = pg
        self._fault = fault
        self._target = target
        self._log = log
        self._keep: list[Any] = []

    def send(self, tensors: list[Any], dst: int, tag: int = 0) -> Any:
        fault = self._fault
        if fault is not None and tag >= 3:  # tags 1, 2: PGTransport's metadata; 3 + i: tensor i
            index = tag - 3
            if (
                fault["kind"] == "corrupt"
                and tensors[0].untyped_storage().data_ptr() == self._target.untyped_storage().data_ptr()
            ):
                copy = tensors[0].clone()
                copy.view(torch.uint8)[TARGET_BYTE] ^= BIT
                tensors = [copy]
                self._keep.append(copy)
                self._log("fault", kind="corrupt", leaf=TARGET_LEAF, byte=TARGET_BYTE)
                self._fault = None
            elif fault["kind"] == "kill" and index == fault["at_tensor"]:
                self._log("fault", kind="kill", tensor=index)
                os.kill(os.getpid(), signal.SIGKILL)
        return self._pg.send(tensors, dst, tag=tag)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._pg, name)


class Logged:
    """The transport the Manager gets: the one under test, with every send and receive logged (and its
    outcome: the error's type and words)."""

    def __init__(self, inner: Any, log: Any) -> None:
        self._inner = inner
        self._log = log

    def metadata(self) -> str:
        return str(self._inner.metadata())

    def send_checkpoint(self, dst_ranks: list[int], step: int, state_dict: Any, timeout: Any) -> None:
        try:
            self._inner.send_checkpoint(dst_ranks, step, state_dict, timeout)
        except Exception as err:
            self._log("send_failed", step=step, error=f"{type(err).__name__}: {err}")
            raise
        self._log("sent", step=step, dst=dst_ranks, reports=[_brief(r) for r in getattr(self._inner, "reports", [])])

    def recv_checkpoint(self, src_rank: int, metadata: str, step: int, timeout: Any) -> Any:
        try:
            out = self._inner.recv_checkpoint(src_rank, metadata, step, timeout)
        except Exception as err:
            self._log("recv_failed", step=step, error=f"{type(err).__name__}: {err}")
            raise
        self._log("received", step=step, reports=[_brief(r) for r in getattr(self._inner, "reports", [])])
        return out

    def disallow_checkpoint(self) -> None:
        self._inner.disallow_checkpoint()

    def shutdown(self, wait: bool = True) -> None:
        self._inner.shutdown(wait)


def _brief(report: dict[str, Any]) -> dict[str, Any]:
    keys = ("role", "bytes", "chunks", "seconds", "shadow", "commit", "swapped", "copied")
    return {k: report[k] for k in keys if k in report}


# ------------------------------------------------------------------------------------------------------
# The orchestrator.


def _leftovers(token: str) -> list[int]:
    """Processes still running whose environment carries this job's token: every replica and anything it
    started (what the orchestrator must not leave behind)."""
    mark = f"MR_JOB={token}".encode()
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
            environ = Path(f"/proc/{entry}/environ").read_bytes()
        except OSError:
            continue
        if state != "Z" and mark in environ.split(b"\0"):
            out.append(int(entry))
    return out


def run(plan: dict[str, Any], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    lighthouse = LighthouseServer(
        bind="127.0.0.1:0", min_replicas=2, join_timeout_ms=100, quorum_tick_ms=20, heartbeat_timeout_ms=1000
    )
    address = "http://127.0.0.1:" + lighthouse.address().rsplit(":", 1)[1]
    incarnations = {r: list(plan["replicas"][str(r)]) for r in (0, 1)}
    running: dict[int, tuple[subprocess.Popen[bytes], int]] = {}
    spares: dict[int, tuple[subprocess.Popen[bytes], int]] = {}
    started = {0: 0, 1: 0}
    exits: list[dict[str, Any]] = []
    token = os.urandom(8).hex()
    env_base = {**os.environ, "GLOO_SOCKET_IFNAME": "lo", "PYTHONUNBUFFERED": "1", "MR_JOB": token}

    def spawn(r: int) -> tuple[subprocess.Popen[bytes], int]:
        orders = incarnations[r].pop(0)
        n = started[r]
        started[r] += 1
        cfg = {
            "replica": r,
            "incarnation": n,
            "seed": plan["seed"],
            "steps": plan["steps"],
            "transport": plan["transport"],
            "commit": plan.get("commit", "copy"),
            "lighthouse": address,
            "log": str(out / f"replica{r}.jsonl"),
            "go": str(out / f"go-{r}-{n}"),
            "orchestrator": os.getpid(),
            **orders,
        }
        err = open(out / f"replica{r}.{n}.stderr", "wb")
        proc = subprocess.Popen(
            [sys.executable, str(HERE), "replica"],
            env={**env_base, "MR_REPLICA": json.dumps(cfg)},
            stdout=err,
            stderr=subprocess.STDOUT,
        )
        err.close()
        return proc, n

    def start(r: int) -> None:
        """The next incarnation of replica ``r`` goes (the spare, else a new one), and the one after it is
        started ahead as the spare."""
        proc, n = spares.pop(r) if r in spares else spawn(r)
        (out / f"go-{r}-{n}").touch()
        running[r] = (proc, n)
        if incarnations[r]:
            spares[r] = spawn(r)

    deadline = time.monotonic() + plan.get("deadline_s", 240)
    failure = None
    try:
        for r in (0, 1):
            start(r)
        while running:
            if time.monotonic() > deadline:
                failure = f"the job did not finish within {plan.get('deadline_s', 240)} s"
                break
            if plan.get("stop_when") and _stop_condition(plan["stop_when"], out):
                break
            for r, (proc, n) in list(running.items()):
                code = proc.poll()
                if code is None:
                    continue
                del running[r]
                exits.append({"replica": r, "incarnation": n, "code": code})
                if code == -signal.SIGKILL and r in spares:
                    start(r)
                elif code not in (0, -signal.SIGKILL):
                    tail = (out / f"replica{r}.{n}.stderr").read_text(errors="replace")[-3000:]
                    failure = f"replica {r} incarnation {n} exited with {code}:\n{tail}"
            if failure:
                break
            time.sleep(0.05)
    finally:
        for proc, _ in spares.values():
            proc.kill()
            proc.wait()
        for r, (proc, n) in running.items():
            code = proc.poll()
            if code is None:
                proc.kill()
                proc.wait()
            exits.append(
                {"replica": r, "incarnation": n, "code": "killed by the orchestrator" if code is None else code}
            )
        lighthouse.shutdown()
    events = []
    for r in (0, 1):
        path = out / f"replica{r}.jsonl"
        if path.exists():
            events += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    left = _leftovers(token)
    result = {"failure": failure, "exits": exits, "events": events, "left": left}
    (out / "events.json").write_text(json.dumps(result))
    print(f"JOB {'FAILED' if failure else 'OK'}: {len(events)} events, exits {exits}, left {left}")
    if failure:
        print(failure)


def _stop_condition(cond: dict[str, Any], out: Path) -> bool:
    """Whether incarnation ``cond['incarnation']`` of replica ``cond['replica']`` logged a ``cond['event']``."""
    path = out / f"replica{cond['replica']}.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    for line in lines:
        try:
            ev = json.loads(line)
        except ValueError:
            continue  # being written
        if ev["ev"] == cond["event"] and ev["incarnation"] == cond["incarnation"]:
            return True
    return False


if __name__ == "__main__":
    if sys.argv[1] == "replica":
        replica()
    elif sys.argv[1] == "run":
        run(json.loads(sys.argv[2]), Path(sys.argv[3]))
    else:
        raise SystemExit(f"usage: {sys.argv[0]} run PLAN_JSON OUT_DIR | replica")
