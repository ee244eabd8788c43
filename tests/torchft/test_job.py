"""A real TorchFT job healing through PeerTransport (tests/torchft/job.py): two replica groups as
processes on CPU with Gloo, TorchFT's lighthouse and Manager, a small deterministic model.

- a replica SIGKILLed at step 3 and restarted heals from the other: both end bit-identical (parameters
  and optimizer state) and reach step 8 with the losses and states of a fault-free run of the seed;
- 10 rounds of SIGKILL and restart, both replicas in turn, every heal verified against the fault-free
  run, descriptors and threads of the long-lived donors flat, nothing left running;
- side by side with TorchFT's PGTransport in the same job: one chunk corrupted in flight (ours:
  ChecksumMismatch on both, the receiver keeps its state, the Manager does not commit and heals again at
  the next quorum; PGTransport: the corrupted state taken silently, the replicas diverge), and the donor
  SIGKILLed half-way through the heal (ours: the receiver's tensors unchanged bit for bit; PGTransport's
  in-place receive: a mix of the donor's and its own);
- with ``commit="swap"``: the corrupted heal fails and leaves the receiver as it was, the retry heals
  (the optimizer's state taking over the memory it arrived in, the model's parameters, which the
  Manager's state holds as Module.state_dict()'s detached aliases, copied) and the run ends as the
  fault-free one; a donor SIGKILLed half-way leaves the receiver's tensors bit for bit as they were.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow

JOB = Path(__file__).with_name("job.py")
SEED = 7
KILL_STEP = 3
STEPS = 8
ROUNDS_STEPS = 22
#: The chunk (of 54, PeerTransport) and tensor (of 24, PGTransport) at which the donor dies: half-way.
HALF = {"kind": "kill", "at_chunk": 27, "at_tensor": 12}


def run_job(python: Path, out: Path, plan: dict[str, Any], timeout: float = 240) -> dict[str, Any]:
    """Runs the orchestrator in a process group of its own, killed whatever happens."""
    plan = {"seed": SEED, "deadline_s": timeout - 20, **plan}
    log = out.with_suffix(".log")
    with log.open("wb") as fh:
        proc = subprocess.Popen(
            [str(python), str(JOB), "run", json.dumps(plan), str(out)],
            stdout=fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            proc.wait(timeout=timeout)
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
    text = log.read_text(errors="replace")
    assert proc.returncode == 0, text[-4000:]
    result = json.loads((out / "events.json").read_text())
    assert result["failure"] is None, result["failure"]
    assert result["left"] == [], f"processes of the job still running: {result['left']}"
    return result


def events(result: dict[str, Any], replica: int, kind: str | None = None) -> list[dict[str, Any]]:
    return [e for e in result["events"] if e["replica"] == replica and (kind is None or e["ev"] == kind)]


def commits(result: dict[str, Any], replica: int) -> dict[int, dict[str, Any]]:
    """Each committed step of a replica (over its incarnations) -> that commit (loss, digests)."""
    out: dict[int, dict[str, Any]] = {}
    for e in events(result, replica, "commit"):
        assert e["step"] not in out or out[e["step"]]["digests"] == e["digests"], f"step {e['step']} twice"
        out[e["step"]] = e
    return out


def heals(result: dict[str, Any], replica: int) -> list[dict[str, Any]]:
    """The quorums at which an incarnation came back (started at step 0) and took a donor's step."""
    return [e for e in events(result, replica, "quorum") if e["before"] == 0 and e["step"] > 0]


def same_trajectory(result: dict[str, Any], reference: dict[str, Any], steps: int) -> None:
    for r in (0, 1):
        got, want = commits(result, r), commits(reference, r)
        assert sorted(got) == list(range(1, steps + 1)), f"replica {r} committed steps {sorted(got)}"
        for step in got:
            assert got[step]["loss"] == want[step]["loss"], f"replica {r} step {step}: loss differs"
            assert got[step]["digests"] == want[step]["digests"], f"replica {r} step {step}: state differs"
        (done,) = [e for e in events(result, r, "done")]
        assert done["step"] == steps
        assert not [t for t in done["py_threads"] if t.startswith("monarch-peer")], done["py_threads"]
    final = [events(result, r, "done")[0]["digests"] for r in (0, 1)]
    assert final[0] == final[1], "the replicas' final states differ"


@pytest.fixture(scope="module")
def reference(torchft_python: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The fault-free run of the seed (ROUNDS_STEPS steps): what every faulty run must reproduce."""
    out = tmp_path_factory.mktemp("reference") / "job"
    result = run_job(
        torchft_python, out, {"steps": ROUNDS_STEPS, "transport": "peer", "replicas": {"0": [{}], "1": [{}]}}
    )
    assert not heals(result, 0) and not heals(result, 1)
    # The replicas move together: identical states after every step (their losses are their own batches').
    for step, commit in commits(result, 0).items():
        assert commit["digests"] == commits(result, 1)[step]["digests"]
    return result


@pytest.mark.fault
def test_sigkill_then_heal_through_peer_transport(
    torchft_python: Path, reference: dict[str, Any], tmp_path: Path
) -> None:
    plan = {"steps": STEPS, "transport": "peer", "replicas": {"0": [{}], "1": [{"kill_at": KILL_STEP}, {}]}}
    result = run_job(torchft_python, tmp_path / "job", plan)
    assert [e["code"] for e in result["exits"] if e["replica"] == 1] == [-signal.SIGKILL, 0]
    (heal,) = heals(result, 1)
    assert heal["step"] == KILL_STEP and heal["error"] is None
    # The healed replica holds the donor's state at that step, bit for bit, parameters and optimizer state.
    assert heal["digests"] == commits(result, 0)[KILL_STEP]["digests"]
    assert any(k.startswith("user.default.optim.state.") for k in heal["digests"])
    (received,) = events(result, 1, "received")
    assert received["reports"][0]["bytes"] > 500_000 and received["reports"][0]["chunks"] > 1
    same_trajectory(result, reference, STEPS)


@pytest.mark.fault
def test_ten_rounds_of_sigkill_every_heal_verified(
    torchft_python: Path, reference: dict[str, Any], tmp_path: Path
) -> None:
    """Replica 1 killed at steps 2, 4, ... 10 (replica 0's first life donates five times), then replica 0
    at 12, ... 20 (replica 1's last life donates five times)."""
    plan = {
        "steps": ROUNDS_STEPS,
        "transport": "peer",
        "replicas": {
            "0": [{"kill_at": s} for s in (12, 14, 16, 18, 20)] + [{}],
            "1": [{"kill_at": s} for s in (2, 4, 6, 8, 10)] + [{}],
        },
    }
    result = run_job(torchft_python, tmp_path / "job", plan, timeout=300)
    kills = [e for e in result["exits"] if e["code"] == -signal.SIGKILL]
    assert len(kills) == 10
    healed = heals(result, 0) + heals(result, 1)
    assert sorted(h["step"] for h in healed) == [2, 4, 6, 8, 10, 12, 14, 16, 18, 20]
    for heal in healed:
        donor = 1 - heal["replica"]
        assert heal["error"] is None, heal
        assert heal["digests"] == commits(result, donor)[heal["step"]]["digests"], f"heal at {heal['step']}"
        assert heal["digests"] == commits(reference, donor)[heal["step"]]["digests"]
    # The two long-lived donors: descriptors and threads flat from their first heal served to their last.
    for replica, incarnation in ((0, 0), (1, 5)):
        mine = [e for e in events(result, replica) if e["incarnation"] == incarnation]
        sent = [i for i, e in enumerate(mine) if e["ev"] == "sent"]
        assert len(sent) == 5, f"replica {replica}.{incarnation} served {len(sent)} heals"
        after = [(e["fds"], e["threads"]) for e in mine[sent[0] :] if e["ev"] == "commit"]
        assert len(set(after)) == 1, f"replica {replica}.{incarnation}: (fds, threads) over its heals: {after}"
    same_trajectory(result, reference, ROUNDS_STEPS)


def kill_then_fault(transport: str, fault: dict[str, Any], **plan: Any) -> dict[str, Any]:
    return {
        "steps": STEPS,
        "transport": transport,
        "replicas": {"0": [{"donor_fault": fault}], "1": [{"kill_at": KILL_STEP}, {}]},
        **plan,
    }


@pytest.mark.fault
def test_corrupted_chunk_side_by_side(torchft_python: Path, reference: dict[str, Any], tmp_path: Path) -> None:
    corrupt = {"kind": "corrupt"}
    ours = run_job(torchft_python, tmp_path / "peer", kill_then_fault("peer", corrupt))
    theirs = run_job(torchft_python, tmp_path / "pg", kill_then_fault("pg", corrupt))
    leaf = "user.default.model.0.weight"
    for result in (ours, theirs):
        assert [e["kind"] for e in events(result, 0, "fault")] == ["corrupt"]

    # PeerTransport: ChecksumMismatch on both, naming the leaf; the receiver keeps its own state.
    (failed,) = events(ours, 1, "recv_failed")
    assert failed["error"].startswith("ChecksumMismatch") and leaf in failed["error"]
    (send_failed,) = events(ours, 0, "send_failed")
    assert send_failed["error"].startswith("ChecksumMismatch") and leaf in send_failed["error"]
    restarted = [e for e in events(ours, 1) if e["incarnation"] == 1]
    start, first_quorum = restarted[0], restarted[2]
    assert first_quorum["ev"] == "quorum" and first_quorum["step"] == 0 and "ChecksumMismatch" in first_quorum["error"]
    assert first_quorum["digests"] == start["digests"], "the receiver took (part of) a corrupted state"
    # What the Manager then does: that step is not committed (on either replica); the next quorum heals
    # again, from the intact donor (its own tensor restored after the chunk went), and the job goes on
    # exactly as the fault-free run.
    assert restarted[3]["ev"] == "no_commit"
    assert any(e["ev"] == "no_commit" and "ChecksumMismatch" in (e["error"] or "") for e in events(ours, 0))
    (heal,) = heals(ours, 1)
    assert heal["step"] == KILL_STEP and heal["error"] is None
    assert heal["digests"] == commits(reference, 0)[KILL_STEP]["digests"]
    same_trajectory(ours, reference, STEPS)

    # PGTransport, same job, same bit flipped in flight: taken silently, committed, and the replicas
    # diverge from there on.
    assert not events(theirs, 1, "recv_failed") and not events(theirs, 0, "send_failed")
    (heal,) = heals(theirs, 1)
    assert heal["step"] == KILL_STEP and heal["error"] is None
    donor_state = commits(theirs, 0)[KILL_STEP]["digests"]
    assert [k for k in donor_state if heal["digests"][k] != donor_state[k]] == [leaf]
    assert KILL_STEP + 1 in commits(theirs, 1), "PGTransport's receiver committed the next step"
    final = [events(theirs, r, "done")[0]["digests"] for r in (0, 1)]
    assert final[0] != final[1], "the replicas should have diverged"
    assert final[1] != events(reference, 1, "done")[0]["digests"]


@pytest.mark.fault
def test_donor_killed_half_way_side_by_side(torchft_python: Path, tmp_path: Path) -> None:
    # The job stops once the receiver has seen the heal fail (no donor is left to go on with).
    stop = {"replica": 1, "incarnation": 1, "event": "quorum"}
    ours = run_job(torchft_python, tmp_path / "peer", kill_then_fault("peer", HALF, stop_when=stop))
    theirs = run_job(torchft_python, tmp_path / "pg", kill_then_fault("pg", HALF, stop_when=stop))
    results = {"peer": ours, "pg": theirs}
    outcome = {}
    for name, result in results.items():
        (fault,) = events(result, 0, "fault")
        assert fault["kind"] == "kill"
        assert {"replica": 0, "incarnation": 0, "code": -signal.SIGKILL} in result["exits"]
        restarted = [e for e in events(result, 1) if e["incarnation"] == 1]
        start = restarted[0]
        (failed,) = [e for e in restarted if e["ev"] == "recv_failed"]
        (quorum,) = [e for e in restarted if e["ev"] == "quorum"]
        assert quorum["step"] == 0 and quorum["error"], quorum
        donor = commits(result, 0)[KILL_STEP]["digests"]
        assert donor.keys() == start["digests"].keys() == quorum["digests"].keys()
        assert all(donor[k] != start["digests"][k] for k in donor if ".exp_avg" in k or "model" in k)
        outcome[name] = {
            "donor's": sorted(k for k in donor if quorum["digests"][k] == donor[k] != start["digests"][k]),
            "own": sorted(k for k in donor if quorum["digests"][k] == start["digests"][k]),
            "error": failed["error"],
        }
    # Ours: TransferAborted, and every tensor of the receiver exactly as it was.
    assert outcome["peer"]["error"].startswith("TransferAborted"), outcome["peer"]["error"]
    assert outcome["peer"]["donor's"] == [] and len(outcome["peer"]["own"]) == 24
    # PGTransport's in-place receive: the first half holds the donor's data, the rest the receiver's own.
    assert outcome["pg"]["donor's"] and outcome["pg"]["own"], outcome["pg"]
    assert "user.default.model.0.weight" in outcome["pg"]["donor's"]
    assert any(k.startswith("user.default.optim.state.5") for k in outcome["pg"]["own"])


@pytest.mark.fault
def test_swap_commit_corrupted_then_retried(torchft_python: Path, reference: dict[str, Any], tmp_path: Path) -> None:
    result = run_job(torchft_python, tmp_path / "job", kill_then_fault("peer", {"kind": "corrupt"}, commit="swap"))
    (failed,) = events(result, 1, "recv_failed")
    assert failed["error"].startswith("ChecksumMismatch"), failed
    restarted = [e for e in events(result, 1) if e["incarnation"] == 1]
    start, first_quorum = restarted[0], restarted[2]
    assert first_quorum["ev"] == "quorum" and "ChecksumMismatch" in first_quorum["error"]
    assert first_quorum["digests"] == start["digests"], "the receiver took (part of) a corrupted state"
    (heal,) = heals(result, 1)
    assert heal["step"] == KILL_STEP and heal["error"] is None
    assert heal["digests"] == commits(reference, 0)[KILL_STEP]["digests"]
    (received,) = events(result, 1, "received")
    (report,) = received["reports"]
    assert report["commit"] == "swap"
    optim = sorted(k for k in heal["digests"] if k.startswith("user.default.optim.state."))
    model = sorted(k for k in heal["digests"] if k.startswith("user.default.model."))
    assert sorted(report["swapped"]) == optim and len(optim) == 18
    assert sorted(report["copied"]) == model and all("detached alias" in w for w in report["copied"].values())
    same_trajectory(result, reference, STEPS)


@pytest.mark.fault
def test_swap_commit_donor_killed_half_way(torchft_python: Path, tmp_path: Path) -> None:
    stop = {"replica": 1, "incarnation": 1, "event": "quorum"}
    result = run_job(torchft_python, tmp_path / "job", kill_then_fault("peer", HALF, stop_when=stop, commit="swap"))
    assert {"replica": 0, "incarnation": 0, "code": -signal.SIGKILL} in result["exits"]
    restarted = [e for e in events(result, 1) if e["incarnation"] == 1]
    (failed,) = [e for e in restarted if e["ev"] == "recv_failed"]
    (quorum,) = [e for e in restarted if e["ev"] == "quorum"]
    assert failed["error"].startswith("TransferAborted"), failed["error"]
    assert quorum["step"] == 0 and quorum["error"] and quorum["digests"] == restarted[0]["digests"]
    donor = commits(result, 0)[KILL_STEP]["digests"]
    assert len(donor) == 24 and all(donor[k] != quorum["digests"][k] for k in donor if "model" in k)
