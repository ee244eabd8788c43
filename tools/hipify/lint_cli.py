"""``python -m tools lint SRC... [--json] [--hip-version X.Y]``: the hipify report without writing outputs.

Lists hazards and unportable names in CUDA sources, exits 1 when any blocking finding remains.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from tools.errors import ToolError
from tools.hipify.model import Finding
from tools.hipify.tree import (
    SKIP_DIRS,
    SOURCE_SUFFIXES,
    Key,
    _process,
    _project_mask_pass,
    _translator,
    detect_hip_version,
    parse_hip_version,
)


def _files(sources: list[Path]) -> list[Path]:
    out: list[Path] = []
    for src in sources:
        if src.is_dir():
            for dirpath, dirnames, filenames in os.walk(src):
                dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not d.startswith("."))
                out += [Path(dirpath) / f for f in sorted(filenames) if Path(f).suffix.lower() in SOURCE_SUFFIXES]
        elif src.is_file():
            out.append(src)
        else:
            raise ToolError(f"source not found: {src}")
    return out


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools lint", description=__doc__.split("\n\n")[0])
    ap.add_argument("sources", nargs="+", type=Path, metavar="SRC")
    ap.add_argument("--hip-version", metavar="X.Y", help="target HIP version (default: the ROCm found)")
    ap.add_argument("--mappings", type=Path, metavar="FILE", help="project mapping overrides")
    ap.add_argument("--hazards-only", action="store_true", help="only the lint's hazards")
    ap.add_argument("--json", action="store_true", help="print findings as JSON on stdout")
    args = ap.parse_args(argv)
    version = parse_hip_version(args.hip_version) if args.hip_version else detect_hip_version()
    overrides = str(args.mappings.resolve()) if args.mappings else None
    files = _files(args.sources)
    key: Key = (overrides, version, False, True, False, False, ())
    _translator(*key)  # validate the override file early
    findings: list[Finding] = []
    results = [_process(str(path), True, key, True) for path in files]
    results, _redone = _project_mask_pass([str(p) for p in files], results, key, True)
    for path, res in zip(files, results):
        if res.mode == "error":
            findings.append(
                Finding(
                    path,
                    0,
                    0,
                    path.name,
                    kind="error",
                    reason=res.error,
                    suggestion="check the file's permissions",
                    blocking=True,
                    rule="unreadable",
                )
            )
        for line, col, name, kind, reason, sugg, blocking, rule in res.findings:
            if args.hazards_only and kind != "hazard":
                continue
            findings.append(
                Finding(
                    path,
                    line,
                    col,
                    name,
                    kind=kind,
                    reason=reason,
                    suggestion=sugg,
                    blocking=blocking,
                    rule=rule,
                )
            )
    findings.sort(key=Finding.sort_key)
    if args.json:
        json.dump([f.to_json() for f in findings], sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        for f in findings:
            print(f"{f}\n    fix: {f.suggestion}")
    n_blocking = sum(1 for f in findings if f.blocking)
    print(f"lint: {len(findings)} findings, {n_blocking} blocking", file=sys.stderr)
    return 1 if n_blocking else 0
