"""Settings precedence: -C config settings > MONARCH_* environment > [tool.monarch-runtime] > defaults."""

from __future__ import annotations

from pathlib import Path

import pytest

from buildcore.errors import BuildError
from buildcore.settings import KEYS, load


def test_defaults() -> None:
    s = load(None, {}, {})
    assert (s.platform, s.archs, s.debug, s.build_dir, s.jobs) == ("auto", (), False, None, None)


def test_precedence_config_over_env_over_pyproject() -> None:
    pyproject = {"tool": {"monarch-runtime": {"version": "1.0", "archs": "70", "debug": True, "jobs": 3}}}
    env = {"MONARCH_ARCHS": "80", "MONARCH_JOBS": "2"}
    s = load({"archs": "90;100"}, env, pyproject)
    assert s.archs == ("90", "100") and s.origin("archs") == "-C archs"
    assert s.jobs == 2 and s.origin("jobs") == "the environment variable MONARCH_JOBS"
    assert s.debug is True and s.origin("debug") == "pyproject.toml"


def test_list_values_and_separators() -> None:
    assert load({"archs": ["gfx90a,gfx940"]}, {}, {}).archs == ("gfx90a", "gfx940")
    with pytest.raises(BuildError, match="given 2 times"):
        load({"archs": ["80", "90"]}, {}, {})


def test_build_dir_and_hip_version() -> None:
    s = load({"build-dir": "~/b", "hip-version": "6.4"}, {}, {})
    assert s.build_dir == Path("~/b").expanduser() and s.hip_version == (6, 4)


def test_unknown_pyproject_key_lists_valid_ones() -> None:
    with pytest.raises(BuildError) as info:
        load(None, {}, {"tool": {"monarch-runtime": {"flavour": "x"}}})
    for key in KEYS:
        assert key in str(info.value)


def test_pip_global_options_are_ignored() -> None:
    assert load({"--global-option": "x"}, {}, {}).platform == "auto"
