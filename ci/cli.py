"""``python -m ci``: list, run, build, validate, test, setup, generate, collect."""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from ci import generate, proc, pythons, roots, smoke, toolchains, validate
from ci import matrix as matrix_mod
from ci.build import MODES, build, repair
from ci.errors import CIError
from ci.matrix import Matrix, Row, default_toolchains_dir, host_arch

DESCRIPTION = """\
monarch-runtime's wheel matrix (ci/matrix.toml), runnable locally exactly as in GitHub Actions.
A row is one flavour on one arch (e.g. cpu-x86_64, cuda13-x86_64, rocm7.2-x86_64); a bare flavour
name means that flavour on this machine's arch. Root rows (rocm6.4, rocm7.2) build and test inside a
Debian sid root made by ci/rocm-root.sh (as root: `python -m ci setup ROW` makes it)."""


def _archs(value: str | None) -> list[str] | None:
    if value is None:
        return None
    return [a for a in value.replace(",", ";").split(";") if a]


def _one_wheel(wheel: Path | None, dist: Path | None) -> Path:
    if wheel is not None:
        if not wheel.is_file():
            raise CIError(f"wheel {wheel} does not exist.")
        return wheel
    if dist is None:
        raise CIError("give a wheel: a WHEEL path, --wheel PATH or --dist DIR.")
    found = sorted(dist.glob("*.whl"))
    if len(found) != 1:
        raise CIError(f"{dist} holds {len(found)} wheels; expected exactly one.")
    return found[0]


def cmd_list(m: Matrix, _args: argparse.Namespace) -> int:
    rows: list[tuple[tuple[str, ...], toolchains.Readiness]] = []
    found = pythons.find_all(m.pythons)
    tc_dir = default_toolchains_dir()
    for row in m.rows:
        ready = toolchains.check(row, m, found_pythons=found)
        if ready.can_build:
            here = "yes"
        elif ready.can_test:
            here = "test-only"
        else:
            here = "no"
        archs = ";".join(row.flavour.archs) or "-"
        rows.append(((row.name, row.flavour.platform, archs, row.flavour.toolchain, here), ready))
    widths = [max(len(cols[i]) for cols, _ in rows) for i in range(5)]
    header = ("ROW", "PLATFORM", "ARCHS", "TOOLCHAIN", "HERE")
    widths = [max(w, len(h)) for w, h in zip(widths, header)]
    print("  ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip())
    for cols, ready in rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(cols, widths)).rstrip())
        if not ready.can_build:
            for reason in ready.missing:
                print(f"    - {reason}")
        if ready.row.in_root:
            tc = m.toolchains[ready.row.flavour.toolchain]
            for reason in ready.test_blockers:
                if not ready.can_build and reason not in ready.missing:
                    print(f"    - to test a wheel: {reason}")
            root = tc.root_dir(tc_dir)
            made = "made" if (root / ".monarch-root").is_file() else "not made"
            print(f"    root: {root} ({made}; ci/rocm-root.sh, ROCm {tc.root_version})")
            print(
                f"    test python: {tc.root_python}, the root's own python3 (the root's /opt/monarch/venv builds); "
                "the python axis does not apply to a root row (the wheel is cp39-abi3 all the same)"
            )
            continue
        present = [py for py, exe in ready.pythons_found.items() if exe]
        absent = [py for py, exe in ready.pythons_found.items() if not exe]
        line = f"    test pythons: {', '.join(present) or 'none'} found"
        if absent:
            line += f"; {', '.join(absent)} missing (skipped locally, required in CI)"
        print(line)
        for py, reason in ready.row.skipped_pythons:
            print(f"    python {py} excluded: {reason}")
    for name, reason in m.excluded_rows:
        print(f"excluded: {name}: {reason}")
    print(
        f"python axis: {', '.join(m.pythons)} (abi3: each row builds once with {m.build_python} "
        "and test-imports on every python; root rows build and test with their root's python)"
    )
    print(
        f"this machine: {host_arch()}. HERE: yes = `run ROW` builds, validates and tests here; "
        "test-only = `run ROW --wheel W` validates and tests a wheel built elsewhere"
    )
    return 0


def _validate(wheel: Path, row: Row, m: Matrix, *, archs: Sequence[str] | None, do_smoke: bool, audit: bool) -> bool:
    exp = validate.Expected.for_row(row, m, archs)
    findings = validate.static_checks(wheel, exp, audit=audit)
    if do_smoke and row.in_root:
        # Its ROCm libraries need the root's glibc: the import is tried inside the root.
        findings += roots.test(wheel, exp, row, m, default_toolchains_dir())
    elif do_smoke:
        findings += smoke.smoke(wheel, exp, f"{sys.version_info[0]}.{sys.version_info[1]}", sys.executable)
    return validate.report(findings, f"validate {wheel.name} as {row.name}")


def _test(
    wheel: Path,
    row: Row,
    m: Matrix,
    *,
    archs: Sequence[str] | None,
    versions: Sequence[str] | None,
    require_all: bool,
) -> bool:
    exp = validate.Expected.for_row(row, m, archs)
    chosen = list(versions) if versions else list(row.pythons)
    unknown = [v for v in chosen if v not in row.pythons]
    if unknown and row.in_root:
        raise CIError(
            f"row {row.name} is tested with its root's own python ({', '.join(row.pythons)}), not "
            f"{', '.join(unknown)}: a root row does not follow the python axis."
        )
    if unknown:
        raise CIError(f"python {', '.join(unknown)} is not on row {row.name}'s python axis ({', '.join(row.pythons)}).")
    if row.in_root:
        findings = roots.test(wheel, exp, row, m, default_toolchains_dir())
        return validate.report(findings, f"test {wheel.name} in the root on its python {', '.join(chosen)}")
    findings = smoke.smoke_many(wheel, exp, chosen, require_all)
    return validate.report(findings, f"test {wheel.name} on python {', '.join(chosen)}")


def cmd_validate(m: Matrix, args: argparse.Namespace) -> int:
    row = m.row(args.row)
    wheel = _one_wheel(args.wheel or args.wheel_opt, args.dist)
    ok = _validate(wheel, row, m, archs=_archs(args.archs), do_smoke=not args.no_smoke, audit=not args.no_audit)
    return 0 if ok else 1


def cmd_test(m: Matrix, args: argparse.Namespace) -> int:
    row = m.row(args.row)
    wheel = _one_wheel(args.wheel, args.dist)
    ok = _test(wheel, row, m, archs=_archs(args.archs), versions=args.python, require_all=args.require_all_pythons)
    return 0 if ok else 1


def cmd_build(m: Matrix, args: argparse.Namespace) -> int:
    row = m.row(args.row)
    wheel = build(
        row,
        m,
        args.out,
        archs=_archs(args.archs),
        python=args.build_python,
        mode=args.build_mode,
        build_dir=args.build_dir,
    )
    print(wheel)
    return 0


def cmd_run(m: Matrix, args: argparse.Namespace) -> int:
    row = m.row(args.row)
    archs = _archs(args.archs)
    if args.wheel is None:
        ready = toolchains.check(row, m)
        if not ready.can_build and args.build_python is None:
            raise CIError(
                f"row {row.name} cannot be built on this machine: {'; '.join(ready.missing)}. "
                "Pass --wheel PATH to validate and test an existing wheel instead."
            )
    elif row.arch != host_arch():
        raise CIError(f"row {row.name} needs an {row.arch} machine to test its wheel (this one is {host_arch()}).")
    elif row.in_root and not args.no_test:
        ready = toolchains.check(row, m)
        if not ready.can_test:
            tc = m.toolchains[row.flavour.toolchain]
            fix = roots.how_to_make(tc, default_toolchains_dir(), row)
            raise CIError(
                f"row {row.name}'s wheel is tested inside its ROCm root, which cannot be entered here: "
                f"{'; '.join(ready.test_blockers)}. To fix: {fix}."
            )
    tmp = None
    started = time.monotonic()
    try:
        if args.wheel is not None:
            wheel = _one_wheel(args.wheel, None)
            proc.log(f"[{row.name}] build skipped: using {wheel}")
            if row.flavour.repair and not args.no_repair:
                tmp = tempfile.mkdtemp(prefix=f"ci-{row.name}-")
                proc.log(f"[{row.name}] repair (a copy, in {tmp})")
                wheel = repair(wheel, row.flavour.repair, Path(tmp))
        else:
            out = args.out
            if out is None:
                tmp = tempfile.mkdtemp(prefix=f"ci-{row.name}-")
                out = Path(tmp)
            proc.log(f"[{row.name}] build")
            wheel = build(
                row, m, out, archs=archs, python=args.build_python, mode=args.build_mode, build_dir=args.build_dir
            )
        timings = [("build", time.monotonic() - started)] if args.wheel is None else []
        proc.log(f"[{row.name}] validate")
        step = time.monotonic()
        # A root row's import check is its test (inside the root): run once, by the test step.
        smoke_here = not (row.in_root and not args.no_test)
        ok = _validate(wheel, row, m, archs=archs, do_smoke=smoke_here, audit=True)
        timings.append(("validate", time.monotonic() - step))
        if ok and not args.no_test:
            proc.log(f"[{row.name}] test" + (" (inside the root)" if row.in_root else ""))
            step = time.monotonic()
            ok = _test(wheel, row, m, archs=archs, versions=args.python, require_all=args.require_all_pythons)
            timings.append(("test", time.monotonic() - step))
        spent = ", ".join(f"{name} {seconds:.0f} s" for name, seconds in timings)
        print(f"row {row.name}: {'PASSED' if ok else 'FAILED'} ({wheel.name}; {spent})")
        return 0 if ok else 1
    finally:
        if tmp is not None and not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


def cmd_setup(m: Matrix, args: argparse.Namespace) -> int:
    row = m.row(args.row)
    toolchains.install(row, m)
    print(f"row {row.name}: toolchain {row.flavour.toolchain} ready")
    return 0


def cmd_generate(m: Matrix, args: argparse.Namespace) -> int:
    target = args.output or generate.workflow_path(m)
    if args.check:
        if generate.is_fresh(m, target):
            print(f"{target} is up to date")
            return 0
        print(
            f"{target} is stale or missing: run `python -m ci generate` and commit the result.",
            file=sys.stderr,
        )
        return 1
    print(generate.write(m, target))
    return 0


def cmd_collect(m: Matrix, args: argparse.Namespace) -> int:
    wheels = sorted(args.dir.glob("*.whl"))
    problems: list[str] = []
    for row in m.rows:
        label = f"+{row.flavour.local_version}-"
        mine = [w for w in wheels if label in w.name and w.name.endswith(f"_{row.arch}.whl")]
        if len(mine) != 1:
            problems.append(f"row {row.name}: {len(mine)} wheels")
        else:
            print(f"{row.name}: {mine[0].name} ({mine[0].stat().st_size / 2**20:.1f} MiB)")
    extra = len(wheels) - (len(m.rows) - len(problems))
    if extra > 0:
        problems.append(f"{extra} wheel(s) belong to no row")
    if problems:
        raise CIError(f"the wheelhouse {args.dir} is not one wheel per row: {'; '.join(problems)}.", exit_code=1)
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m ci", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--matrix", type=Path, default=None, help="the matrix file (default: ci/matrix.toml)")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    sub.add_parser("list", help="every row, and whether it can run on this machine (and why not)")

    def archs_opt(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--archs", help='override the row\'s device archs, as for the build: "80;90"')

    def build_opts(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--build-python", help="interpreter to build with (default: the matrix's build python)")
        sp.add_argument(
            "--build-mode",
            choices=MODES,
            default=None,
            help="venv: a cached venv of the build python with [build-system].requires (default, as in CI); "
            "pip: pip's build isolation; none: the interpreter as it is",
        )
        sp.add_argument("--build-dir", type=Path, help="the backend's build directory (-C build-dir=)")
        sp.add_argument(
            "--no-build-isolation",
            action="store_const",
            dest="build_mode",
            const="none",
            help="same as --build-mode none",
        )

    def test_opts(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--python", action="append", metavar="X.Y", help="test only this python (repeatable)")
        sp.add_argument(
            "--require-all-pythons",
            action="store_true",
            help="fail when an interpreter of the row is missing (CI); locally they are skipped",
        )

    sp = sub.add_parser("run", help="build -> validate -> test one row, as the workflow does")
    sp.add_argument("row")
    sp.add_argument("--wheel", type=Path, help="skip the build (pip wheel): repair, validate and test this wheel")
    sp.add_argument("--out", type=Path, help="directory for the built wheel (default: a temporary one)")
    sp.add_argument("--keep", action="store_true", help="keep the temporary output directory")
    sp.add_argument("--no-test", action="store_true", help="stop after validation")
    sp.add_argument("--no-repair", action="store_true", help="with --wheel: do not run the flavour's repair step")
    archs_opt(sp)
    build_opts(sp)
    test_opts(sp)

    sp = sub.add_parser("build", help="build one row's wheel")
    sp.add_argument("row")
    sp.add_argument("--out", type=Path, required=True)
    archs_opt(sp)
    build_opts(sp)

    sp = sub.add_parser("validate", help="check a wheel against its row")
    sp.add_argument("wheel", nargs="?", type=Path)
    sp.add_argument("--wheel", dest="wheel_opt", type=Path, help=argparse.SUPPRESS)
    sp.add_argument("--row", required=True)
    sp.add_argument("--dist", type=Path, help="a directory holding exactly one wheel")
    sp.add_argument("--no-smoke", action="store_true", help="skip the import test in a fresh venv")
    sp.add_argument("--no-audit", action="store_true", help="skip auditwheel")
    archs_opt(sp)

    sp = sub.add_parser("test", help="test-import a row's wheel on each python of the row")
    sp.add_argument("row")
    sp.add_argument("--wheel", type=Path)
    sp.add_argument("--dist", type=Path)
    archs_opt(sp)
    test_opts(sp)

    sp = sub.add_parser(
        "setup", help="install a row's toolchain and tools (CI containers); a root row: make its root (as root)"
    )
    sp.add_argument("row")

    sp = sub.add_parser("generate", help="write .github/workflows/wheels.yml from the matrix")
    sp.add_argument("--check", action="store_true", help="exit 1 when the checked-in file is stale")
    sp.add_argument("--output", type=Path, help=argparse.SUPPRESS)

    sp = sub.add_parser("collect", help="check a directory holds exactly one wheel per row")
    sp.add_argument("dir", type=Path)
    return p


COMMANDS = {
    "list": cmd_list,
    "run": cmd_run,
    "build": cmd_build,
    "validate": cmd_validate,
    "test": cmd_test,
    "setup": cmd_setup,
    "generate": cmd_generate,
    "collect": cmd_collect,
}


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        m = matrix_mod.load(args.matrix)
        return COMMANDS[args.command](m, args)
    except CIError as err:
        print(f"error: {err}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
