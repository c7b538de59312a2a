"""Solver capabilities declared as data (what each backend can do here)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SolverFeatures:
    name: str
    mip: bool
    time_limit: bool
    dual_bound: bool
    mip_start: bool
    progress_callback: bool
    iis_mip: bool  # irreducible infeasible subsystem of the MIP itself
    iis_lp: bool  # IIS of the LP relaxation
    threads_settable_once_per_process: bool
    size_limit_note: str = ""


FEATURES: dict[str, SolverFeatures] = {
    "highs": SolverFeatures(
        name="highs",
        mip=True,
        time_limit=True,
        dual_bound=True,
        mip_start=True,
        progress_callback=True,
        iis_mip=False,
        iis_lp=True,
        threads_settable_once_per_process=True,
    ),
    "gurobi": SolverFeatures(
        name="gurobi",
        mip=True,
        time_limit=True,
        dual_bound=True,
        mip_start=True,
        progress_callback=True,
        iis_mip=True,
        iis_lp=True,
        threads_settable_once_per_process=False,
        size_limit_note="the free pip license solves models up to 2000 variables and 2000 constraints",
    ),
    "cbc": SolverFeatures(
        name="cbc",
        mip=True,
        time_limit=True,
        dual_bound=True,  # read from CBC's log
        mip_start=True,
        progress_callback=True,  # from CBC's log lines (incumbents, and node reports with the bound)
        iis_mip=False,
        iis_lp=False,  # diagnosis falls back to HiGHS's IIS of the LP relaxation
        threads_settable_once_per_process=False,
    ),
}
