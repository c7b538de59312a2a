"""Mixed fleets of `planner capacity` at every rate, and over request size classes with class-aware routing
(`planner.capacity.mix`, `planner.capacity.classes`): the split follows the MILP's routed rates, every answer
is recounted from its simulation, never costs more than the best single configuration without an
inventory, and bad class options are one line (real subprocesses)."""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from support import REPO, assert_one_line

from planner.capacity.classes import class_index, class_names, split_requests
from planner.capacity.run import run_capacity
from planner.capacity.scenario import load_scenario

#: a hang guard per subprocess, not a speed assertion
HANG_GUARD_S = 300


def test_class_index_follows_the_bucket_edges():
    # input edges [100, 1000] → buckets ≤100, (100, 1000], >1000; output edge [50] → ≤50, >50
    inputs = np.array([1, 100, 101, 1000, 1001, 5000])
    outputs = np.array([50, 51, 1, 50, 51, 7])
    assert class_index(inputs, outputs, [100, 1000], [50]).tolist() == [0, 1, 2, 2, 5, 4]
    names = class_names([100, 1000], [50])
    assert names[0] == "I ≤ 100, O ≤ 50" and names[3] == "100 < I ≤ 1000, O > 50" and names[5] == "I > 1000, O > 50"
    assert class_names([], [50]) == ["any I, O ≤ 50", "any I, O > 50"]


def test_split_follows_the_routed_rates_in_every_prefix():
    rng = np.random.default_rng(2)
    classes = rng.integers(0, 3, 2000)
    shares = {0: [(0, 1.5)], 1: [(0, 0.3), (1, 0.9), (2, 0.6)], 2: [(2, 2.0), (1, 0.5)]}
    conf = split_requests(classes, shares)
    for k, pairs in shares.items():
        mine = conf[classes == k]
        allowed = {c for c, _ in pairs}
        assert set(mine.tolist()) <= allowed  # a class only goes where the plan routes it
        total = sum(w for _, w in pairs)
        for c, w in pairs:
            # after m requests of the class, configuration c has m·w/total of them, within one request
            got = np.cumsum(mine == c)
            want = np.arange(1, mine.size + 1) * w / total
            assert np.abs(got - want).max() < 1.0 + 1e-9, (k, c)
    with pytest.raises(Exception, match="class 1 has requests but no routed rate"):
        split_requests(np.array([0, 1]), {0: [(0, 1.0)]})


def test_bracket_search_finds_the_fewest_from_any_guess():
    from planner.capacity.classes import bracket_search
    from planner.errors import PlannerError

    for truth in (1, 2, 7, 40, 41, 100):
        for low in {1, max(1, truth // 2), truth}:
            for guess in (1, truth - 1, truth, truth + 1, 3 * truth, 500):
                got, tried = bracket_search(lambda n: n >= truth, low, guess, 200)
                assert got == truth, (truth, low, guess)
                assert tried[truth] and all(v == (n >= truth) for n, v in tried.items())
                assert min(tried) >= low  # nothing below the certified bound is simulated
    with pytest.raises(PlannerError, match="50 workers do not meet"):
        bracket_search(lambda n: n >= 60, 1, 10, 50)


SCENARIO = """\
name: mixed-classes
model: Llama-2-70B
slos: {{ttft_s: 1.6, tpot_s: 0.075}}
workload: {{distribution: sharegpt}}
rates: [3, 6]
gpus:
  - {{type: A100-80GB-SXM, price_per_hour: 1.8, tensor_parallel: [4]}}
  - {{type: H100-80GB-SXM, price_per_hour: 3.0, tensor_parallel: [4]{available}}}
simulation: {{duration_s: 200, snapshot: false}}
solve: {{seed: 5}}
classes: {{input: [1024]}}
"""


@pytest.mark.parametrize("available", [None, 4])
def test_mixed_answers_at_every_rate_are_checked_by_simulation(tmp_path, available):
    path = tmp_path / "mixed.yaml"
    path.write_text(SCENARIO.format(available="" if available is None else f", available: {available}"))
    result = run_capacity(load_scenario(path), tmp_path / "out", executor="serial", progress=False)
    pts = result.points
    assert [m.rate for m in result.mixed_by_rate] == [3.0, 6.0] == [m.rate for m in result.classes_by_rate]
    assert result.mixed is result.mixed_by_rate[-1]
    prices = {"A100-80GB-SXM": 1.8, "H100-80GB-SXM": 3.0}
    for m in result.mixed_by_rate:  # μ_c = rate / the configuration's own simulated answer
        for row in pts[pts.rate == m.rate].itertuples():
            assert m.capacities[f"{row.gpu} TP{row.tensor_parallel}"] == pytest.approx(m.rate / row.workers)
    for m in [*result.mixed_by_rate, *result.classes_by_rate]:
        at = pts[pts.rate == m.rate]
        # the criterion recounted from the per-request times of the fleet's own simulation
        assert m.met and m.check["feasible"] and m.check["objective"] == sum(m.counts.values()), m
        assert m.usd_per_hour == pytest.approx(sum(prices[g] * n for g, n in m.gpus.items()))
        tp = 4  # every configuration here is TP 4
        assert m.plan_usd_per_hour == pytest.approx(sum(prices[c.split()[0]] * tp * n for c, n in m.plan_counts.items()))
        if m.source.startswith("MILP"):  # repairs only add workers to the plan
            assert all(m.counts[c] >= n for c, n in m.plan_counts.items())
            assert sum(m.counts.values()) - sum(m.plan_counts.values()) == m.repairs
        if available is None:
            assert m.usd_per_hour <= at.usd_per_hour.min() + 1e-9
        else:
            assert m.gpus.get("H100-80GB-SXM", 0) <= available
    for m in result.classes_by_rate:
        assert m.kind.endswith("size classes") and m.one_class_usd_per_hour is not None
        assert sum(m.classes.values()) == pytest.approx(m.rate)
        for name, split in m.routing.items():
            assert sum(split.values()) == pytest.approx(1.0)
            if m.source.startswith("MILP"):  # the routed fleet: every configuration a class goes to has workers
                assert all(m.counts[c] > 0 for c, share in split.items() if share > 0)
            # a class is only routed where it has a measured capacity
            assert set(split) <= set(m.class_capacities[name])
    if available is not None:
        top = result.classes_by_rate[-1]
        h100 = pts[(pts.gpu == "H100-80GB-SXM") & (pts.rate == 6)].iloc[0]
        assert h100.gpus > available  # H100 alone does not fit: the size-class fleet is a real, routed mix
        assert top.source.startswith("MILP") and top.gpus["A100-80GB-SXM"] > 0


#: (arguments, needles of the one stderr line)
BAD = {
    "axis": (["--bucket", "size=512"], "--bucket: expected input=EDGES or output=EDGES"),
    "not a number": (["--bucket", "input=512,lots"], "--bucket: 'input=512,lots': edge 'lots' is not a whole number"),
    "decreasing": (["--bucket", "input=2048,512"], "--bucket", "edges must be strictly increasing"),
    "twice": (["--bucket", "output=64", "--bucket", "output=128"], "--bucket: output buckets are given twice"),
    "too many": (["--bucket", "input=1,2,3,4,5,6,7,8", "--bucket", "output=1,2"], "--bucket: 27 size classes; at most 16"),
}
QUERY = ["--model", "Llama-2-70B", "--gpu", "H100-80GB-SXM", "--ttft", "1", "--tpot", "0.05",
         "--price", "H100-80GB-SXM=3", "--rate", "1", "--no-progress"]


@pytest.mark.parametrize("case", list(BAD))
def test_bad_bucket_flags_are_one_line(monkeypatch, capsys, case):
    from support import run_cli

    code, stdout, err = run_cli(monkeypatch, capsys, "capacity", *QUERY, *BAD[case][0])
    assert stdout == ""
    assert_one_line(code, err, *BAD[case][1:])


def test_bad_class_options_are_one_line_in_a_real_process(tmp_path):
    yaml_bad = tmp_path / "bad.yaml"
    yaml_bad.write_text("model: Llama-2-70B\nslos: {ttft_s: 1, tpot_s: 0.05}\nrates: [1]\n"
                        "gpus:\n  - {type: H100-80GB-SXM, price_per_hour: 3, tensor_parallel: [2]}\n"
                        "classes: {input: [0]}\n")
    yaml_empty = tmp_path / "empty.yaml"
    yaml_empty.write_text(yaml_bad.read_text().replace("classes: {input: [0]}", "classes: {}"))
    cases = {**{k: ([*QUERY, *BAD[k][0]], BAD[k][1:]) for k in ("axis", "decreasing")},
             "yaml edge": ([str(yaml_bad), "--no-progress"], (f"{yaml_bad}: classes.input", "positive whole number")),
             "yaml empty": ([str(yaml_empty), "--no-progress"], (f"{yaml_empty}: classes: give input and/or output",))}

    def run(args):
        return subprocess.run([sys.executable, "-m", "planner", "capacity", *args], capture_output=True, text=True,
                              cwd=REPO, timeout=HANG_GUARD_S)

    with ThreadPoolExecutor(max_workers=2) as pool:
        procs = dict(zip(cases, pool.map(run, [a for a, _ in cases.values()])))
    for name, proc in procs.items():
        assert proc.stdout == "", name
        assert_one_line(proc.returncode, proc.stderr, *cases[name][1])


def test_the_one_class_mix_is_routed_as_the_milp_splits_the_load():
    # two configurations answering 6 req/s with 3 and 6 workers: μ = 2 and 1 req/s per worker; a mix of
    # 2 + 2 workers carries 4 + 2 req/s, so two requests in three go to the first configuration
    from types import SimpleNamespace

    import pandas as pd

    from planner.capacity.mix import capacity_routing

    setting = SimpleNamespace(rate=6.0, rows=pd.DataFrame({"workers": [3, 6]}), requests=SimpleNamespace(n=300),
                              params=[{}])
    groups, _ = capacity_routing(setting)
    conf, workers = groups(np.array([2, 2]))
    assert list(workers) == [0, 0, 1, 1]
    for end in range(1, 301):  # smooth: every prefix within one request of the 2 : 1 split
        assert abs((conf[:end] == 0).sum() - end * 2 / 3) < 1.0
    conf, workers = groups(np.array([0, 5]))  # a configuration without workers gets no request
    assert set(conf) == {1} and list(workers) == [1] * 5
