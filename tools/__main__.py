"""Entry point: ``python -m tools <command> [args]``.

Commands are looked up in ``COMMANDS`` and imported lazily, so start-up stays fast; each command
module exposes ``main(argv: list[str]) -> int``.
"""

from __future__ import annotations

import importlib
import sys

from buildcore.errors import UserError

# command name -> (module, one-line description)
COMMANDS: dict[str, tuple[str, str]] = {
    "hipify": ("tools.hipify.cli", "translate CUDA sources to HIP, out of tree, with a report"),
    "check": ("tools.port.check", "pre-merge check of csrc/: lint + CUDA and ROCm compiles"),
    "lint": ("tools.hipify.lint_cli", "report CUDA->HIP portability hazards and unportable names"),
    "port": ("tools.port.cli", "port CUDA files to HIP: lint, compile both sides, diff, report, --add"),
    "gen-compat": ("tools.gen_compat.cli", "generate rust/rocm_compat's CUDA-named alias layer from the mapping DB"),
    "update-mappings": ("tools.hipify.update_mappings", "regenerate the hipify mapping DB (HIPIFY tables)"),
}


def _usage() -> str:
    width = max(len(name) for name in COMMANDS)
    lines = ["usage: python -m tools <command> [args]", "", "commands:"]
    lines += [f"  {name.ljust(width)}  {desc}" for name, (_, desc) in sorted(COMMANDS.items())]
    return "\n".join(lines)


_FINISHED = False  # a native run is done: nothing left for the interpreter's shutdown to do


def _native_hipify(argv: list[str]) -> int | None:
    """``python -m tools hipify ARGV`` run entirely natively (rust/hipify_native: engine/tree_cli.rs, with the
    plan tools/hipify/plan.py keeps in the compiled cache), importing nothing of tools.hipify (start-up time).
    None when it cannot take the run (no module, MONARCH_HIPIFY_NATIVE=0, a command line or an input it
    leaves to Python, no current plan): the Python path then runs, with the same result."""
    import os  # noqa: PLC0415

    choice = os.environ.get("MONARCH_HIPIFY_NATIVE", "auto").strip().lower()
    if choice not in ("", "auto", "1", "on", "yes", "true", "native"):
        return None
    if (getattr(sys.stderr, "encoding", None) or "").lower().replace("-", "") != "utf8" or sys.stdout is None:
        return None  # (findings are printed as UTF-8)
    try:  # (untyped: a compiled module; tools/hipify/native.py has its interface)
        hipify_main = importlib.import_module("monarch_hipify_native").hipify_main
    except (ImportError, AttributeError):  # not installed, or built from an older tree
        return None
    done = hipify_main(argv, os.path.dirname(os.path.abspath(__file__)))
    if isinstance(done, str):
        if os.environ.get("MONARCH_HIPIFY_NATIVE_TRACE"):
            print(f"hipify: not on the native fast path: {done}", file=sys.stderr)
        return None
    rc, out, err = done
    if out is not None:
        sys.stdout.write(out)
    sys.stderr.write(err)
    global _FINISHED  # noqa: PLW0603
    _FINISHED = True
    return int(rc)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help"):
        print(_usage())
        return 0 if args else 2
    name, rest = args[0], args[1:]
    if name == "hipify":
        try:
            done = _native_hipify(rest)
        except KeyboardInterrupt:
            print("interrupted", file=sys.stderr)
            return 130
        if done is not None:
            return done
    if name not in COMMANDS:
        print(f"error: unknown command {name!r}.\n\n{_usage()}", file=sys.stderr)
        return 2
    module = importlib.import_module(COMMANDS[name][0])
    try:
        return int(module.main(rest))
    except UserError as err:  # a ToolError, or a BuildError from the detection the tools share
        print(f"error: {err}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    status = main()
    if _FINISHED:  # (the interpreter's shutdown costs ~2.5 ms, a tenth of a small run)
        import os

        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
    sys.exit(status)
