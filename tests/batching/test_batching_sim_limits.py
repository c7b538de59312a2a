"""Simulator size: decode stretches recorded as whole arrays, `Schedule.batches()` by slices, and the
--max-work cap of `planner simulate / solve / compare batching` (one line, before minutes and gigabytes)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from support import assert_one_line, run_cli
from planner.batching.problem import make_problem
from planner.batching.schedule import Schedule
from planner.batching.scheduler import PRESETS, WorkLimitError, effective_limits, min_batches, simulate
from planner.batching.pipeline import _finish_metrics
from planner.batching.validator import validate_schedule
from planner.errors import PlannerError


def write_instance(path: Path, inputs, outputs, limits: str = "{C: 4096, M: 100000000}") -> Path:
    lines = ["family: batching", f"name: {path.stem}", f"limits: {limits}", "cost_model: infermax-7b", "requests:"]
    lines += [f"  - {{request_id: r{k}, input_tokens: {i}, output_tokens: {o}}}" for k, (i, o) in enumerate(zip(inputs, outputs))]
    path.write_text("\n".join(lines) + "\n")
    return path


# ---- the cap: one line, before any simulation ------------------------------------------------------------

@pytest.mark.parametrize("command", ["simulate", "solve", "compare"])
def test_fifty_requests_of_a_million_tokens_are_refused_in_one_line(monkeypatch, capsys, tmp_path, command):
    # The audit's case: 50 × 10^6 output tokens is ≥ 10^6 batches of 50 requests (it took ~110 s and 6.3 GB;
    # 47 s and 1.8 GB with --max-work raised, after the simulator and validator changes of this stop).
    path = write_instance(tmp_path / "huge.yaml", [100 + k for k in range(50)], [10**6 - 7 * k for k in range(50)])
    code, out, err = run_cli(monkeypatch, capsys, command, "batching", str(path))
    line = assert_one_line(code, err, "huge.yaml: requests:", "50 requests need at least 1,000,000 batches",
                           "50,000,000 request-batches", "--max-work 30,000,000")
    assert out == "", line


def test_max_work_is_checked(monkeypatch, capsys, tmp_path):
    path = write_instance(tmp_path / "small.yaml", [4, 5], [3, 2])
    code, _, err = run_cli(monkeypatch, capsys, "simulate", "batching", str(path), "--max-work", "0")
    assert_one_line(code, err, "--max-work must be at least 1, got 0")


def test_the_cap_is_requests_times_batches(monkeypatch, capsys, tmp_path):
    # R_max = 1 serialises the requests: 6 × 40 tokens = 240 batches (the longest output alone would say
    # 40; the lower bound counts R_max).  A limit of exactly 6 × 240 runs, one less is refused.
    path = write_instance(tmp_path / "serial.yaml", [3] * 6, [40] * 6, "{C: 4096, M: 100000, R_max: 1}")
    code, out, err = run_cli(monkeypatch, capsys, "simulate", "batching", str(path), "--json")
    assert code == 0, err
    batches = json.loads(out)["solution"]["num_batches"]
    assert batches == 240
    code, out, err = run_cli(monkeypatch, capsys, "simulate", "batching", str(path), "--json", "--max-work", str(6 * 240))
    assert code == 0, err
    assert json.loads(out)["solution"]["num_batches"] == 240
    code, out, err = run_cli(monkeypatch, capsys, "simulate", "batching", str(path), "--max-work", str(6 * 240 - 1))
    assert_one_line(code, err, "serial.yaml: requests:", "6 requests need at least", "--max-work 1,439")


def test_a_run_stopped_inside_the_simulation_is_one_line(monkeypatch, capsys, tmp_path):
    # vllm without hybrid batching runs prefills and decodes in separate batches: more batches than the
    # lower bound, so a limit between the two stops the simulator itself (not the up-front check).
    path = write_instance(tmp_path / "mixed.yaml", [30, 5, 60, 2, 9], [20, 35, 3, 25, 12], "{C: 64, M: 100000}")
    code, out, err = run_cli(monkeypatch, capsys, "simulate", "batching", str(path), "--json")
    assert code == 0, err
    batches = json.loads(out)["solution"]["num_batches"]
    from planner.batching.instance import load_batching_instance

    problem = load_batching_instance(path)
    lower = min_batches(problem, *(effective_limits(problem, PRESETS["vllm"])[k] for k in (0, 2, 3)))
    assert lower < batches
    code, _, err = run_cli(monkeypatch, capsys, "simulate", "batching", str(path), "--max-work", str(5 * (batches - 1)))
    assert_one_line(code, err, "mixed.yaml: requests:", "under vllm", f"at least {batches:,} batches")


# ---- the lower bound and the in-simulation stop ------------------------------------------------------------

def test_min_batches_hand_worked():
    # One request, I = 4, O = 3: a prefill batch (first token) and two decodes: exactly 3 batches.
    one = make_problem([4], [3])
    assert min_batches(one, 4096, 100, 1) == 3 == simulate(one, "vllm").schedule.num_batches
    # Three requests, O = 5, 5, 2 (Σ O = 12), R_max = 2: at most 2 tokens generated per batch → ≥ 6 batches.
    three = make_problem([2, 2, 2], [5, 5, 2])
    assert min_batches(three, 4096, 100, 2) == 6
    # C = 4: Σ(I + O − 1) = 3·1 + 9 = 12 tokens processed at ≤ 4 per batch → ≥ 3 ... but max O = 5 wins.
    assert min_batches(three, 4, 100, 3) == 5
    # M = 6: the KV held after each token batch sums to K = (2+3+4+5+6)·2 + (2+3) = 45 over the schedule,
    # at most 6 per batch → ≥ ⌈45/6⌉ = 8 (the presets need 9–12).
    tight = make_problem([2, 2, 2], [5, 5, 2], M=6)
    assert min_batches(tight, 4096, 6, 3) == 8
    assert min(simulate(tight, name).schedule.num_batches for name in ("vllm", "sarathi", "vllm-ef")) >= 8
    # C = 1: every token is its own batch: Σ(I + O − 1) = 6 + 9 = 15.
    assert min_batches(three, 1, 100, 3) == 15


def test_min_batches_never_exceeds_a_simulated_schedule():
    rng = np.random.default_rng(3)
    for trial in range(25):
        n = int(rng.integers(1, 9))
        inputs, outputs = rng.integers(1, 80, n), rng.integers(1, 60, n)
        M = int((inputs + outputs - 1).max() * rng.uniform(1.0, 3.0))
        p = make_problem(inputs, outputs, M=M, C=int(rng.choice([8, 64, 4096])),
                         R_max=int(rng.integers(1, n + 1)) if trial % 2 else None)
        for name in PRESETS:
            try:
                schedule = simulate(p, name).schedule
            except PlannerError:  # a preset that cannot finish this instance (stuck)
                continue
            C, _, M_, R = (schedule.metrics[k] for k in ("C", "P", "M", "R_max"))
            assert min_batches(p, C, M_, R) <= schedule.num_batches, (trial, name)


def test_max_batches_stops_the_simulator_or_changes_nothing():
    p = make_problem([30, 5, 60, 2, 9], [20, 35, 3, 25, 12], C=64)
    free = simulate(p, "sarathi")
    J = free.schedule.num_batches
    exact = simulate(p, "sarathi", max_batches=J)
    for key in ("batch", "request", "tokens", "evict_batch", "evict_request", "batch_seconds", "kv_used"):
        assert np.array_equal(getattr(exact.schedule, key), getattr(free.schedule, key)), key
    assert exact.schedule.metrics == free.schedule.metrics
    with pytest.raises(WorkLimitError) as info:
        simulate(p, "sarathi", max_batches=J - 1)
    assert info.value.at_least > J - 1 and info.value.max_batches == J - 1
    with pytest.raises(WorkLimitError):  # below the lower bound: refused before simulating
        simulate(p, "sarathi", max_batches=min_batches(p, 64, p.M, p.n) - 1)


# ---- compact recording keeps every metric ------------------------------------------------------------------

@pytest.mark.parametrize("arrivals", [None, [0.0, 0.0, 0.05, 0.4, 1.5, 1.5]])
@pytest.mark.parametrize("name", ["vllm", "sarathi", "sarathi-ef", "vllm-hy"])
def test_long_decode_stretches_match_the_validator_replay(name, arrivals):
    # Long outputs: most batches come from decode stretches, now recorded as whole arrays.  Every per-batch
    # series and per-request metric must equal an independent replay of the schedule by the validator.
    p = make_problem([40, 3, 90, 7, 15, 2], [900, 1200, 5, 700, 1, 1300], arrivals=arrivals, M=2400, C=4096)
    sim = simulate(p, name).schedule
    report = validate_schedule(p, sim)
    assert report.feasible, report.summary()
    replayed = _finish_metrics(p, sim, report)
    assert np.array_equal(sim.kv_used, replayed.kv_used)
    assert np.allclose(sim.batch_seconds, replayed.batch_seconds, rtol=1e-12, atol=0)
    for key in ("ttft", "tpot", "e2e", "finish"):
        assert np.allclose(sim.per_request[key], replayed.per_request[key], rtol=1e-9, atol=1e-12, equal_nan=True), key
    assert np.array_equal(sim.per_request["evictions"], replayed.per_request["evictions"])
    for key in ("batches", "evictions", "peak_kv"):
        assert sim.metrics[key] == replayed.metrics[key], key
    assert sim.metrics["mean_kv"] == pytest.approx(replayed.metrics["mean_kv"], rel=1e-12)
    assert sim.metrics["total_latency"] == pytest.approx(report.objective, rel=1e-12)
    # batch-major entries, one per (batch, request), and every decode batch of a stretch is complete
    assert np.all(np.diff(sim.batch) >= 0)
    assert sim.batch.dtype == sim.request.dtype == sim.tokens.dtype == np.int64


def test_schedule_batches_by_slices_equals_the_entry_walk():
    def walk(J, b, r, t):
        out = [{} for _ in range(J)]
        for j, i, c in zip(b, r, t):
            out[j][i] = out[j].get(i, 0) + c
        return out

    rng = np.random.default_rng(0)
    for trial in range(400):
        J = int(rng.integers(0, 7))
        E = int(rng.integers(0, 16)) if J else 0
        b = rng.integers(0, max(J, 1), E)
        if trial % 3:
            b = np.sort(b)  # the usual batch-major layout; else entries in any order
        r, t = rng.integers(0, 4, E), rng.integers(1, 9, E)  # repeated requests in a batch happen
        got = Schedule(J, b, r, t).batches()
        want = walk(J, b.tolist(), r.tolist(), t.tolist())
        assert [list(d.items()) for d in got] == [list(d.items()) for d in want], (b, r, t)
        assert all(type(k) is int and type(v) is int for d in got for k, v in d.items())


def test_the_default_cap_admits_1024_requests_of_1024_tokens():
    # The simulator workload (1,024 × 1,024, M = 100K, the benchmark's) needs 12,239 (vLLM) to
    # 16,518 (vLLM-ef) batches: 1.25–1.7·10^7 request-batches, under the default --max-work.  The
    # eviction-free preset (the most batches) runs to the end with the CLI's batch limit.
    from planner.cli.batching import MAX_WORK

    rng = np.random.default_rng(0)
    problem = make_problem(rng.integers(1, 1025, 1024), np.full(1024, 1024), M=100_000)
    assert 1024 * min_batches(problem, problem.C, problem.M, problem.running_limit) <= MAX_WORK
    result = simulate(problem, "vllm-ef", max_batches=MAX_WORK // problem.n)
    assert result.schedule.num_batches > 10_000  # the run ended on its own, far beyond the lower bound
