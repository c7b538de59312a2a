"""One driver for long solve pipelines: named phases over a shared state, timed, stoppable.

A family's solve is a list of `Phase` objects run in order by `run_phases` on one mutable state object
(a dataclass the family defines: the problem, the options, the incumbent, the bound, the notes, ...).
A phase either returns None (go on) or a final value (a `planner.core.result.Result`), which ends the
pipeline: "no plan can exist, say so now", "the heuristic is provably optimal, skip the MIP", ...
A phase whose ``when`` is false for the state is skipped.  Wall seconds per phase are recorded in
``state.phase_seconds`` (``{name: seconds}``, in run order) when the state has that attribute, so that a
`Result` can carry them in its ``stats``.  Between phases the driver checks the process-wide interrupt
(`planner.core.interrupt`), so Ctrl-C stops a pipeline at the next phase boundary even where a phase runs
no interruptible native code.

The last phase must return the final value; a pipeline whose phases all return None is a programming
error (`RuntimeError`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from planner.core.interrupt import check as check_interrupt

StateT = TypeVar("StateT")
OutT = TypeVar("OutT")


@dataclass(frozen=True)
class Phase(Generic[StateT, OutT]):
    """One named step of a pipeline: ``run(state)`` returns None to go on or the pipeline's final value."""

    name: str
    run: Callable[[StateT], OutT | None]
    #: the phase runs only when ``when(state)`` is true (default: always)
    when: Callable[[StateT], bool] | None = None


def run_phases(phases: Sequence[Phase[StateT, OutT]], state: StateT) -> OutT:
    """Run ``phases`` in order on ``state`` until one returns a value; return that value."""
    seconds: dict[str, float] | None = getattr(state, "phase_seconds", None)
    for phase in phases:
        check_interrupt()
        if phase.when is not None and not phase.when(state):
            continue
        started = time.perf_counter()
        try:
            out = phase.run(state)
        finally:
            if seconds is not None:
                seconds[phase.name] = seconds.get(phase.name, 0.0) + time.perf_counter() - started
        if out is not None:
            return out
    raise RuntimeError(f"pipeline ended without a result after phases {[p.name for p in phases]}")


def phase_names(phases: Sequence[Phase[Any, Any]]) -> list[str]:
    """The names of ``phases`` in order (for docs and tests)."""
    return [p.name for p in phases]
