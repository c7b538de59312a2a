"""The batching validator's per-request token rules on hand-made schedules: ``finished`` (a request runs
after its last token) and ``prefill_overrun`` (a prefill beyond the prompt), each found alone, with the
value and limit the rule compares."""

from __future__ import annotations

from planner.batching.problem import make_problem
from planner.batching.schedule import Schedule
from planner.batching.validator import validate_schedule


def test_a_request_that_runs_after_finishing_is_the_one_violation() -> None:
    # r0: I = 2, O = 1.  Batch 0 prefills both tokens and generates the only output token; batch 1 runs r0 again.
    problem = make_problem([2], [1])
    report = validate_schedule(problem, Schedule.from_batches([{0: 2}, {0: 1}]))
    assert not report.feasible
    assert [(v.constraint, v.where, v.value, v.limit) for v in report.violations] == [
        ("finished", "batch 1, request r0", 1.0, 0.0)]
    ok = validate_schedule(problem, Schedule.from_batches([{0: 2}]))
    assert ok.feasible and ok.objective == ok.details["batch_seconds"][0] > 0


def test_a_prefill_past_the_prompt_is_the_one_violation() -> None:
    # r0: I = 3, O = 2.  Batch 0 processes 5 prompt tokens (0 + 5 > 3), then one decode token: O is reached.
    problem = make_problem([3], [2])
    report = validate_schedule(problem, Schedule.from_batches([{0: 5}, {0: 1}]))
    assert [(v.constraint, v.where, v.value, v.limit) for v in report.violations] == [
        ("prefill_overrun", "batch 0, request r0", 5.0, 3.0)]
    assert "(0+5 > 3)" in report.violations[0].message
    assert validate_schedule(problem, Schedule.from_batches([{0: 3}, {0: 1}])).feasible
