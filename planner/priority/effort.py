"""Nominal seconds of the exact priority pipeline (deterministic effort, `planner.core.work`).

`planner.priority.pipeline.run_exact` spends a time limit on a `WorkClock` charged with these estimates,
computed from sizes and work counts only, so the phases it runs, the local search's passes, the
Lagrangian's steps and the branch-and-bound's nodes are the same on every run with the same input,
seed and time limit:

* reading an instance: `LOAD_FIXED` plus `LOAD_PER_JOB` per job (charged when the call began
  before reading it, ``started=``);
* the compiled kernels in a new process (numba's imports, its cache loads and the typed-dict
  compile of the branch-and-bound's memo; 1.5–3 s measured): `KERNEL_LOAD` once per call of the
  exact search, charged after the warm start (on every call, so that the budget repeats);
* the baselines (FCFS, SPF, EDF): `BASELINES_PER_JOB` per job;
* the warm start's local search (`heuristics.local_search`): `EVALUATE_PER_JOB` per job of each
  candidate plan evaluated;
* the branch-and-bound: compiled (b_max ≥ 2) per node `NODE_PER_JOB` per job plus `NODE_PER_ROOT_BATCH`
  per square root of the batches an expansion may list (C(N, ≤ b_max); the leader screen skips most
  of them) — fitted on N = 20–40, b_max = 2–4 (3.6–11 µs per node measured) with half again as
  margin; in Python (`exact._ParametricSearch.visit`, b_max = 1 above the subset DP's size)
  `NODE_PYTHON` per node;
* a subgradient step of the Lagrangian bound (and the count-split pass, `COUNT_PASS_STEPS` steps'
  worth per SLO count): `STEP_PER_CELL` per (job, bucket, batch size) cell of its DP;
* a round of the subset DP (b_max = 1): `DP_PER_STATE` per (subset, job) pair;
* the exhaustive search: `EXHAUSTIVE_PER_JOB` per job of each plan evaluated;
* the bounds after a stop and the validation: `FINISH_FIXED` plus `FINISH_PER_JOB` per job.

The constants are upper envelopes of timings on this project's 2-core reference machine while it
was shared with other work (load average 2–6), rounded up so that the nominal clock runs ahead of
the wall clock: the pipeline then stops on its nominal budget, not on the wall-clock guard, and
repeats run to run.  On another machine the same nominal budget takes more or less wall time; when
the wall-clock guard decides instead, the result says the run may not repeat (``stats.wall_cut``).
"""

from __future__ import annotations

from math import comb

LOAD_FIXED = 0.05
LOAD_PER_JOB = 1.0e-3
KERNEL_LOAD = 2.0
BASELINES_PER_JOB = 1.0e-4
EVALUATE_PER_JOB = 1.5e-6
NODE_PER_JOB = 1.6e-7
NODE_PER_ROOT_BATCH = 6.0e-8
NODE_PYTHON = 6.0e-5
STEP_PER_CELL = 3.0e-8
COUNT_PASS_STEPS = 3.0
DP_PER_STATE = 1.0e-8
EXHAUSTIVE_PER_JOB = 2.0e-7
FINISH_FIXED = 0.05
FINISH_PER_JOB = 1.0e-3


def load_seconds(jobs: int) -> float:
    return LOAD_FIXED + LOAD_PER_JOB * jobs


def baselines_seconds(jobs: int) -> float:
    return BASELINES_PER_JOB * jobs


def evaluations_seconds(candidates: int, jobs: int) -> float:
    """``candidates`` plans of ``jobs`` jobs evaluated by the local search."""
    return EVALUATE_PER_JOB * candidates * jobs


def compiled_search_seconds(nodes: int, jobs: int, b_max: int) -> float:
    """``nodes`` nodes of the compiled branch-and-bound on ``jobs`` jobs at ``b_max``."""
    return nodes * (NODE_PER_JOB * jobs + NODE_PER_ROOT_BATCH * batches_per_node(jobs, b_max) ** 0.5)


def python_search_seconds(nodes: int) -> float:
    return NODE_PYTHON * nodes


def step_seconds(jobs: int, buckets: int, b_max: int) -> float:
    """One subgradient step of the Lagrangian bound (its DP over jobs × buckets × batch sizes)."""
    return STEP_PER_CELL * (jobs + 1) * buckets * b_max * max(jobs // 2, 1)


def count_pass_seconds(jobs: int, buckets: int, b_max: int) -> float:
    """The count-split pass of `planner.priority.count_bound` (one DP per SLO count)."""
    return COUNT_PASS_STEPS * (jobs + 1) * step_seconds(jobs, buckets, b_max)


def dp_round_seconds(jobs: int) -> float:
    return DP_PER_STATE * (2 ** jobs) * jobs


def exhaustive_seconds(plans: int, jobs: int) -> float:
    return EXHAUSTIVE_PER_JOB * plans * jobs


def finish_seconds(jobs: int) -> float:
    return FINISH_FIXED + FINISH_PER_JOB * jobs


def batches_per_node(remaining: int, b_max: int) -> int:
    """Batches of at most ``b_max`` of ``remaining`` jobs (the children an expansion may list)."""
    return sum(comb(remaining, size) for size in range(1, min(b_max, remaining) + 1))
