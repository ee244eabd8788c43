"""Fixtures for the port/check tests: the toolkit environment and a runner for ``python -m tools``."""

from __future__ import annotations

import os

import pytest
from _port_support import Runner, run_tools
from _support import Toolchains


def _base_env() -> dict[str, str]:
    """No toolkit, no CI, no colour preferences: each test adds what it needs."""
    drop = ("CUDA_HOME", "CUDA_PATH", "ROCM_HOME", "ROCM_PATH", "NCCL_HOME", "RCCL_HOME", "CI", "NO_COLOR")
    return {k: v for k, v in os.environ.items() if k not in drop and not k.startswith("MONARCH_")}


@pytest.fixture
def bare_env() -> dict[str, str]:
    return _base_env()


@pytest.fixture(scope="session")
def port_env(toolchains: Toolchains) -> dict[str, str]:
    """Both toolkits found the way a user points at them (what ci/run-tests.sh exports)."""
    env = _base_env()
    env.update(
        CUDA_HOME=str(toolchains.cuda_home),
        NCCL_HOME=str(toolchains.nccl_home),
        ROCM_HOME=str(toolchains.rocm_home),
        RCCL_HOME=str(toolchains.rccl_home),
        HIP_PLATFORM="amd",
    )
    return env


@pytest.fixture
def tools_cli() -> Runner:
    """tools_cli(*args, env=..., cwd=ROOT) runs ``python -m tools ARGS`` and returns the process."""
    return run_tools
