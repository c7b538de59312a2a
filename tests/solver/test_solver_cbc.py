"""CBC (the binary PuLP bundles) as the third backend: hand-solved models, the MPS hand-over checked against
HiGHS on every kind of row and column, time limits, infeasibility, options, Ctrl-C, every family's exact
method (HiGHS = CBC, = Gurobi where licensed) and the CLI as a real process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from support import REPO
from support.models import interrupt_script
from support.models import market_split as _market_split

from planner.core import interrupt
from planner.solver import (
    FEATURES,
    SOLVERS,
    ModelBuilder,
    SolveOptions,
    SolveStatus,
    diagnose_infeasibility,
    solve,
)
from planner.solver import cbc_backend
from planner.solver.cbc_backend import cbc_available

pytestmark = pytest.mark.skipif(not cbc_available()[0], reason=cbc_available()[1])

#: Seconds from a Ctrl-C to the end of the process that the tests accept (a hang guard, not a speed test).
GUARD_S = 3.0


def _close(a: float, b: float, rel: float = 1e-6) -> bool:
    return abs(a - b) <= rel * max(1.0, abs(a), abs(b))


# ---- hand-solved models --------------------------------------------------------------------------------


def _lp(sense: str):
    # max 3x + 2y  s.t.  x + y ≤ 4,  x + 3y ≤ 6,  x ≤ 3,  x, y ≥ 0:  vertex (3, 1), value 11 (+ offset 1.5)
    b = ModelBuilder("lp", sense)
    sign = 1.0 if sense == "max" else -1.0
    b.add_variables("v", 2, cost=[3.0 * sign, 2.0 * sign])
    b.add_constraints("pair", 2, [0, 0, 1, 1], [0, 1, 0, 1], [1, 1, 1, 3], upper=[4, 6])
    b.add_constraints("cap", 1, [0], [0], [1], upper=3)
    b.offset = 1.5
    return b.build()


@pytest.mark.parametrize("sense", ["max", "min"])
def test_hand_solved_lp(sense):
    out = solve(_lp(sense), "cbc")
    expected = 11.0 + 1.5 if sense == "max" else -11.0 + 1.5
    assert out.status == SolveStatus.OPTIMAL and out.solver == "cbc"
    assert out.objective == pytest.approx(expected, abs=1e-9)
    assert out.bound == pytest.approx(expected, abs=1e-9)
    np.testing.assert_allclose(out.x, [3.0, 1.0], atol=1e-9)


@pytest.mark.parametrize("sense", ["max", "min"])
def test_hand_solved_mip_whose_relaxation_is_fractional(sense):
    # max 8x + 5y  s.t.  x + y ≤ 6,  9x + 5y ≤ 45,  x, y ∈ ℤ≥0.  LP optimum (3.75, 2.25) = 41.25.  By y:
    # y = 0 → x ≤ 5: 40;  y = 1 → x ≤ 4: 37;  y = 2 → x ≤ 3: 34;  y = 3 → x ≤ 3: 39;  y = 4 → x ≤ 2: 36;
    # y = 5 → x ≤ 1: 33;  y = 6 → x = 0: 30.  The integer optimum is (5, 0) = 40.  Offset −2.
    b = ModelBuilder("mip", sense)
    sign = 1.0 if sense == "max" else -1.0
    b.add_variables("v", 2, integer=True, cost=[8.0 * sign, 5.0 * sign])
    b.add_constraints("c", 2, [0, 0, 1, 1], [0, 1, 0, 1], [1, 1, 9, 5], upper=[6, 45])
    b.offset = -2.0
    out = solve(b.build(), "cbc")
    assert out.status == SolveStatus.OPTIMAL
    assert out.objective == pytest.approx(sign * 40.0 - 2.0, abs=1e-9)
    assert out.bound == pytest.approx(out.objective, abs=1e-9)
    np.testing.assert_allclose(out.x, [5.0, 0.0], atol=1e-9)


def _random_model(seed: int):
    """A small MIP with every kind of row (=, ≤, ≥, ranged, free, empty) and column (binary, general integer
    with a negative lower bound, integer unbounded above, fixed, free, upper bound only), feasible (the rows
    hold around a random point inside the column bounds) and bounded below."""
    rng = np.random.default_rng(seed)
    b = ModelBuilder(f"random-{seed}", "min")
    blocks = [
        (b.add_binaries("binary", 4, cost=rng.integers(-5, 6, 4)), rng.integers(0, 2, 4)),
        (b.add_variables("general", 3, lower=-3, upper=7, integer=True, cost=rng.integers(-4, 5, 3)),
         rng.integers(-3, 8, 3)),
        (b.add_variables("open_int", 2, integer=True, cost=rng.integers(1, 4, 2)), rng.integers(0, 5, 2)),
        (b.add_variables("fixed", 1, lower=2.5, upper=2.5, cost=1.0), np.array([2.5])),
        (b.add_variables("free", 2, lower=-np.inf, upper=np.inf, cost=0.0), rng.uniform(-5, 5, 2)),
        (b.add_variables("upper_only", 1, lower=-np.inf, upper=-1.0, cost=-0.5), np.array([-2.0])),
        (b.add_variables("cont", 3, upper=10.0, cost=rng.uniform(-2, 2, 3)), rng.uniform(0, 10, 3)),
    ]
    cols = np.concatenate([blk.columns for blk, _ in blocks])
    point = np.concatenate([p for _, p in blocks]).astype(float)
    rows_, cols_, vals_ = [], [], []
    for r in range(8):
        rows_ += [r] * 5
        cols_ += rng.choice(cols, size=5, replace=False).tolist()
        vals_ += rng.integers(-4, 5, 5).tolist()
    act = np.zeros(9)
    np.add.at(act, rows_, np.array(vals_) * point[cols_])
    slack = rng.uniform(0.0, 3.0, 9)
    kinds = ["le", "le", "ge", "ge", "ranged", "ranged", "eq", "free", "empty"]
    lower = [act[r] - slack[r] if k in ("ge", "ranged") else act[r] if k == "eq" else -np.inf for r, k in enumerate(kinds)]
    upper = [act[r] + slack[r] if k in ("le", "ranged") else act[r] if k == "eq" else np.inf for r, k in enumerate(kinds)]
    lower[8], upper[8] = -1.0, 1.0  # the empty row: 0 within its bounds
    b.add_constraints("rows", 9, rows_, cols_, vals_, lower=lower, upper=upper)
    return b.build()


@pytest.mark.parametrize("seed", range(8))
def test_every_row_and_column_kind_reaches_cbc_as_highs_reads_it(seed):
    # the MPS hand-over: the same optimum as HiGHS on the same LinearModel, and CBC's point is feasible
    model = _random_model(seed)
    h = solve(model, "highs")
    c = solve(model, "cbc")
    assert h.status == SolveStatus.OPTIMAL and c.status == SolveStatus.OPTIMAL, (c.message, h.message)
    assert _close(c.objective, h.objective, 1e-7)
    assert model.max_violation(c.x) <= 1e-7
    assert _close(float(model.cost @ c.x) + model.offset, c.objective, 1e-12)
    assert np.all(np.abs(c.x[model.integrality] - np.round(c.x[model.integrality])) <= 1e-7)


def test_infeasible_models():
    b = ModelBuilder("parity", "min")  # 2a + 2b = 3 has no integer solution; its relaxation is feasible
    b.add_variables("v", 2, upper=10, integer=True, cost=1.0)
    b.add_constraints("parity", 1, [0, 0], [0, 1], [2, 2], lower=3, upper=3)
    assert solve(b.build(), "cbc").status == SolveStatus.INFEASIBLE
    b = ModelBuilder("lp", "min")  # a + b ≥ 3 and a + b ≤ 1
    b.add_variables("v", 2, cost=1.0)
    b.add_constraints("low", 1, [0, 0], [0, 1], [1, 1], lower=3)
    b.add_constraints("high", 1, [0, 0], [0, 1], [1, 1], upper=1)
    out = solve(b.build(), "cbc")
    assert out.status == SolveStatus.INFEASIBLE and out.x is None and out.objective is None
    b = ModelBuilder("crossed", "min")  # a column whose lower bound exceeds its upper bound
    b.add_variables("v", 1, lower=2.0, upper=1.0)
    assert solve(b.build(), "cbc").status == SolveStatus.INFEASIBLE


def test_unbounded_lp():
    b = ModelBuilder("unbounded", "max")
    b.add_variables("v", 2, cost=1.0)
    b.add_constraints("c", 1, [0, 0], [0, 1], [1, -1], upper=2)
    assert solve(b.build(), "cbc").status == SolveStatus.UNBOUNDED


def test_infeasibility_diagnosis_falls_back_to_highs_lp_iis():
    b = ModelBuilder("diag", "min")
    b.add_variables("v", 2, cost=1.0)
    b.add_constraints("low", 1, [0, 0], [0, 1], [1, 1], lower=3)
    b.add_constraints("high", 1, [0, 0], [0, 1], [1, 1], upper=1)
    b.add_constraints("harmless", 1, [0], [0], [1], upper=100)
    diagnosis = diagnose_infeasibility(b.build(), "cbc", time_limit_per_test=10)
    assert set(diagnosis.families) == {"low", "high"}
    assert "HiGHS IIS of the LP relaxation" in diagnosis.method and set(diagnosis.rows) == {"low[0]", "high[0]"}


# ---- time limits, determinism, options -----------------------------------------------------------------


def test_time_limit_returns_the_incumbent_and_a_bound_below_it():
    model = _market_split()
    out = solve(model, "cbc", SolveOptions(time_limit=1.5))
    assert out.status in (SolveStatus.FEASIBLE, SolveStatus.NO_SOLUTION), out.message  # a very busy machine: none yet
    assert "time limit" in out.message  # the words callers look for (e.g. the families' wall-clock guards)
    assert out.bound is not None
    if out.status == SolveStatus.FEASIBLE:
        assert out.bound <= out.objective + 1e-9
        assert model.max_violation(out.x) <= 1e-7
        assert _close(float(model.cost @ out.x), out.objective, 1e-12)
        assert out.gap is not None and 0.0 < out.gap <= 1.0


def test_node_limit_returns_the_incumbent_and_a_bound_below_it():
    model = _market_split()
    out = solve(model, "cbc", SolveOptions(node_limit=150))  # repeatable, unlike a time limit
    assert out.status == SolveStatus.FEASIBLE and "node limit" in out.message
    assert out.bound is not None and out.bound <= out.objective + 1e-9
    assert model.max_violation(out.x) <= 1e-7


def test_no_incumbent_within_the_limit_is_no_solution():
    # m = 5 market split as a pure feasibility problem, heuristics off, 30 nodes: no point found
    model = _market_split(m=5, n=40, slack=False)
    out = solve(model, "cbc", SolveOptions(time_limit=5.0, node_limit=30, heuristic_effort=0.0))
    assert out.status == SolveStatus.NO_SOLUTION and out.x is None and out.objective is None
    assert out.bound is None or out.bound <= 1e-9


def test_same_model_same_answer_single_and_multi_threaded():
    model = _market_split(n=24)
    for threads in (None, 2):
        runs = [solve(model, "cbc", SolveOptions(node_limit=150, threads=threads, seed=4)) for _ in range(2)]
        assert runs[0].status == runs[1].status and runs[0].objective == runs[1].objective
        assert np.array_equal(runs[0].x, runs[1].x)


def test_options_reach_cbc_s_command_line():
    model = _market_split()
    args, notes = cbc_backend._args(model, SolveOptions(time_limit=7, threads=3, seed=5, mip_rel_gap=1e-4,
                                                        node_limit=9, presolve=False, heuristic_effort=0.5),
                                    "m.mps", "start.txt")
    text = " ".join(args)
    for expected in ("-sec 7.0", "-timeMode elapsed", "-threads 103", "-ratioGap 0.0001", "-allowableGap 0.999999",
                     "-randomSeed 5", "-randomCbcSeed 5", "-maxNodes 9", "-presolve off", "-preprocess off",
                     "-mipstart start.txt"):
        assert expected in text, expected
    assert args.index("-mipstart") < args.index("-solve")
    assert notes == ["CBC has no heuristic-effort share: its default heuristics run"]
    args, _ = cbc_backend._args(model, SolveOptions(seed=0, heuristic_effort=0.0), "m.mps", None)
    assert "-randomSeed" not in args and "-heuristicsOnOff" in args  # seed 0 keeps CBC's fixed default seeds


def test_warm_start_is_read_and_reported():
    model = _market_split()
    start = np.zeros(model.num_cols)  # all x = 0: feasible with slack b on every row
    out = solve(model, "cbc", SolveOptions(node_limit=50, warm_start=start))
    assert out.warm_start_accepted is True
    start_value = float(np.sum(model.row_lower))  # at x = 0 each row's slack is its right-hand side
    assert out.objective <= start_value + 1e-9
    impossible = _market_split(slack=False)  # no slack: an arbitrary start violates the rows
    out = solve(impossible, "cbc", SolveOptions(node_limit=5, warm_start=np.ones(impossible.num_cols)))
    assert out.warm_start_accepted is False


def test_progress_and_verbose_log(capfd):
    model = _market_split()
    events = []
    out = solve(model, "cbc", SolveOptions(node_limit=150, progress=events.append, verbose=True))
    assert events and all(e.incumbent is None or e.incumbent >= out.objective - 1e-9 for e in events)
    incumbents = [e.incumbent for e in events if e.incumbent is not None]
    assert incumbents == sorted(incumbents, reverse=True)  # a minimisation: each new incumbent is better
    captured = capfd.readouterr()
    assert captured.out == "" and "CBC" in captured.err  # the solver log goes to stderr only


def test_a_missing_executable_is_one_clear_error(monkeypatch):
    monkeypatch.setattr(cbc_backend, "cbc_path", lambda: None)
    out = solve(_lp("max"), "cbc")
    assert out.status == SolveStatus.ERROR and "pip install pulp" in out.message and "\n" not in out.message


def test_capabilities_are_declared():
    assert "cbc" in SOLVERS and FEATURES["cbc"].mip and FEATURES["cbc"].dual_bound
    assert not FEATURES["cbc"].iis_lp  # diagnosis uses HiGHS's IIS of the LP relaxation instead


# ---- Ctrl-C ---------------------------------------------------------------------------------------------


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            pass
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs /proc to find the CBC process")
def test_ctrl_c_stops_cbc_at_once_leaving_no_process_and_no_file(tmp_path):
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    script = tmp_path / "cbc_interrupt.py"
    script.write_text(interrupt_script("cbc"))
    env = {**os.environ, "PYTHONPATH": str(REPO), "TMPDIR": str(scratch)}
    proc = subprocess.Popen([sys.executable, str(script)], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 60
    cbc = []
    while not cbc and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
        cbc = _children(proc.pid)
    assert cbc, f"CBC never started: {proc.communicate()}"
    time.sleep(0.5)
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
    seconds = time.monotonic() - sent
    assert proc.returncode == 130 and err.strip() == "interrupted", err
    assert seconds < GUARD_S, f"{seconds:.2f} s from SIGINT to exit"
    assert not any(_alive(pid) for pid in cbc)  # no orphan CBC
    assert list(scratch.iterdir()) == []  # the model and solution files are gone


def test_the_process_wide_request_stops_cbc_in_process(monkeypatch, tmp_path):
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    timer = threading.Timer(1.0, interrupt._REQUESTED.set)
    timer.start()
    started = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            solve(_market_split(), "cbc", SolveOptions(time_limit=60))
    finally:
        timer.cancel()
        interrupt._REQUESTED.clear()
    assert time.monotonic() - started < 1.0 + GUARD_S
    assert not any(_alive(pid) for pid in _children(os.getpid()))
    assert list(tmp_path.iterdir()) == []


# ---- every family: HiGHS = CBC (= Gurobi where licensed) ------------------------------------------------

ROUTING_TINY = """\
family: routing
name: routing-tiny
model: Llama-3-8B
theta: 2.0
instances:
  - {name: v100-t4, gpu: V100-32GB-SXM2, tensor_parallel: 4, count: 1}
  - {name: v100-t1, gpu: V100-32GB-SXM2, tensor_parallel: 1, count: 4}
requests: {workload: sharegpt, count: 8, seed: 2}
"""


def _harness_case(family: str, instance: Path):
    from planner.harness import RunOptions, available_families

    harness = available_families()[family]
    problem = harness.load(instance)

    def run(solver: str):
        return harness.run(problem, harness.exact_method, RunOptions(solver=solver, time_limit=60))
    return run


def _batching_case(formulation: str):
    from planner.batching.problem import make_problem
    from planner.batching.pipeline import solve_batching

    problem = make_problem([2, 1, 3], [2, 3, 1], M=6)

    def run(solver: str):  # stop_at_bound=False: the MIP runs even when a heuristic meets the lower bound
        return solve_batching(problem, solver=solver, time_limit=60, formulation=formulation, stop_at_bound=False)
    return run


def _priority_case():
    from planner.priority.instance import load_priority_instance
    from planner.priority.pipeline import run_exact

    problem = load_priority_instance(REPO / "instances/priority/fig4_toy.yaml")

    def run(solver: str):
        return run_exact(problem, time_limit=60, exact_method="milp", solver=solver)
    return run


FAMILY_CASES = {
    "placement": lambda tmp: _harness_case("placement", REPO / "instances/placement/sharegpt-70b-a100-n40.yaml"),
    "batching-paths": lambda tmp: _batching_case("paths"),
    "batching-bigm": lambda tmp: _batching_case("bigm"),
    "priority": lambda tmp: _priority_case(),
    "queueing": lambda tmp: _harness_case("queueing", REPO / "instances/queueing/two-models-one-a100.yaml"),
    "deployment": lambda tmp: _harness_case("deployment", REPO / "instances/deployment/cost-two-models.yaml"),
    "routing": lambda tmp: _harness_case("routing", _write(tmp / "routing.yaml", ROUTING_TINY)),
}


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def _plan(result) -> str:
    return json.dumps(result.solution.to_dict() if result.solution is not None else None, sort_keys=True, default=str)


def _ran_on(result, solver: str) -> bool:
    return solver in (result.solver or "").lower()


@pytest.mark.parametrize("case", list(FAMILY_CASES))
def test_every_family_has_the_same_optimum_with_cbc(case, tmp_path, solvers):
    run = FAMILY_CASES[case](tmp_path)
    reference = run("highs")
    result = run("cbc")
    assert reference.status == SolveStatus.OPTIMAL and result.status == SolveStatus.OPTIMAL, result.message
    assert _ran_on(result, "cbc"), result.solver  # the exact method's solver really was CBC
    assert _close(result.objective, reference.objective, 1e-6)
    assert result.validation is not None and result.validation.feasible
    assert _close(result.validation.objective, result.objective, 1e-9)
    again = run("cbc")  # deterministic: the same plan again
    assert again.objective == result.objective and _plan(again) == _plan(result)
    if "gurobi" in solvers:
        other = run("gurobi")
        if other.status == SolveStatus.OPTIMAL:  # the pip license refuses models above 2000 rows/columns
            assert _close(other.objective, result.objective, 1e-6)


CAPACITY = """\
family: capacity
name: cbc-check
model: Llama-2-70B
slos: {ttft_s: 1.6, atgt_s: 0.075}
workload: {distribution: sharegpt}
rates: [2]
gpus:
  - {type: A100-80GB-SXM, price_per_hour: 1.8, tensor_parallel: [2]}
solve: {time_limit_s: 5, exact_max_requests: 200, seed: 0, solver: SOLVER}
"""


def test_capacity_scenarios_name_their_solver(tmp_path):
    from planner.capacity.run import build_points, configurations
    from planner.capacity.scenario import load_scenario
    from planner.errors import InputError

    scenario = load_scenario(_write(tmp_path / "cbc.yaml", CAPACITY.replace("SOLVER", "cbc")))
    assert scenario.solver == "cbc"
    configs, _, _ = configurations(scenario)
    assert {p.params["solver"] for p in build_points(scenario, configs)} == {"cbc"}  # what each point's MIP uses
    with pytest.raises(InputError, match="solve.solver"):
        load_scenario(_write(tmp_path / "bad.yaml", CAPACITY.replace("SOLVER", "cplex")))


# ---- the CLI as a user runs it --------------------------------------------------------------------------


def test_cli_solve_placement_with_cbc_prints_one_json_object():
    instance = "instances/placement/sharegpt-70b-a100-n40.yaml"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    runs = {}
    for solver in ("cbc", "highs"):
        proc = subprocess.run([sys.executable, "-m", "planner", "solve", "placement", instance, "--solver", solver,
                               "--json"], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        runs[solver] = json.loads(proc.stdout)  # the whole of stdout is one JSON object
    assert runs["cbc"]["solver"] == "cbc" and runs["cbc"]["status"] == "optimal"
    assert runs["cbc"]["objective"] == pytest.approx(runs["highs"]["objective"], rel=1e-6)
