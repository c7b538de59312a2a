"""Priority family: the paper's toy examples (Figs. 3–4), hand-worked evaluator arithmetic,
the bilinear latency model and the independent validator."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from planner.costmodels.files import default_models_dir, load_cost_model
from planner.priority.evaluate import FastTables, evaluate, evaluate_orders, g_per_s
from planner.priority.instance import load_priority_instance
from planner.priority.problem import InstancePlan, PriorityProblem, PrioritySchedule
from planner.priority.pipeline import run_method, to_schedule
from planner.priority.heuristics import Plan
from planner.priority.validator import validate_schedule

REPO = Path(__file__).resolve().parents[2]
FIG3 = REPO / "instances" / "priority" / "fig3_toy.yaml"
FIG4 = REPO / "instances" / "priority" / "fig4_toy.yaml"
TABLE2 = default_models_dir() / "bilinear" / "qwen2.5-7b__v100-32gb-sxm2__tp2.yaml"


def _g(problem: PriorityProblem, order: list[str], sizes: list[int]) -> float:
    names = [j.name for j in problem.jobs]
    met, total = evaluate(FastTables(problem.tables), [names.index(n) for n in order], sizes)
    return g_per_s(met, total)


def test_fig3_shortest_first_vs_slo_aware():
    problem = load_priority_instance(FIG3)
    # (B) job1 (300), job2 (500), job3 (800) one at a time: e2e = 300, 800, 1600 ms, total 2700;
    # job2's SLO is 600 ms -> missed; 2 met: G = 2 / 2.7 s = 0.7407 req/s.
    assert _g(problem, ["job1", "job2", "job3"], [1, 1, 1]) == pytest.approx(2 / 2.7, abs=1e-12)
    # (C) job2 first: e2e = 500, 800, 1600, total 2900, all 3 met: G = 3 / 2.9 = 1.0345 req/s.
    assert _g(problem, ["job2", "job1", "job3"], [1, 1, 1]) == pytest.approx(3 / 2.9, abs=1e-12)
    exact = run_method(problem, "exact")
    assert exact.objective == pytest.approx(3 / 2.9, abs=1e-12)
    assert run_method(problem, "spf").objective == pytest.approx(2 / 2.7, abs=1e-12)


def test_infinite_slo_means_always_met(tmp_path):
    # Fig. 3 with job2's SLO set to .inf (YAML): job2 can no longer miss, so shortest-first
    # (job1, job2, job3: e2e 300, 800, 1600 ms, total 2700) meets all 3: G = 3 / 2.7 = 1.1111 req/s,
    # above the 3 / 2.9 of job2-first, and every exact method proves it.
    text = FIG3.read_text().replace("slo_e2e_ms: 600,", "slo_e2e_ms: .inf,")
    assert ".inf" in text
    (tmp_path / "fig3_inf.yaml").write_text(text)
    problem = load_priority_instance(tmp_path / "fig3_inf.yaml")
    assert _g(problem, ["job1", "job2", "job3"], [1, 1, 1]) == pytest.approx(3 / 2.7, abs=1e-12)
    for method in ("exact", "spf", "sa"):
        result = run_method(problem, method)
        assert result.objective == pytest.approx(3 / 2.7, abs=1e-12), method
        assert result.validation.feasible and result.validation.objective == pytest.approx(3 / 2.7, abs=1e-12)


def test_fig4_batch_size_tradeoff():
    problem = load_priority_instance(FIG4)
    # (B) one batch of 3: each job takes 800 ms, e2e 800 each, total 2400; only job3 (SLO 1000) meets:
    # G = 1 / 2.4 s = 0.41667 req/s (the paper prints 0.0004 req/ms).
    assert _g(problem, ["job1", "job2", "job3"], [3]) == pytest.approx(1 / 2.4, abs=1e-12)
    # (C) batch (job1, job2) at 500 ms each, then job3 alone (300 ms) after waiting 500:
    # e2e 500 + 500 + 800 = 1800 ms, all three met: G = 3 / 1.8 s = 1.6667 req/s (paper: 0.00167 req/ms).
    assert _g(problem, ["job1", "job2", "job3"], [2, 1]) == pytest.approx(3 / 1.8, abs=1e-12)
    assert run_method(problem, "exact").objective == pytest.approx(3 / 1.8, abs=1e-12)
    assert run_method(problem, "fcfs").objective == pytest.approx(1 / 2.4, abs=1e-12)


def test_chat_job_ttft_and_tpot():
    # One chat job behind one e2e job, b_max = 1, explicit latencies (ms).
    # e2e job: exec 1000, SLO 1500 -> met (e2e 1000).
    # chat job: exec 3000 of which prefill 1000 -> decode 2000 over 100 tokens = TPOT 20 ms ≤ 25;
    # TTFT = wait 1000 + prefill 1000 = 2000 ≤ 2500 -> met.  e2e = 1000 + 3000 = 4000.
    jobs = [
        {"name": "code", "kind": "e2e", "input_tokens": 1, "output_tokens": 1, "slo_e2e_ms": 1500, "exec_ms": [1000]},
        {"name": "chat", "kind": "chat", "input_tokens": 1, "output_tokens": 100, "slo_ttft_ms": 2500,
         "slo_tpot_ms": 25, "exec_ms": [3000], "prefill_ms": [1000]},
    ]
    problem = PriorityProblem(name="chat", jobs=jobs, b_max=1)
    met, total = evaluate(FastTables(problem.tables), [0, 1], [1, 1])
    assert (met, total) == (2, 5000.0)
    # Tighter TPOT SLO (19 ms < 20 ms): the chat job misses whatever its position; the code job
    # still meets its SLO in first place (e2e 1000 ≤ 1500); latencies 1000 + 4000 unchanged.
    jobs[1]["slo_tpot_ms"] = 19
    tight = PriorityProblem(name="chat", jobs=jobs, b_max=1)
    assert evaluate(FastTables(tight.tables), [0, 1], [1, 1]) == (1, 5000.0)
    # Chat first: e2e 3000 and 4000; code waits 3000 -> e2e 4000 > 1500 -> nobody meets an SLO.
    assert evaluate(FastTables(tight.tables), [1, 0], [1, 1]) == (0, 7000.0)


def test_bilinear_tables_match_table2_by_hand():
    model = load_cost_model(TABLE2)
    job = {"name": "a", "kind": "e2e", "input_tokens": 1000, "output_tokens": 2, "slo_e2e_ms": 1e6}
    # two jobs: b_max is stored as min(b_max, N), so batch size 2 needs N ≥ 2
    problem = PriorityProblem(name="t2", jobs=[job, {**job, "name": "b"}], b_max=2, cost_model=model)
    # Eq. 14 at b=1, l=1000: 0.1*1000 + 5.7 + 0.01*1000 + 43.67 = 159.37 ms.
    assert problem.tables.prefill_ms[0, 0] == pytest.approx(159.37)
    # Eq. 15: tau_d(1, 1001) = 0.0002*1001 + 0.275 + 0.00088*1001 + 15.85 = 17.20608;
    #         tau_d(1, 1002) = 17.20716.  Eq. 17: 159.37 + 17.20608 + 17.20716 = 193.78324 ms.
    assert problem.tables.exec_ms[0, 0] == pytest.approx(193.78324)
    # b=2: prefill 0.1*2*1000 + 11.4 + 10 + 43.67 = 265.07; decode steps 0.0004*1001 + 0.55 + 0.00088*1001
    # + 15.85 = 17.68128 and 17.68256 -> 300.43384 ms.
    assert problem.tables.exec_ms[0, 1] == pytest.approx(300.43384)


def test_evaluators_and_validator_agree_on_random_plans():
    model = load_cost_model(TABLE2)
    rng = np.random.default_rng(3)
    jobs = []
    for i in range(7):
        if i % 2:
            jobs.append({"name": f"j{i}", "kind": "e2e", "input_tokens": int(rng.integers(50, 900)),
                         "output_tokens": int(rng.integers(20, 600)), "slo_e2e_ms": float(rng.uniform(3000, 30000))})
        else:
            jobs.append({"name": f"j{i}", "kind": "chat", "input_tokens": int(rng.integers(50, 900)),
                         "output_tokens": int(rng.integers(20, 600)), "slo_ttft_ms": float(rng.uniform(1000, 15000)),
                         "slo_tpot_ms": float(rng.uniform(16, 20))})
    problem = PriorityProblem(name="r", jobs=jobs, b_max=3, cost_model=model)
    fast = FastTables(problem.tables)
    orders = np.array([rng.permutation(7) for _ in range(30)])
    sizes = [3, 1, 2, 1]
    met_v, total_v, fits = evaluate_orders(problem.tables, orders, sizes)
    assert fits.all()
    for row, m_v, t_v in zip(orders, met_v, total_v):
        met, total = evaluate(fast, row.tolist(), sizes)
        assert met == m_v and total == pytest.approx(t_v, rel=1e-12)
        schedule = to_schedule(problem, [(list(range(7)), Plan(tuple(row.tolist()), tuple(sizes), met, total))])
        report = validate_schedule(problem, schedule)  # explicit decode sum, independent code
        assert report.feasible
        assert report.details["slo_met"] == met
        assert report.objective == pytest.approx(g_per_s(met, total), rel=1e-9)


def test_validator_flags_broken_plans():
    problem = load_priority_instance(FIG4)
    names = tuple(j.name for j in problem.jobs)
    too_big = PrioritySchedule(plans=(InstancePlan(order=(0, 1, 2, 0), batch_sizes=(4,)),), job_names=names,
                               met=0, total_latency_ms=1.0)
    report = validate_schedule(problem, too_big)
    assert not report.feasible
    assert {v.constraint for v in report.violations} == {"b_max", "cover"}
    missing = PrioritySchedule(plans=(InstancePlan(order=(0, 1), batch_sizes=(2,)),), job_names=names, met=0,
                               total_latency_ms=1.0)
    assert [v.constraint for v in validate_schedule(problem, missing).violations] == ["cover"]


def test_token_capacity_limits_batches():
    # Eq. 20: capacity 5 tokens per batch, each job holds 2 + 1 = 3 -> no batch of 2 fits, so the
    # Fig. 4 optimum (batch of 2 then 1) is out: three singletons 300, 600, 900 ms, all SLOs
    # (600, 600, 1000) met by job1, job2 then job3 -> G = 3 / 1.8 s as well, but batches are size 1.
    data = load_priority_instance(FIG4).model_dump()
    for job in data["jobs"]:
        job["input_tokens"] = 2
    data["token_capacity"] = 5
    problem = PriorityProblem.model_validate(data)
    for method in ("exact", "sa", "fcfs", "exhaustive"):
        result = run_method(problem, method)
        assert result.validation.feasible, method
        assert all(size == 1 for size in result.solution.plans[0].batch_sizes), method
    assert run_method(problem, "exact").objective == pytest.approx(3 / 1.8)


def test_b_max_above_the_job_count_is_stored_as_the_job_count():
    # b_max > N allows no more plans than b_max = N; the (N × b_max) tables stay N × N.
    model = load_cost_model(TABLE2)
    jobs = [{"name": f"j{i}", "kind": "e2e", "input_tokens": 100, "output_tokens": 10, "slo_e2e_ms": 1e4} for i in range(3)]
    problem = PriorityProblem(name="wide", jobs=jobs, b_max=10**6, cost_model=model)
    assert problem.b_max == 3 and problem.tables.exec_ms.shape == (3, 3)
    same = PriorityProblem(name="n", jobs=jobs, b_max=3, cost_model=model)
    assert problem.tables.exec_ms.tolist() == same.tables.exec_ms.tolist()
