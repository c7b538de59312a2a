"""The solver layer on small models: both backends, time limits, warm starts, diagnosis, licenses."""

from __future__ import annotations

import numpy as np
import pytest

from planner.solver import ModelBuilder, SolveOptions, SolveStatus, diagnose_infeasibility, solve


def knapsack():
    # max 5a + 4b + 3c + 2d  s.t.  4a + 3b + 2c + d ≤ 5, binary.
    # Candidates of weight ≤ 5: {a,d}=7, {b,c}=7, {b,d}=6, {c,d}... {a}=5 → optimum 7.
    b = ModelBuilder("knapsack", "max")
    x = b.add_binaries("x", 4, cost=[5, 4, 3, 2])
    b.add_constraints("weight", 1, np.zeros(4, int), x.columns, [4, 3, 2, 1], upper=5)
    return b.build()


def test_knapsack_optimum_on_every_solver(solvers):
    assert "highs" in solvers
    for s in solvers:
        out = solve(knapsack(), s)
        assert out.status == SolveStatus.OPTIMAL
        assert out.objective == pytest.approx(7.0)
        assert out.bound == pytest.approx(7.0)
        assert out.gap == pytest.approx(0.0)
        assert knapsack().max_violation(out.x) <= 1e-9


def test_presolve_and_heuristic_effort_reach_highs_and_keep_the_optimum(solvers):
    from planner.solver.highs_backend import new_highs

    options = SolveOptions(presolve=False, heuristic_effort=0.3)
    highs = new_highs(options)
    assert highs.getOptionValue("presolve")[1] == "off"
    assert highs.getOptionValue("mip_heuristic_effort")[1] == pytest.approx(0.3)
    default = new_highs(SolveOptions())
    assert default.getOptionValue("presolve")[1] == "choose"
    for s in solvers:
        out = solve(knapsack(), s, options)
        assert out.status == SolveStatus.OPTIMAL
        assert out.objective == pytest.approx(7.0)


def test_heuristic_effort_outside_zero_one_is_rejected():
    with pytest.raises(ValueError, match="heuristic_effort"):
        SolveOptions(heuristic_effort=1.5)


def test_warm_start_is_accepted_by_highs():
    out = solve(knapsack(), "highs", SolveOptions(warm_start=np.array([0, 1, 1, 0.0])))
    assert out.warm_start_accepted is True
    assert out.objective == pytest.approx(7.0)


def test_equality_and_ranged_rows_and_offset():
    # min x + 2y + 10 s.t. 1 ≤ x + y ≤ 1 (equality), 0.5 ≤ x ≤ 3 as a ranged row, integers → x=1, y=0 → 11
    b = ModelBuilder("ranged", "min")
    v = b.add_variables("v", 2, lower=0, upper=5, integer=True, cost=[1, 2])
    b.offset = 10.0
    b.add_constraints("sum", 1, [0, 0], v.columns, [1, 1], lower=1, upper=1)
    b.add_constraints("range", 1, [0], [v.start], [1.0], lower=0.5, upper=3)
    m = b.build()
    for s in ("highs", "gurobi"):
        out = solve(m, s)
        if out.status == SolveStatus.ERROR:  # gurobi absent
            continue
        assert out.objective == pytest.approx(11.0)


def _hard_model(n=60, seed=3):
    """A multi-knapsack (a MIP that is not solved instantly) to exercise time limits."""
    rng = np.random.default_rng(seed)
    bins = 6
    w = rng.integers(20, 60, size=n)
    v = rng.integers(10, 100, size=n)
    b = ModelBuilder("multi-knapsack", "max")
    x = b.add_binaries("x", (n, bins), cost=np.repeat(v[:, None], bins, axis=1))
    rows = np.repeat(np.arange(bins), n)
    cols = np.array([x.col(i, j) for j in range(bins) for i in range(n)])
    b.add_constraints("capacity", bins, rows, cols, np.tile(w, bins), upper=np.full(bins, 211.0))
    b.add_constraints("once", n, np.repeat(np.arange(n), bins), x.columns, np.ones(n * bins), upper=1.0)
    return b.build()


def test_time_limit_returns_incumbent_and_bound():
    m = _hard_model()
    out = solve(m, "highs", SolveOptions(time_limit=0.3))
    assert out.status in (SolveStatus.FEASIBLE, SolveStatus.OPTIMAL, SolveStatus.NO_SOLUTION)
    if out.status == SolveStatus.FEASIBLE:
        assert out.objective is not None and out.bound is not None
        assert out.bound >= out.objective - 1e-6  # maximisation: bound above incumbent
        assert m.max_violation(out.x) <= 1e-6
        assert "time limit" in out.message.lower()


def test_infeasible_model_names_the_conflicting_family(solvers):
    # y0 + y1 ≥ 3 with binaries is infeasible on its own; "other" is irrelevant.
    b = ModelBuilder("inf", "min")
    y = b.add_binaries("y", 2, cost=1)
    b.add_constraints("demand", 1, [0, 0], y.columns, [1, 1], lower=3, label=lambda r: "demand[all]")
    b.add_constraints("other", 1, [0], [y.start], [1.0], upper=1)
    m = b.build()
    for s in solvers:
        assert solve(m, s).status == SolveStatus.INFEASIBLE
        diag = diagnose_infeasibility(m, s)
        assert diag.families == ("demand",)
        assert "demand[all]" in diag.summary()


def test_gurobi_size_limited_license_gives_one_clear_message(require_gurobi):
    # 2001 variables exceed the free pip license (2000); a full license solves it instead.
    b = ModelBuilder("big", "min")
    x = b.add_binaries("x", 2001, cost=1.0)
    b.add_constraints("cover", 1, np.zeros(2001, int), x.columns, np.ones(2001), lower=1)
    out = solve(b.build(), "gurobi")
    if out.status == SolveStatus.ERROR:
        assert "2000" in out.message and "--solver highs" in out.message
        assert "\n" not in out.message
    else:  # an unrestricted license
        assert out.objective == pytest.approx(1.0)


def test_model_builder_rejects_bad_indices():
    b = ModelBuilder("bad", "min")
    b.add_binaries("x", 2)
    with pytest.raises(ValueError):
        b.add_constraints("r", 1, [0], [5], [1.0], upper=1)
    with pytest.raises(ValueError):
        b.add_constraints("r", 1, [1], [0], [1.0], upper=1)


def test_without_families_drops_rows_and_keeps_labels():
    m = knapsack()
    assert m.families == ("weight",)
    assert m.without_families(["weight"]).num_rows == 0


def test_highs_threads_after_a_default_first_solve_do_not_break_later_solves(tmp_path):
    # HiGHS fixes its thread pool at the first solve of a process; asking for another count later made
    # `run` fail ("Not Set").  A fresh process: default first, then 2, then 1 threads — all optimal.
    import subprocess
    import sys

    script = tmp_path / "threads.py"
    script.write_text(
        "import numpy as np\n"
        "from planner.solver import ModelBuilder, SolveOptions, solve\n"
        "mb = ModelBuilder('t')\n"
        "mb.add_binaries('x', 3, cost=np.array([-1.0, -2.0, -3.0]))\n"
        "mb.add_constraints('cap', 1, np.zeros(3, int), np.arange(3), np.ones(3), upper=2.0)\n"
        "m = mb.build()\n"
        "for threads in (None, 2, 1):\n"
        "    o = solve(m, 'highs', SolveOptions(threads=threads))\n"
        "    print(o.status.value, o.objective)\n")
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    # best pair: items 2 and 3, objective −2 − 3 = −5, on every call
    assert run.stdout.split("\n")[:3] == ["optimal -5.0"] * 3
