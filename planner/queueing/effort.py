"""Nominal seconds of the certified queueing pipeline's steps (deterministic effort, `planner.core.work`).

Every phase of `planner.queueing.certified` that stops "when the time is up" (further local-search
starts, the Lagrangian heuristic, the deadline Lagrangian's rounds, the iterated local search, the
reduced-cell cap), and the scale-up's witness search (`planner.queueing.capacity.witness_fleet`),
decides on a `WorkClock` charged with these estimates, computed from work counts only:

* a descent (`planner.queueing.compiled.local_search`): its counts of move evaluations × `EVALUATION`,
  positions rescanned for lateness × `SCAN`, positions of the queue profiles built × `PROFILE`,
  plus the Python set-up, `SEARCH_SETUP_PER_GROUP` per group;
* a validation or replay of a plan (pure Python): `REPLAY_PER_GROUP` per group;
* a Hungarian solve (`planner.queueing.compiled.assignment_with_duals`): its ``steps`` (columns
  scanned) × `ASSIGNMENT_STEP`, plus `MATRIX_CELL` per cell of the cost matrix numpy builds, plus
  the Python around it, `ASSIGNMENT_SETUP_PER_ROW` per row (group or piece);
* the Lagrangian reduced costs (`planner.queueing.lagrangian_fixing`): `FIXING_CELL` per
  (group, queue, position) and `FIXING_PER_GROUP` per group (a numpy pass per group);
* the reduced slots MILP's build: `MILP_BUILD_PER_CELL` per kept cell;
* the baselines: `BASELINE_PER_GROUP` per group and `BASELINE_PER_CELL` per (queue, group);
* building a full MILP of `planner.queueing.formulation` (`milp_model_seconds`, used to skip a model
  that cannot even be built in the time left): blocks `BLOCKS_BUILD_PER_CELL` per (queue, group),
  slots `SLOTS_BUILD_PER_CELL` per (queue, group) plus `SLOTS_BUILD_PER_BINARY` per (queue, group,
  slot) — upper envelopes of builds of 16–1,024 queues × 8–60 groups (blocks 56–97 µs per cell,
  slots 9.6–27 µs per binary), not least-squares fits;
* building the scale-up's capacity bound (`planner.queueing.capacity.bound_model_seconds`):
  `CAPACITY_ROWS_PER_CLASS` per (SLO threshold, existing queue or candidate type) — 51 s for 40 ×
  2,049 on the reference machine, with the same caveat — plus `CAPACITY_PER_CELL` per possible share
  variable, Σ_d |D(d)| × classes (build, conversion and hand-over to HiGHS measured at 2.3–2.4 µs per
  cell for 2,000–20,000 groups × 16–64 queues, 0.7–29 M non-zeros).

* reading an instance (charged when the caller's call began before it, ``started=``): `LOAD_FIXED`
  plus `LOAD_PER_GROUP` per group (0.9–1.9 s for 2,000 groups on the shared reference machine), and
  loading the compiled kernels from numba's cache in a new process, `COMPILED_LOAD` once per call
  of the certified pipeline (0.3–1.5 s measured; charged on every call so that the budget repeats).

The constants are non-negative least-squares fits of the relative error on this project's reference
machine (2-core Xeon; `benchmarks/queueing_effort.py` re-measures them on random instances of 25–400
groups × 2–8 queues and writes `benchmarks/results/queueing_effort.md`), rounded up by about a
quarter so that the nominal clock runs ahead of the wall clock there (median wall / nominal ≈ 0.8 per
kind of step): the pipeline then stops on its nominal budget, not on the wall-clock guard, and
repeats run to run.  `PROFILE` is 0: the fit puts that cost on the evaluations (a descent builds one
queue profile per group it tries to move and then evaluates at least as many positions).  On another
machine the same nominal budget takes more or less wall time; re-run the script to re-calibrate.
"""

from __future__ import annotations

EVALUATION = 1.8e-7
SCAN = 2.9e-9
PROFILE = 0.0
SEARCH_SETUP_PER_GROUP = 1.5e-6
REPLAY_PER_GROUP = 3.2e-6
ASSIGNMENT_STEP = 3.5e-9
MATRIX_CELL = 3.1e-8
ASSIGNMENT_SETUP_PER_ROW = 4.5e-6
FIXING_CELL = 1.5e-8
FIXING_PER_GROUP = 4.5e-5
MILP_BUILD_PER_CELL = 6.8e-6
BASELINE_PER_GROUP = 2.7e-5
BASELINE_PER_CELL = 2.0e-6
BLOCKS_BUILD_PER_CELL = 1.0e-4
SLOTS_BUILD_PER_CELL = 2.0e-4
SLOTS_BUILD_PER_BINARY = 5.0e-6
CAPACITY_ROWS_PER_CLASS = 7.0e-4
CAPACITY_PER_CELL = 3.0e-6
LOAD_FIXED = 0.05
LOAD_PER_GROUP = 8.0e-4
COMPILED_LOAD = 0.8


def load_seconds(num_groups: int) -> float:
    """Reading and checking an instance of ``num_groups`` groups (YAML, Θ and P per group and type)."""
    return LOAD_FIXED + LOAD_PER_GROUP * num_groups


def search_seconds(counts, num_groups: int) -> float:
    """Nominal seconds of one descent with work ``counts`` = (evaluations, positions scanned, positions profiled)."""
    evaluations, scanned, profiled = (int(c) for c in counts)
    return EVALUATION * evaluations + SCAN * scanned + PROFILE * profiled + SEARCH_SETUP_PER_GROUP * num_groups


def replay_seconds(num_groups: int) -> float:
    """Nominal seconds of one validation (or replay) of a plan."""
    return REPLAY_PER_GROUP * num_groups


def assignment_seconds(steps: int, cells: int, rows: int) -> float:
    """Nominal seconds of one Hungarian solve with ``steps`` steps on a matrix of ``cells`` cells and ``rows`` rows."""
    return ASSIGNMENT_STEP * steps + MATRIX_CELL * cells + ASSIGNMENT_SETUP_PER_ROW * rows


def fixing_seconds(cells: int, num_groups: int) -> float:
    """Nominal seconds of the Lagrangian reduced costs over ``cells`` (group, queue, position) cells."""
    return FIXING_CELL * cells + FIXING_PER_GROUP * num_groups


def milp_build_seconds(cells: int) -> float:
    return MILP_BUILD_PER_CELL * cells


def baseline_seconds(num_queues: int, num_groups: int) -> float:
    """Nominal seconds of the baselines (EDF, FCFS, greedy) and their validation."""
    return BASELINE_PER_GROUP * num_groups + BASELINE_PER_CELL * num_queues * num_groups


def milp_model_seconds(num_queues: int, num_groups: int, formulation: str) -> float:
    """Estimated seconds to build the full ``formulation`` MILP (``slots`` or ``blocks``) of ``num_queues``
    queues (scale-up candidates included) and ``num_groups`` groups."""
    cells = num_queues * num_groups
    if formulation == "blocks":
        return BLOCKS_BUILD_PER_CELL * cells
    return SLOTS_BUILD_PER_CELL * cells + SLOTS_BUILD_PER_BINARY * cells * num_groups
