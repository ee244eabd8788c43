"""``python -m tools check [--strict] [--report FILE]``: the pre-merge check over all of csrc/.

Lint (hipify's findings) and both compiles, nvcc for the CUDA archs and HIP-Clang for the ROCm archs,
of every translation unit under csrc/ with the flags the build uses; plus csrc/manifest.toml checked as the
build reads it. Exit status: 0 when both sides compile and nothing blocking remains (a side without a
toolkit is skipped, and fails the check only under ``--strict``, which CI uses); 1 otherwise; 2 for a
usage error.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from tools.port import manifest
from tools.port.cli import add_common_arguments, execute, request_from_args
from tools.port.render import format_result
from tools.port.report import report_format, write_report
from tools.port.sources import tree_files


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m tools check",
        description="Pre-merge check of csrc/: hipify lint and a CUDA and a ROCm compile of every unit.",
        epilog="Exit status: 0 both sides compile and nothing blocking remains; 1 otherwise; 2 usage error.",
    )
    add_common_arguments(ap)
    ap.add_argument("--diff", action="store_true", help="also print the CUDA -> HIP diff (the report has it)")
    return ap


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    environ = dict(os.environ)
    if args.report is not None:
        report_format(args.report)
    csrc = Path(os.path.abspath(args.project)) / "csrc"
    files = tree_files(csrc) if csrc.is_dir() else []
    request = request_from_args(args, files, environ)
    result, style = execute(request, out=sys.stdout, err=sys.stderr, colour_choice=args.color, environ=environ)
    lines = format_result(
        result, style, command="check", strict=args.strict, diff=args.diff or args.verbose, verbose=args.verbose
    )
    manifest_problems = manifest.check_manifest(csrc)
    for problem in manifest_problems:
        lines.append(style(f"  - manifest: {problem}", "red"))
    print("\n".join(lines))
    if args.report is not None:
        path = write_report(args.report, result, title="check: csrc/", strict=args.strict)
        print(f"report: {path}")
    return 1 if result.problems(args.strict) or manifest_problems else 0
