"""Shared fixtures and the ``--solvers`` option (default: every solver; unavailable ones skip).  Helpers that
test modules import are in the ``support`` package beside this file."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import SHARED_DATA


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--solvers", default="highs,gurobi,cbc", help="comma-separated solvers to test (highs,gurobi,cbc)")


def _gurobi_status() -> tuple[bool, str]:
    from planner.solver.gurobi_backend import gurobi_available

    return gurobi_available()


@pytest.fixture(scope="session")
def solvers(request: pytest.FixtureRequest) -> list[str]:
    wanted = [s.strip() for s in request.config.getoption("--solvers").split(",") if s.strip()]
    usable = []
    for s in wanted:
        if s == "gurobi":
            ok, _ = _gurobi_status()
            if not ok:
                continue
        if s == "cbc":
            from planner.solver.cbc_backend import cbc_available

            if not cbc_available()[0]:
                continue
        usable.append(s)
    return usable


@pytest.fixture
def require_gurobi(request: pytest.FixtureRequest) -> None:
    wanted = request.config.getoption("--solvers")
    if "gurobi" not in wanted:
        pytest.skip("gurobi not in --solvers")
    ok, why = _gurobi_status()
    if not ok:
        pytest.skip(why)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip("../shared/data is not available")
    return SHARED_DATA
