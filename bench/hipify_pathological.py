"""Pathological inputs for hipify (issue 8): a single 50 MB source, a tree of 20,000 files, a 10 MB
line, a 200-deep directory chain. Each case runs in its own process; prints wall time, throughput and
peak memory (max RSS), plus the time ratios that show growth is linear (size x5 -> time ~x5).

    python bench/hipify_pathological.py [--small]     # --small: a tenth of every size, for a quick look
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = b"".join(p.read_bytes() for p in sorted((ROOT / "csrc").glob("*.cu")))

CHILD = textwrap.dedent(
    """
    import json, sys, time
    from pathlib import Path
    sys.path.insert(0, sys.argv[3])
    from tools.hipify import HipifyOptions, hipify_tree
    start = time.perf_counter()
    result = hipify_tree([Path(sys.argv[1])], Path(sys.argv[2]), HipifyOptions(hip_version=(5, 2)))
    elapsed = time.perf_counter() - start
    # VmHWM belongs to this address space; ru_maxrss would carry the parent's peak across execve.
    hwm_kb = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
    rss_mb = hwm_kb / 1024
    print(json.dumps({"seconds": elapsed, "rss_mb": rss_mb, "outputs": len(result.outputs)}))
    """
)


def blob(size: int) -> bytes:
    return (SOURCE * (size // len(SOURCE) + 1))[:size]


def run_case(tree: Path) -> dict[str, float]:
    out = tree.parent / "out"
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(tree), str(out), str(ROOT)], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        sys.exit(proc.stderr)
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def make(kind: str, scale: float, base: Path) -> tuple[Path, int]:
    tree = base / "src"
    tree.mkdir(parents=True)
    if kind.startswith("one file"):
        size = int(float(kind.split()[2]) * 1e6 * scale)
        (tree / "big.cu").write_bytes(blob(size))
        return tree, size
    if kind.startswith("files"):
        count = int(int(kind.split()[1]) * scale)
        chunk = blob(2048)
        for i in range(count):
            sub = tree / f"d{i // 500}"
            sub.mkdir(exist_ok=True)
            (sub / f"k{i}.cu").write_bytes(chunk)
        return tree, count * len(chunk)
    if kind.startswith("one line"):
        size = int(float(kind.split()[2]) * 1e6 * scale)
        (tree / "line.cu").write_bytes(blob(size).replace(b"\n", b" "))
        return tree, size
    depth = int(int(kind.split()[1]) * max(scale, 0.5))
    d = tree
    for i in range(depth):
        d = d / f"level{i}"
    d.mkdir(parents=True)
    (d / "deep.cu").write_bytes(blob(4096))
    return tree, 4096


def main() -> None:
    scale = 0.1 if "--small" in sys.argv else 1.0
    cases = ["one file 10", "one file 50", "files 2000", "files 20000", "one line 2", "one line 10", "depth 200"]
    results: dict[str, dict[str, float]] = {}
    print(f"{'case':18} {'MB':>8} {'seconds':>8} {'MB/s':>8} {'peak RSS MB':>12}")
    for kind in cases:
        with tempfile.TemporaryDirectory() as tmp:
            tree, size = make(kind, scale, Path(tmp))
            r = run_case(tree)
            results[kind] = r
            print(
                f"{kind:18} {size / 1e6:8.1f} {r['seconds']:8.2f} {size / 1e6 / r['seconds']:8.1f} {r['rss_mb']:12.0f}"
            )
    print()
    print(
        f"linearity: 50 MB / 10 MB file time = {results['one file 50']['seconds'] / results['one file 10']['seconds']:.2f} (ideal 5)"
    )
    print(
        f"linearity: 20000 / 2000 files time = {results['files 20000']['seconds'] / results['files 2000']['seconds']:.2f} (ideal 10)"
    )
    print(
        f"linearity: 10 MB / 2 MB line time  = {results['one line 10']['seconds'] / results['one line 2']['seconds']:.2f} (ideal 5)"
    )
    print(
        f"peak RSS 20000 files vs 2000 files: {results['files 20000']['rss_mb']:.0f} MB vs {results['files 2000']['rss_mb']:.0f} MB"
    )


if __name__ == "__main__":
    main()
