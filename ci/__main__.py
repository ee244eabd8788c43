"""``python -m ci``: see ci/cli.py."""

from __future__ import annotations

import sys

if sys.version_info < (3, 11):
    print(
        f"error: python -m ci needs Python 3.11 or newer (it reads ci/matrix.toml with tomllib); "
        f"this is {sys.version_info[0]}.{sys.version_info[1]}. Run it with the test venv's python "
        "(~/.cache/monarch-runtime/toolchains/test-venv/bin/python).",
        file=sys.stderr,
    )
    sys.exit(2)

from ci.cli import main

if __name__ == "__main__":
    sys.exit(main())
