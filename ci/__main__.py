"""``python -m ci``: see ci/cli.py."""

from __future__ import annotations

import sys

from ci.cli import main

if __name__ == "__main__":
    sys.exit(main())
