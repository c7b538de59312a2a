"""Trigger logic / trace replay and the simulator-backed evaluator of the queueing family."""

from __future__ import annotations

import numpy as np
import pytest

from planner.core.contract import RunOptions
from planner.queueing.evaluator import EstimatorEvaluator, SimulatorEvaluator
from planner.queueing.heuristics import edf
from planner.queueing.problem import InstanceType, QueueingProblem, RequestGroup, VirtualQueue
from planner.queueing.pipeline import QueueingKnobs, solve_queueing
from planner.queueing.trigger import replay_trace


def trace(deadline_a2: float) -> QueueingProblem:
    # One instance holding A, swap 10 s, groups of 1 s work: A1 at t=0 (deadline 100), B1 at t=0.1 (100),
    # A2 at t=0.2 (deadline_a2).  A1 runs 0–1.  FCFS then runs B1 at 1+10 = 11 and A2 at 12+10 = 22.
    # Re-ordering A2 before B1 starts A2 at 1 and B1 at 1+1+10 = 12: both on time.
    groups = (RequestGroup("A1", "A", "c", 100.0, 2, 10, 10, 0, 10, arrival_s=0.0),
              RequestGroup("B1", "B", "c", 100.0, 2, 10, 10, 0, 10, arrival_s=0.1),
              RequestGroup("A2", "A", "c", deadline_a2, 2, 10, 10, 0, 10, arrival_s=0.2))
    return QueueingProblem("trace", groups, (InstanceType("t", "x", 1, 10.0, 1),), (VirtualQueue("q", 0, "A"),),
                           np.ones((1, 3)), np.zeros((1, 3)))


def test_qlm_resolves_only_on_a_predicted_violation():
    loose = trace(100.0)  # FCFS meets every deadline: the trigger never fires
    report = replay_trace(loose, "qlm")
    assert report.milp_solves == 0
    assert report.overall_attainment == 1.0
    tight = trace(20.0)  # A2 predicted at 22 > 20: one re-solve fixes it
    fcfs = replay_trace(tight, "fcfs")
    qlm = replay_trace(tight, "qlm")
    assert fcfs.start_s["A2"] == pytest.approx(22.0) and fcfs.overall_attainment == pytest.approx(4 / 6)
    assert qlm.milp_solves == 1
    assert qlm.start_s == {"A1": 0.0, "A2": 1.0, "B1": 12.0}
    assert qlm.overall_attainment == 1.0
    assert qlm.swaps == 1 and fcfs.swaps == 2


def test_simulator_evaluator_plugs_into_the_interface():
    pytest.importorskip("planner.batching.scheduler")
    groups = tuple(RequestGroup(f"g{i}", m, "c", 1000.0, 4, 64, 32, 0, 32) for i, m in enumerate("ABAB"))
    p = QueueingProblem("sim", groups, (InstanceType("t", "x", 1, 5.0, 1),), (VirtualQueue("q", 0, None),),
                        np.ones((1, 4)), np.zeros((1, 4)))
    grouped = solve_queueing(p, RunOptions(), QueueingKnobs(formulation="slots")).solution
    thrash = edf(p)
    sim = SimulatorEvaluator()
    by_model, alternating = sim.evaluate(p, grouped), sim.evaluate(p, thrash)
    assert by_model.swaps == EstimatorEvaluator().evaluate(p, grouped).swaps == 2
    assert alternating.swaps == 4
    # Same requests, two fewer 5 s swaps and bigger batches per run: the grouped plan drains > 10 s earlier.
    assert alternating.drain_s - by_model.drain_s > 10.0
    assert by_model.overall_attainment == 1.0
