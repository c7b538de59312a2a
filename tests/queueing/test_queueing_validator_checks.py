"""The queueing validator's ``fits`` rule on a hand-made problem: a group on a queue whose type cannot run
its model (infinite work) is named with the queue, in queue order after an unknown index before it, and
the plan is not replayed (objective NaN)."""

from __future__ import annotations

import math

from support.queueing import make_problem
from planner.queueing.problem import QueueAssignment
from planner.queueing.validator import validate_assignment


def test_a_group_on_a_queue_it_does_not_fit_is_named_after_an_unknown_index_before_it() -> None:
    # g0 (model A) runs 3 s on the one instance type; g1 (model B) cannot run on it (infinite work).
    problem = make_problem(["A", "B"], [100.0, 100.0], [3.0, math.inf], queues=2, loaded="A")
    report = validate_assignment(problem, QueueAssignment(((5, 1), (0,)), "hand"))
    assert not report.feasible and math.isnan(report.objective)
    assert [(v.constraint, v.where) for v in report.violations] == [("group_once", "q0"), ("fits", "g1 on q0")]
    assert report.violations[1].message == "B does not fit on q0"
    # the same plan without the unknown index, on a problem where g1 fits (4 s): feasible, one swap (A -> B)
    fitting = make_problem(["A", "B"], [100.0, 100.0], [3.0, 4.0], queues=2, loaded="A", swap=10.0)
    ok = validate_assignment(fitting, QueueAssignment(((1,), (0,)), "hand"))
    assert ok.feasible and ok.details["swaps"] == 1 and ok.details["start_s"] == {"g0": 0.0, "g1": 10.0}
