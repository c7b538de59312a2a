"""Nominal seconds of the batching pipeline's phases (deterministic effort, `planner.core.work`).

`planner.batching.pipeline.solve_batching` spends its time limit on a `WorkClock` charged with these
estimates, computed from sizes and work counts only (never from the wall clock), so that the phases
it runs or skips and the effort each one gets — presets, request-order search, rollouts, lazy
staggered plans, the single-prefill test, the MIP and its node limit — are the same on every run with
the same input, seed and time limit:

* a preset (simulate + validate + bound, `solve.run_scheduler`): `PRESET_FIXED` plus
  `SIM_PER_REQUEST_BATCH` per request × batch of its schedule (charged after it ran: the count is
  the schedule's, deterministic);
* one simulation of the order search: `SIM_FIXED` plus `SIM_PER_REQUEST_BATCH` per request × batch
  (the best preset's batch count stands for all orders);
* one rollout (`rollouts`): `ROLLOUT_PER_REQUEST_BATCH` per request × batch of the best schedule so
  far, plus `ROLLOUT_FIXED`;
* a small plan MIP (lazy staggered / single-prefill test): `PLAN_MIP_FIXED` plus `PLAN_MIP_PER_NODE`
  per node of its node limit and `PLAN_MIP_PER_NONZERO` per nonzero;
* building the main MIP and handing it to the solver: `BUILD_PER_NONZERO` per nonzero, estimated from
  the request × batch grid before building (`mip_nonzeros_estimate`);
* the solver: its presolve and the start of its root cost `ROOT_PER_NONZERO` per nonzero (HiGHS's
  presolve does not look at its time limit often: measured, a 3 s limit ran 4–6 s on 90k–380k
  nonzeros, so the MIP is started only when that much is left) and each further branch-and-bound node
  `NODE_PER_NONZERO` per nonzero; under a time limit the MIP gets a node limit (deterministic) from
  the nominal seconds left, and the wall time left as the solver's own time limit (a guard: a root that
  does not finish in it makes the run wall-clock dependent, and the result says so).

The constants come from `benchmarks/batching_effort.py` on this project's 2-core reference machine,
measured while other jobs kept its load average near 5, and sit at about the 90th percentile of wall /
count there (about 2–3 times an idle machine's pace), so that the nominal clock runs ahead of the wall
clock: the pipeline then stops on its nominal budget, not on the wall-clock guard, and repeats run to
run.  On another machine the same
nominal budget takes more or less wall time; when the wall-clock guard decides, the result says so
(``stats["repeatable"]`` is False and the message gives the reason).
"""

from __future__ import annotations

PRESET_FIXED = 0.01
SIM_FIXED = 0.005
SIM_PER_REQUEST_BATCH = 4.0e-5
ROLLOUT_FIXED = 1.0e-4
ROLLOUT_PER_REQUEST_BATCH = 5.0e-7
PLAN_MIP_FIXED = 0.02
PLAN_MIP_PER_NODE = 0.002
PLAN_MIP_PER_NONZERO = 3.0e-6
BUILD_PER_NONZERO = 4.0e-6
ROOT_PER_NONZERO = 4.0e-5
NODE_PER_NONZERO = 2.0e-6

#: Shares of the time limit: the presets stop starting new runs past `PRESET_SHARE`, the searched
#: heuristics (order search ≤ ⅓ of their budget, rollouts ≤ ⅔ of the rest, lazy plans) past
#: `HEURISTIC_SHARE`; the MIP gets the rest.
PRESET_SHARE = 0.3
HEURISTIC_SHARE = 0.5
#: ... or this share when the MIP could not be built and presolved within the limit anyway.
HEURISTIC_SHARE_WITHOUT_MIP = 0.85
#: A caller's imports and instance loading before `solve_batching` (the CLI passes ``started``): measured
#: 0.5–1.8 s on the reference machine (importing the batching pipeline, scipy and highspy).
CALL_SETUP = 1.0
#: Loading the compiled rollout kernel (numba's import and its cached machine code), charged once per call
#: that runs rollouts (measured 0.7–2 s on the reference machine, most of it numba's import).
ROLLOUT_SETUP = 1.0


def preset_seconds(requests: int, batches: int) -> float:
    """One preset: simulate, validate and bound a schedule of ``batches`` batches."""
    return PRESET_FIXED + SIM_PER_REQUEST_BATCH * requests * batches


def simulation_seconds(requests: int, batches: int) -> float:
    """One simulation of the order search (a preset on a permuted instance)."""
    return SIM_FIXED + SIM_PER_REQUEST_BATCH * requests * batches


def rollout_seconds(requests: int, batches: int) -> float:
    """One compiled rollout."""
    return ROLLOUT_FIXED + ROLLOUT_PER_REQUEST_BATCH * requests * batches


def plan_mip_seconds(nonzeros: int, node_limit: int) -> float:
    """A small plan MIP with ``nonzeros`` nonzeros stopped at ``node_limit`` nodes."""
    return PLAN_MIP_FIXED + PLAN_MIP_PER_NONZERO * nonzeros + PLAN_MIP_PER_NODE * node_limit


def build_seconds(nonzeros: int) -> float:
    """Building the main MIP, its warm start, and handing it to the solver."""
    return BUILD_PER_NONZERO * nonzeros


def root_seconds(nonzeros: int) -> float:
    """The solver's presolve and root node (LP, cuts, root heuristics)."""
    return ROOT_PER_NONZERO * nonzeros


def node_seconds(nonzeros: int) -> float:
    """One further branch-and-bound node."""
    return NODE_PER_NONZERO * nonzeros


def node_limit_for(seconds: float, nonzeros: int) -> int:
    """Nodes affordable in ``seconds`` nominal seconds after the root (0: the root only)."""
    per = node_seconds(nonzeros)
    left = seconds - root_seconds(nonzeros)
    return max(int(left // per), 0) if per > 0 else 0
