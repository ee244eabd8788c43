"""``python -m tools gen-compat [--check] [--refresh-headers [--cuda-include DIR] [--hip-include DIR]]``.

Writes rust/rocm_compat/src/generated/*.rs and rust/rocm_compat/shim/generated/*.c from the hipify
mapping database, the header snapshot and a scan of rust/ for the CUDA names the workspace uses.

Exit status: 0 done (or, with ``--check``, everything fresh); 1 with ``--check`` when a generated file
is stale; 2 for a usage error or a name that cannot be provided (one message, no traceback).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from tools.errors import ToolError
from tools.gen_compat.generate import render_all, stale
from tools.gen_compat.headers import SNAPSHOT, Snapshot, read_cuda, read_hip, read_snapshot, write_snapshot
from tools.hipify.mapping import load_database

ROOT = Path(__file__).resolve().parents[2]


def _default_cuda_include() -> Path:
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            return Path(os.environ[var]) / "include"
    toolchains = Path(os.environ.get("MONARCH_TOOLCHAINS", Path.home() / ".cache" / "monarch-runtime" / "toolchains"))
    return toolchains / "cuda-home" / "include"


def _default_hip_include() -> Path:
    for var in ("ROCM_HOME", "ROCM_PATH"):
        if os.environ.get(var):
            return Path(os.environ[var]) / "include"
    return Path("/usr/include")


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m tools gen-compat",
        description="Generate rocm_compat's CUDA-named alias layer from the hipify mapping database.",
    )
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 if a generated file is stale")
    ap.add_argument(
        "--refresh-headers",
        action="store_true",
        help="re-read the CUDA and HIP headers into tools/gen_compat/data/headers.tsv first",
    )
    ap.add_argument("--cuda-include", type=Path, metavar="DIR", help="CUDA include/ (default: $CUDA_HOME/include)")
    ap.add_argument("--hip-include", type=Path, metavar="DIR", help="ROCm include/ (default: $ROCM_HOME/include)")
    ap.add_argument("--root", type=Path, default=ROOT, help="repository root (default: this checkout)")
    ap.add_argument("--snapshot", type=Path, default=SNAPSHOT, help=argparse.SUPPRESS)
    return ap


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    root: Path = args.root.resolve()
    if not (root / "rust" / "rocm_compat").is_dir():
        raise ToolError(f"{root} is not a monarch-runtime checkout (no rust/rocm_compat)")
    if args.refresh_headers:
        if args.check:
            raise ToolError("--check and --refresh-headers do not go together")
        cuda_inc = args.cuda_include or _default_cuda_include()
        hip_inc = args.hip_include or _default_hip_include()
        snap = Snapshot(cuda=read_cuda(cuda_inc), hip=read_hip(hip_inc))
        write_snapshot(args.snapshot, snap, (str(cuda_inc), str(hip_inc)))
        print(
            f"gen-compat: header snapshot from CUDA {snap.cuda.version} and HIP {snap.hip.version} -> {args.snapshot}"
        )
    snap = read_snapshot(args.snapshot)
    outputs = render_all(root, load_database(), snap)
    if args.check:
        bad = stale(root, outputs.items())
        if bad:
            print("gen-compat: stale generated files (run `python -m tools gen-compat`):")
            for rel in bad:
                print(f"  {rel}")
            return 1
        print(f"gen-compat: {len(outputs)} generated files are fresh")
        return 0
    for rel, text in outputs.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            print(f"gen-compat: wrote {rel}")
    for rel in stale(root, outputs.items()):
        (root / rel).unlink()
        print(f"gen-compat: removed {rel}")
    return 0
