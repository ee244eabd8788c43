"""The suite's own guard (tests/conftest.py): a test that reaches a wheel-building fixture must be marked slow."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from _support import ROOT, WHEEL_FIXTURES, unmarked_wheel_tests


@dataclass
class FakeItem:
    nodeid: str
    fixturenames: list[str]
    marks: set[str] = field(default_factory=set)

    def get_closest_marker(self, name: str) -> object | None:
        return name if name in self.marks else None


def test_unmarked_wheel_tests_are_named() -> None:
    items = [
        FakeItem("t.py::unmarked", ["tmp_path", "built_wheels", "all_builds"]),
        FakeItem("t.py::marked", ["root_builds"], {"slow"}),
        FakeItem("t.py::no_wheel", ["tmp_path"]),
    ]
    assert unmarked_wheel_tests(items) == ["t.py::unmarked"]


def test_the_guarded_fixtures_exist() -> None:
    """A renamed fixture would silently end the guard."""
    tree = ast.parse((ROOT / "tests" / "conftest.py").read_text(encoding="utf-8"))
    defined = {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}
    assert WHEEL_FIXTURES <= defined
