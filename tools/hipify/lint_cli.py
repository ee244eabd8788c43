"""``python -m tools lint SRC... [--json] [--hip-version X.Y] [-D NAME[=VALUE]] [-U NAME] [--cuda-units S]``: the
hipify report without writing outputs.

Lists hazards and unportable names in CUDA sources, exits 1 when any blocking finding remains. Findings are scoped as
the hipify report's are (tools/hipify/scope.py): not reported in branches the build's defines decide against, and
blocking only in CUDA units and the headers they include.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tools.hipify.cli import add_build_options, build_defines, cuda_unit_suffixes
from tools.hipify.model import Finding, HipifyOptions
from tools.hipify.tree import (
    SOURCE_SUFFIXES,
    Key,
    _abs,
    _process,
    _project_mask_pass,
    _Scope,
    _translator,
    _walk,
    detect_hip_version,
    parse_hip_version,
    resolve_includes,
)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools lint", description=__doc__.split("\n\n")[0])
    ap.add_argument("sources", nargs="+", type=Path, metavar="SRC")
    ap.add_argument("--hip-version", metavar="X.Y", help="target HIP version (default: the ROCm found)")
    ap.add_argument("--mappings", type=Path, metavar="FILE", help="project mapping overrides")
    ap.add_argument("--hazards-only", action="store_true", help="only the lint's hazards")
    ap.add_argument("--json", action="store_true", help="print findings as JSON on stdout")
    add_build_options(ap)
    args = ap.parse_args(argv)
    version = parse_hip_version(args.hip_version) if args.hip_version else detect_hip_version()
    overrides = str(args.mappings.resolve()) if args.mappings else None
    options = HipifyOptions(
        hip_version=version, defines=build_defines(args.macros), cuda_units=cuda_unit_suffixes(args.cuda_units)
    )
    # (an output directory that cannot hold a source: nothing is written there)
    srcs, roots = _walk(args.sources, _abs(Path("/nonexistent-hipify-lint-output")))
    srcs = [s for s in srcs if not s.is_dir_root or s.path.suffix.lower() in SOURCE_SUFFIXES]
    key: Key = (overrides, version, False, True, False, False, ())
    tr = _translator(*key)  # validates the override file early
    paths = [s.key for s in srcs]
    procs = [_process(path, True, key, True) for path in paths]
    procs, _redone = _project_mask_pass(paths, procs, key, True)
    where = _Scope(srcs, procs, resolve_includes(srcs, procs, roots), tr, options)
    project_macros = {d for p in procs for d in p.defines}
    findings: list[Finding] = []
    for s, p in zip(srcs, procs):
        if p.mode == "error":
            findings.append(
                Finding(
                    s.path,
                    0,
                    0,
                    s.path.name,
                    kind="error",
                    reason=p.error,
                    suggestion="check the file's permissions",
                    blocking=True,
                    rule="unreadable",
                )
            )
        findings += [
            f for f in where.findings(s.path, s.key, p, project_macros) if not args.hazards_only or f.kind == "hazard"
        ]
    findings.sort(key=Finding.sort_key)
    if args.json:
        json.dump([f.to_json() for f in findings], sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        for f in findings:
            print(f"{f}\n    fix: {f.suggestion}")
    n_blocking = sum(1 for f in findings if f.blocking)
    skipped = f" ({where.skipped} in branches the build does not compile, not reported)" if where.skipped else ""
    print(f"lint: {len(findings)} findings{skipped}, {n_blocking} blocking", file=sys.stderr)
    return 1 if n_blocking else 0
