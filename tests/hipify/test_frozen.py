"""Whole ``python -m tools hipify`` runs against their golden expectations (tests/hipify/frozen.py has the cases
and writes the expectations; this test only reads them): any byte of difference in an output, the state file, a
report, stderr or the exit status fails, with the diff."""

from __future__ import annotations

from pathlib import Path

import pytest
from frozen import CASES, WRITE_COMMAND, Case, difference, expectation_path, run_case


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_frozen(case: Case, tmp_path: Path) -> None:
    assert expectation_path(case.name).is_file(), f"write it with `{WRITE_COMMAND} {case.name}` and review it"
    problem = difference(case.name, run_case(case, tmp_path / "case"))
    assert problem is None, problem


def test_every_expectation_has_a_case() -> None:
    names = {c.name for c in CASES}
    files = {p.stem for p in expectation_path("x").parent.glob("*.txt")}
    assert files == names, (
        f"expectations without a case: {sorted(files - names)}; cases without: {sorted(names - files)}"
    )


def test_a_difference_fails_with_the_diff(tmp_path: Path) -> None:
    case = CASES[-1]
    got = run_case(case, tmp_path / "case")
    assert difference(case.name, got) is None
    edited = [*got[:-1], got[-1] + "0"]
    problem = difference(case.name, edited)
    assert problem is not None and "+" + edited[-1] in problem and WRITE_COMMAND in problem


def test_write_refuses_under_pytest(capsys: pytest.CaptureFixture[str]) -> None:
    from frozen import main  # noqa: PLC0415

    before = expectation_path(CASES[-1].name).read_bytes()
    assert main(["--write", CASES[-1].name]) == 2
    assert "refuses to run under pytest" in capsys.readouterr().err
    assert expectation_path(CASES[-1].name).read_bytes() == before
