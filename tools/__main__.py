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


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help"):
        print(_usage())
        return 0 if args else 2
    name, rest = args[0], args[1:]
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
    sys.exit(main())
