"""monarch-runtime's CI: one declared wheel matrix (ci/matrix.toml), run locally or by GitHub Actions.

``python -m ci list|run|build|validate|test|setup|generate`` -- see ``python -m ci --help``.
"""

from __future__ import annotations
