"""``python -m tools port FILE.cu [more] [--hip-version X.Y] [--cuda-archs A..] [--rocm-archs A..]
[--report FILE.html|.md] [--add] [--strict]``: port CUDA sources to HIP and prove it compiles both ways.

Hipifies the files and the project headers they include, shows every lint finding at its source line,
compiles the CUDA side with nvcc and the ROCm side with HIP-Clang, shows the CUDA -> HIP diff, and
optionally writes a report and registers the kernel in the build manifest (``--add``).

Exit status: 0 when both sides compile and nothing blocking remains (a side whose toolkit is missing is
skipped with the reason, and fails the run only under ``--strict``); 1 otherwise; 2 for a usage error.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TextIO

from buildcore.errors import BuildError
from tools.errors import ToolError
from tools.hipify.cli import add_macro_options, build_defines
from tools.hipify.tree import parse_hip_version
from tools.port.engine import PortRequest, PortResult, run_port
from tools.port.render import COLOR_CHOICES, ProgressLine, Style, format_result, interactive, use_colour
from tools.port.toolkits import Side, find_side

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

PROJECT = Path(__file__).resolve().parents[2]


def split_archs(values: Sequence[str] | None) -> tuple[str, ...]:
    out: list[str] = []
    for value in values or ():
        out += [a for a in re.split(r"[;,\s]+", value) if a]
    return tuple(dict.fromkeys(out))


def add_common_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument(
        "--hip-version",
        metavar="X.Y",
        help="target HIP version (default: the project's hip-version setting, else the ROCm found)",
    )
    ap.add_argument(
        "--cuda-archs",
        nargs="+",
        metavar="ARCH",
        help="CUDA architectures, e.g. 80 90 (default: the build's, 80;90)",
    )
    ap.add_argument(
        "--rocm-archs",
        nargs="+",
        metavar="ARCH",
        help="ROCm architectures, e.g. gfx90a (default: the build's, the CDNA targets the compiler accepts)",
    )
    ap.add_argument("--no-cuda", action="store_true", help="skip the CUDA side (reported as skipped)")
    ap.add_argument("--no-rocm", action="store_true", help="skip the ROCm side (reported as skipped)")
    ap.add_argument(
        "--report", type=Path, metavar="FILE", help="write a report: FILE.md (Markdown), FILE.html or FILE.json"
    )
    ap.add_argument("--strict", action="store_true", help="also fail when a side is skipped (no toolkit)")
    ap.add_argument("--project", type=Path, default=PROJECT, metavar="DIR", help="the monarch-runtime checkout")
    ap.add_argument("--mappings", type=Path, metavar="FILE", help="hipify mapping overrides (TSV or JSON)")
    ap.add_argument("-o", "--output", type=Path, metavar="DIR", help="keep the hipified files and objects here")
    ap.add_argument(
        "-I",
        "--include-dir",
        dest="include_dirs",
        action="append",
        type=Path,
        default=[],
        metavar="DIR",
        help="a directory of headers the sources include (repeatable; as the compiler's -I): they are hipified with "
        "the sources and passed to both compiles",
    )
    add_macro_options(ap)
    ap.add_argument("-j", "--jobs", type=int, default=2, help="parallel compiles (default 2)")
    ap.add_argument("--color", choices=COLOR_CHOICES, default="auto", help="colour output (default: on a terminal)")
    ap.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="print everything: every finding (also non-blocking ones and those in files no unit includes), every "
        "compiler message and the diff",
    )


def project_hip_version(project: Path, environ: Mapping[str, str]) -> tuple[int, int] | None:
    """The project's hip-version setting (MONARCH_HIP_VERSION, then [tool.monarch-runtime]), as the build reads it."""
    from buildcore import settings  # noqa: PLC0415

    pyproject: dict[str, object] = {}
    path = project / "pyproject.toml"
    if path.is_file():
        try:
            pyproject = tomllib.loads(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, tomllib.TOMLDecodeError) as err:
            raise ToolError(f"{path} is not valid TOML: {err}") from None
    try:
        return settings.load(None, environ, pyproject).hip_version
    except BuildError as err:
        raise ToolError(str(err)) from None


def user_include_dirs(given: Sequence[Path]) -> list[Path]:
    """The ``-I`` directories, checked: each must be a readable directory, and not a CUDA toolkit's own include
    directory (the port finds the toolkits itself; its headers are not the project's to hipify)."""
    out: list[Path] = []
    for directory in given:
        path = Path(os.path.abspath(directory))
        why = ""
        if not path.exists():
            why = "does not exist"
        elif not path.is_dir():
            why = "is a file, not a directory"
        else:
            try:
                next(os.scandir(path), None)
            except OSError as err:
                why = f"cannot be read ({err.strerror or err})"
        if why:
            raise ToolError(
                f"-I {directory}: {path} {why}. -I names a directory of headers that the sources include, as the "
                "compiler's -I does (the directory holding the header, or the one an include's path starts from: "
                "-I include for #include <mylib/x.h> in include/mylib/x.h); check the path, relative to the current "
                "directory."
            )
        if (path / "cuda_runtime.h").is_file() or (path / "cuda_runtime_api.h").is_file():
            raise ToolError(
                f"-I {directory}: {path} is a CUDA toolkit's include directory. The port finds the toolkits itself "
                "(CUDA_HOME, ROCM_HOME) and never hipifies their headers; give -I only for the project's own headers."
            )
        out.append(path)
    return list(dict.fromkeys(out))


def request_from_args(args: argparse.Namespace, files: Sequence[Path], environ: Mapping[str, str]) -> PortRequest:
    if args.jobs < 1:
        raise ToolError("--jobs must be at least 1")
    project = Path(os.path.abspath(args.project))
    csrc = project / "csrc"
    if not csrc.is_dir():
        raise ToolError(f"{project} has no csrc/ directory; run from a monarch-runtime checkout or pass --project")
    include_dirs = [*user_include_dirs(args.include_dirs), csrc]
    version = parse_hip_version(args.hip_version) if args.hip_version else project_hip_version(project, environ)
    sides: list[Side] = [
        find_side(
            "cuda", split_archs(args.cuda_archs), environ, enabled=not args.no_cuda, why_disabled="--no-cuda was given."
        ),
        find_side(
            "rocm", split_archs(args.rocm_archs), environ, enabled=not args.no_rocm, why_disabled="--no-rocm was given."
        ),
    ]
    return PortRequest(
        files=list(files),
        include_dirs=list(dict.fromkeys(include_dirs)),
        sides=sides,
        hip_version=version,
        environ=dict(environ),
        work_dir=Path(os.path.abspath(args.output)) if args.output else None,
        jobs=args.jobs,
        mappings=args.mappings,
        defines=build_defines(args.macros),
    )


def execute(
    request: PortRequest, *, out: TextIO, err: TextIO, colour_choice: str, environ: Mapping[str, str]
) -> tuple[PortResult, Style]:
    style = Style(use_colour(colour_choice, out, environ))
    progress = ProgressLine(err, interactive(err, environ))
    try:
        result = run_port(request, progress)
    finally:
        progress.close()
    return result, style


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m tools port",
        description="Port CUDA sources to HIP: hipify, lint, compile both sides, diff, report; --add registers it.",
        epilog="Exit status: 0 both sides compile and nothing blocking remains; 1 otherwise; 2 usage error.",
    )
    ap.add_argument("files", nargs="+", type=Path, metavar="FILE", help="CUDA sources (.cu, .cuh, .h, ...)")
    add_common_arguments(ap)
    ap.add_argument(
        "--add", action="store_true", help="register the kernel in csrc/manifest.toml (when the port passes)"
    )
    ap.add_argument("--name", help="with --add: the kernel's name (default: the file's stem)")
    ap.add_argument("--entry", help='with --add: the entry point (default: the one extern "C" entry it defines)')
    ap.add_argument("--diff", action="store_true", help="also print the CUDA -> HIP diff (the report has it)")
    ap.add_argument("--no-diff", action="store_true", help="never print the diff, also with --verbose")
    return ap


def main(argv: list[str]) -> int:
    from tools.port import manifest  # noqa: PLC0415
    from tools.port.report import report_format, write_report  # noqa: PLC0415

    args = build_parser().parse_args(argv)
    environ = dict(os.environ)
    if args.report is not None:
        report_format(args.report)  # a bad name fails before any work
    if (args.name or args.entry) and not args.add:
        raise ToolError("--name and --entry go with --add")
    kernels = [f for f in args.files if f.suffix == ".cu"]
    if args.add and len(kernels) != 1:
        raise ToolError(f"--add registers one kernel: give exactly one .cu file (got {len(kernels)})")
    if args.add and args.macros:
        given = " ".join(f"-{kind} {text}" for kind, text in args.macros)
        raise ToolError(
            f"--add with {given}: the build compiles csrc/ without your -D/-U, so a kernel registered with them "
            "would not be the one that was checked. Port it without them (put what they select in the source)."
        )
    request = request_from_args(args, args.files, environ)
    csrc = Path(os.path.abspath(args.project)) / "csrc"
    extra = [d for d in request.include_dirs if d != csrc]  # the user's -I directories
    if args.add:  # conflicts (name, entry point, file to overwrite) are reported before the slow part
        manifest.register(kernels[0], csrc, name=args.name, entry=args.entry, dry_run=True, include_dirs=extra)
    result, style = execute(request, out=sys.stdout, err=sys.stderr, colour_choice=args.color, environ=environ)
    show_diff = (args.diff or args.verbose) and not args.no_diff
    lines = format_result(result, style, command="port", strict=args.strict, diff=show_diff, verbose=args.verbose)
    print("\n".join(lines))
    if args.report is not None:
        title = "port: " + ", ".join(f.name for f in args.files)
        path = write_report(args.report, result, title=title, strict=args.strict)
        print(f"report: {path}")
    if result.problems(args.strict):
        if args.add:
            print("add: not registered, because the port fails (fix the problems above first)", file=sys.stderr)
        return 1
    if args.add:
        reg = manifest.register(kernels[0], csrc, name=args.name, entry=args.entry, include_dirs=extra)
        print("\n".join(manifest.describe(reg, csrc)))
    return 0
