"""``python -m tools hipify SRC... -o OUT [--report FILE] [--hip-version X.Y] [--strict]``.

Exit status: 0 on success; 1 with ``--strict`` when anything unportable remains (blocking findings);
2 for a usage error (bad option, missing source).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from tools.errors import ToolError
from tools.hipify.model import ENGINES, LAUNCH_STYLES, NAMING_STYLES, HipifyOptions
from tools.hipify.tree import detect_hip_version, hipify_tree, parse_hip_version

TYPE_CHECKING = False
if TYPE_CHECKING:  # argparse is imported only when _fast_parse below cannot parse the command line
    import argparse


def _terminal_columns() -> int:
    """``shutil.get_terminal_size().columns`` without importing shutil (and bz2, lzma, ...) at start-up."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


def build_parser() -> argparse.ArgumentParser:
    import argparse  # noqa: PLC0415 - start-up time: see _fast_parse

    # argparse makes a HelpFormatter for every add_argument; given a width, it does not import shutil.
    width = _terminal_columns() - 2

    def formatter(prog: str) -> argparse.HelpFormatter:
        return argparse.HelpFormatter(prog, width=width)

    ap = argparse.ArgumentParser(
        prog="python -m tools hipify",
        description="Translate CUDA sources to HIP into OUT (never in place), with a report of what is left.",
        formatter_class=formatter,
    )
    ap.add_argument("sources", nargs="+", type=Path, metavar="SRC", help="source files or directories")
    ap.add_argument("-o", "--output", required=True, type=Path, metavar="OUT", help="output directory")
    ap.add_argument("--report", type=Path, metavar="FILE", help="write the JSON report here ('-': stdout)")
    ap.add_argument(
        "--hip-version",
        metavar="X.Y",
        help="target HIP version (default: the ROCm found, else no version limit)",
    )
    ap.add_argument("--strict", action="store_true", help="exit 1 when anything unportable remains")
    ap.add_argument(
        "--version",
        action="store_true",
        help="print the mapping database's HIPIFY version and the default target, and exit",
    )
    ap.add_argument(
        "--launch",
        choices=LAUNCH_STYLES,
        default="keep",
        help="keep <<<...>>> launches (default) or convert them to hipLaunchKernelGGL",
    )
    ap.add_argument(
        "--translate-comments",
        action="store_true",
        help="also translate names in comments and string literals",
    )
    ap.add_argument("--mappings", type=Path, metavar="FILE", help="project mapping overrides (TSV or JSON)")
    ap.add_argument("--naming", choices=NAMING_STYLES, default="hipify_torch", help="output file naming")
    ap.add_argument(
        "--engine",
        choices=ENGINES,
        default="builtin",
        help="translation engine (hipify_torch: the external one, when importable)",
    )
    ap.add_argument("--no-lint", action="store_true", help="skip the portability-hazard lint")
    ap.add_argument(
        "--no-unmapped",
        action="store_true",
        help="do not report CUDA-looking names missing from the database",
    )
    ap.add_argument(
        "--void-discarded",
        action="store_true",
        help="write (void) before HIP calls whose [[nodiscard]] hipError_t result the code discards (default: leave "
        "them and report them in a note)",
    )
    add_build_options(ap)
    ap.add_argument("-j", "--jobs", type=int, help="worker processes (default: CPUs, when worth it)")
    ap.add_argument("-q", "--quiet", action="store_true", help="only the summary line on stderr")
    ap.add_argument(
        "--max-listed",
        type=int,
        default=20,
        metavar="N",
        help="blocking findings listed on stderr (default 20; the report has all)",
    )
    return ap


def add_build_options(ap: argparse.ArgumentParser) -> None:
    """``-D``/``-U`` and ``--cuda-units``: what the build compiles, and how (``tools hipify`` and ``tools lint``)."""
    add_macro_options(ap)
    ap.add_argument(
        "--cuda-units",
        default=".cu",
        metavar="SUFFIXES",
        help="comma-separated suffixes of the files the build compiles as CUDA (default .cu): blocking findings "
        "count in them and the headers they include",
    )


def add_macro_options(ap: argparse.ArgumentParser) -> None:
    """``-D``/``-U``: the macros the build defines and undefines (also ``tools port``). They land in ``macros``
    as ``("D" | "U", text)`` in command-line order (``build_defines`` checks them)."""
    import argparse  # noqa: PLC0415 - start-up time: see _fast_parse

    class Macro(argparse.Action):
        def __call__(self, _p: object, namespace: argparse.Namespace, values: object, _o: object = None) -> None:
            items = list(getattr(namespace, "macros", None) or [])
            items.append((str(self.const), str(values)))
            namespace.macros = items

    ap.set_defaults(macros=[])
    ap.add_argument(
        "-D",
        "--define",
        action=Macro,
        const="D",
        metavar="NAME[=VALUE]",
        help="a macro the build defines (as the compile gets it): branches it decides against are not reported",
    )
    ap.add_argument("-U", "--undefine", action=Macro, const="U", metavar="NAME", help="a macro the build undefines")


def build_defines(macros: list[tuple[str, str]]) -> list[tuple[str, str | None]]:
    """The -D/-U options as (name, value) pairs (value None for -U); a bad one is a usage error."""
    from tools.hipify.scope import parse_define  # noqa: PLC0415

    return [parse_define(text, undefine=kind == "U") for kind, text in macros]


def cuda_unit_suffixes(text: str) -> tuple[str, ...]:
    suffixes = tuple(s.strip().lower() for s in text.split(",") if s.strip())
    if not suffixes or any(not s.startswith(".") or "/" in s for s in suffixes):
        raise ToolError(f"bad --cuda-units {text!r}: expected comma-separated file suffixes such as .cu,.cpp")
    return suffixes


class _Args:
    """What ``build_parser().parse_args`` returns, for command lines ``_fast_parse`` understands."""

    def __init__(self) -> None:
        self.sources: list[Path] = []
        self.output: Path | None = None
        self.report: Path | None = None
        self.hip_version: str | None = None
        self.version = False
        self.strict = False
        self.launch = "keep"
        self.translate_comments = False
        self.mappings: Path | None = None
        self.naming = "hipify_torch"
        self.engine = "builtin"
        self.no_lint = False
        self.no_unmapped = False
        self.void_discarded = False
        self.jobs: int | None = None
        self.quiet = False
        self.max_listed = 20
        self.macros: list[tuple[str, str]] = []
        self.cuda_units = ".cu"


_FLAGS = {
    "--strict": "strict",
    "--translate-comments": "translate_comments",
    "--no-lint": "no_lint",
    "--no-unmapped": "no_unmapped",
    "--void-discarded": "void_discarded",
    "-q": "quiet",
    "--quiet": "quiet",
}
# option -> (attribute, kind): path, str, int, or a tuple of choices
_VALUED: dict[str, tuple[str, object]] = {
    "-o": ("output", "path"),
    "--output": ("output", "path"),
    "--report": ("report", "path"),
    "--hip-version": ("hip_version", "str"),
    "--launch": ("launch", LAUNCH_STYLES),
    "--mappings": ("mappings", "path"),
    "--naming": ("naming", NAMING_STYLES),
    "--engine": ("engine", ENGINES),
    "-j": ("jobs", "int"),
    "--jobs": ("jobs", "int"),
    "--max-listed": ("max_listed", "int"),
}


def _fast_parse(argv: list[str]) -> _Args | None:
    """The plain command lines (exact option names, one run of sources) without argparse, whose import and
    parser cost ~10 ms of a ~60 ms start-up. ``None`` for anything else (help, abbreviations, errors, ...):
    argparse then parses it, with its messages, so every command line means what argparse says."""
    args = _Args()
    i = 0
    n = len(argv)
    sources_done = False
    while i < n:
        token = argv[i]
        i += 1
        if not token.startswith("-") and token:
            if sources_done:
                return None  # a second run of sources: argparse rejects it
            args.sources.append(Path(token))
            while i < n and argv[i] and not argv[i].startswith("-"):
                args.sources.append(Path(argv[i]))
                i += 1
            sources_done = True
            continue
        flag = _FLAGS.get(token)
        if flag is not None:
            setattr(args, flag, True)
            continue
        name, eq, value = token.partition("=")
        spec = _VALUED.get(name)
        if spec is None or (eq and not name.startswith("--")):
            return None
        if not eq:
            if i >= n or argv[i].startswith("-") or not argv[i]:
                return None
            value = argv[i]
            i += 1
        attr, kind = spec
        converted: object
        if kind == "path":
            converted = Path(value)
        elif kind == "int":
            try:
                converted = int(value)  # what argparse's type=int does
            except ValueError:
                return None
        elif kind == "str":
            converted = value
        elif isinstance(kind, tuple) and value in kind:
            converted = value
        else:
            return None
        setattr(args, attr, converted)
    if not args.sources or args.output is None:
        return None
    return args


def write_error(output: Path, err: OSError) -> str:
    """An I/O failure while writing the output."""
    where = f" ({err.filename})" if err.filename else ""
    out = os.path.normpath(os.path.abspath(output))
    return (
        f"cannot write the output into {out}: {err.strerror or err}{where}. Check that the output directory can "
        "be created and written there, or choose another with -o."
    )


def version_text() -> str:
    """What ``--version`` prints: where the mapping database comes from, and the default target."""
    from tools.hipify.mapping import load_database  # noqa: PLC0415 - only for --version

    db = load_database()
    origin = db.meta.get("source_origin") or db.source_commit or db.source
    found = detect_hip_version()
    target = f"HIP {found[0]}.{found[1]} (the ROCm found)" if found else "the newest HIP (no ROCm found)"
    return (
        f"python -m tools hipify: mapping database from HIPIFY {db.source_version or '(version not recorded)'} "
        f"({origin}), {len(db)} names, fingerprint {db.fingerprint}; default target: {target}"
    )


def main(argv: list[str]) -> int:
    # A run allocates many small containers (findings, records) and makes almost no garbage cycles: the cyclic
    # collector's default pace (a collection every 700 allocations) costs ~5% of it. Collected rarely here.
    import gc  # noqa: PLC0415

    thresholds = gc.get_threshold()
    gc.set_threshold(100_000, 50, 100)
    try:
        return _main(argv)
    finally:
        gc.set_threshold(*thresholds)


def _main(argv: list[str]) -> int:
    if "--version" in argv:
        print(version_text())
        return 0
    args = _fast_parse(argv) or build_parser().parse_args(argv)
    options = HipifyOptions(
        hip_version=parse_hip_version(args.hip_version) if args.hip_version is not None else None,
        translate_comments_and_strings=args.translate_comments,
        launch_style=args.launch,
        mapping_overrides=args.mappings,
        jobs=args.jobs,
        naming=args.naming,
        lint=not args.no_lint,
        engine=args.engine,
        report_unmapped=not args.no_unmapped,
        defines=build_defines(args.macros),
        cuda_units=cuda_unit_suffixes(args.cuda_units),
        void_discarded=args.void_discarded,
    )
    assert args.output is not None  # required
    try:
        result = hipify_tree(args.sources, args.output, options)
    except OSError as err:  # (reading a source is a finding; this is writing the output)
        raise ToolError(write_error(args.output, err), exit_code=1) from None
    if args.report is not None:
        import json  # noqa: PLC0415 - only with --report

        report = json.dumps(result.to_json(), indent=1) + "\n"
        if str(args.report) == "-":
            sys.stdout.write(report)
        else:
            try:
                args.report.parent.mkdir(parents=True, exist_ok=True)
                tmp = args.report.with_name(f".{args.report.name}.{os.getpid()}.tmp")
                tmp.write_text(report, encoding="utf-8")
                tmp.replace(args.report)
            except OSError as err:
                raise ToolError(f"cannot write report {args.report}: {err.strerror or err}") from None
    if not args.quiet:
        listed = [f for f in result.findings if f.blocking][: max(args.max_listed, 0)]
        for finding in listed:
            print(str(finding), file=sys.stderr)
        if result.blocking > len(listed):
            print(f"... {result.blocking - len(listed)} more blocking findings (see --report)", file=sys.stderr)
    print(f"hipify: {result.summary()}", file=sys.stderr)
    if args.strict and result.blocking:
        print(f"hipify: --strict: {result.blocking} unportable findings remain", file=sys.stderr)
        return 1
    return 0
