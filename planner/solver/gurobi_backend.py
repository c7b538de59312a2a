"""Gurobi backend (gurobipy matrix API): the same `LinearModel`, handed over as one CSR matrix.

The pip wheel carries a size-limited license (≤ 2000 variables and ≤ 2000
constraints, error 10010 at optimize); a user's own license lifts it.  Every
license problem becomes an ``ERROR`` outcome with one clear message.

Ctrl-C: Gurobi stops at once by itself (status INTERRUPTED), and its callback also terminates the
solve on the CLI's Ctrl-C request (`planner.core.interrupt`); an interrupted solve raises
KeyboardInterrupt instead of returning its incumbent, so no result of it is written.
"""

from __future__ import annotations

import contextlib
import time

import numpy as np
import scipy.sparse as sp

from planner.core import interrupt
from planner.core.stdio import native_stdout_discarded, stdout_reserved
from planner.solver.model import LinearModel
from planner.solver.outcome import ProgressEvent, SolveOptions, SolverOutcome, SolveStatus

SIZE_LIMIT_ERROR = 10010
NO_LICENSE_ERROR = 10009
PIP_LICENSE_LIMIT = 2000


def gurobi_available() -> tuple[bool, str]:
    """Whether gurobipy imports and can start an environment (license found)."""
    try:
        import gurobipy as gp
    except ImportError:
        return False, "gurobipy is not installed (pip install gurobipy)"
    try:
        env = gp.Env(empty=True)
        env.setParam("OutputFlag", 0)
        env.start()
        env.dispose()
    except gp.GurobiError as exc:  # pragma: no cover - depends on the machine's license
        return False, f"Gurobi license problem: {exc}"
    return True, ""


def _license_message(exc, model: LinearModel, split_rows: int) -> str:
    if getattr(exc, "errno", None) == SIZE_LIMIT_ERROR:
        return (
            f"Gurobi's size-limited license cannot solve this model ({model.num_cols} variables, "
            f"{split_rows} constraints; the free pip license allows {PIP_LICENSE_LIMIT} of each). "
            "Use --solver highs, or install a full Gurobi license."
        )
    if getattr(exc, "errno", None) == NO_LICENSE_ERROR:
        return f"Gurobi found no valid license ({exc}). Use --solver highs, or install a Gurobi license."
    return f"Gurobi error {getattr(exc, 'errno', '?')}: {exc}"


def _split_rows(model: LinearModel) -> tuple[sp.csr_matrix, np.ndarray, np.ndarray, np.ndarray]:
    """Turn ranged rows ``l ≤ a x ≤ u`` into Gurobi rows (sense, rhs) and a map to our row ids."""
    lo, up = model.row_lower, model.row_upper
    fin_lo, fin_up = np.isfinite(lo), np.isfinite(up)
    eq = fin_lo & fin_up & (lo == up)
    le = fin_up & ~eq
    ge = fin_lo & ~eq
    idx_eq, idx_le, idx_ge = np.flatnonzero(eq), np.flatnonzero(le), np.flatnonzero(ge)
    order = np.concatenate([idx_eq, idx_le, idx_ge])
    sense = np.concatenate([np.full(idx_eq.size, "="), np.full(idx_le.size, "<"), np.full(idx_ge.size, ">")])
    rhs = np.concatenate([lo[idx_eq], up[idx_le], lo[idx_ge]])
    return model.matrix[order], sense, rhs, order


def solve_gurobi(model: LinearModel, options: SolveOptions) -> SolverOutcome:
    try:
        import gurobipy as gp
        from gurobipy import GRB
    except ImportError:
        return SolverOutcome(
            SolveStatus.ERROR, "gurobi", None, None, None, 0.0, "gurobipy is not installed (pip install gurobipy)"
        )
    A, sense, rhs, _ = _split_rows(model)
    start = time.perf_counter()
    try:
        env = gp.Env(empty=True)
        env.setParam("OutputFlag", 1 if options.verbose else 0)
        env.start()
        m = gp.Model(model.name, env=env)
        vtype = np.where(model.integrality, GRB.INTEGER, GRB.CONTINUOUS)
        lb = np.where(np.isfinite(model.col_lower), model.col_lower, -GRB.INFINITY)
        ub = np.where(np.isfinite(model.col_upper), model.col_upper, GRB.INFINITY)
        x = m.addMVar(model.num_cols, lb=lb, ub=ub, obj=model.cost, vtype=vtype)
        if A.shape[0]:
            m.addMConstr(A, x, sense, rhs)
        m.ModelSense = GRB.MAXIMIZE if model.sense == "max" else GRB.MINIMIZE
        m.ObjCon = model.offset
        m.Params.Seed = int(options.seed)
        m.Params.FeasibilityTol = 1e-8
        m.Params.IntFeasTol = 1e-8
        m.Params.MIPGap = float(options.mip_rel_gap)
        abs_gap = options.mip_abs_gap
        if abs_gap is None and model.objective_is_integral:
            abs_gap = 1.0 - 1e-6
        if abs_gap is not None:
            m.Params.MIPGapAbs = float(abs_gap)
        if options.time_limit is not None:
            m.Params.TimeLimit = float(max(options.time_limit, 0.0))
        if options.threads is not None:
            m.Params.Threads = int(options.threads)
        if options.node_limit is not None:
            m.Params.NodeLimit = float(options.node_limit)
        if options.presolve is not None:
            m.Params.Presolve = -1 if options.presolve else 0
        if options.heuristic_effort is not None:
            m.Params.Heuristics = float(options.heuristic_effort)
        if options.warm_start is not None and model.integrality.any():
            x.Start = np.asarray(options.warm_start, float)
        report = options.progress is not None and model.integrality.any()
        last = [-1.0]

        def callback(cb_model, where):  # noqa: ANN001
            if interrupt.requested():  # the CLI's Ctrl-C request (Gurobi stops at once, status INTERRUPTED)
                cb_model.terminate()
                return
            if report:
                if where != GRB.Callback.MIP:
                    return
                now = cb_model.cbGet(GRB.Callback.RUNTIME)
                if now - last[0] < 0.25:
                    return
                last[0] = now
                inc = cb_model.cbGet(GRB.Callback.MIP_OBJBST)
                bnd = cb_model.cbGet(GRB.Callback.MIP_OBJBND)
                options.progress(
                    ProgressEvent(now, inc if abs(inc) < GRB.INFINITY else None, bnd if abs(bnd) < GRB.INFINITY else None)
                )

        # Under the CLI (descriptor 1 already points at stderr) Gurobi's own Ctrl-C notice, "Interrupt
        # request received", would be an extra line before "interrupted": dropped unless --verbose.
        quiet = stdout_reserved() and not options.verbose
        with native_stdout_discarded() if quiet else contextlib.nullcontext():
            m.optimize(callback)
        if m.Status == GRB.INTERRUPTED:  # Ctrl-C (Gurobi's own SIGINT handling, or the callback above)
            m.dispose()
            env.dispose()
            raise KeyboardInterrupt
    except gp.GurobiError as exc:
        return SolverOutcome(
            SolveStatus.ERROR, "gurobi", None, None, None, time.perf_counter() - start, _license_message(exc, model, int(A.shape[0]))
        )
    seconds = time.perf_counter() - start
    outcome = _outcome(m, model, seconds, GRB)
    m.dispose()
    env.dispose()
    return outcome


def _outcome(m, model: LinearModel, seconds: float, GRB) -> SolverOutcome:
    st = m.Status
    has = m.SolCount > 0
    x = np.array(m.getAttr("X", m.getVars()), dtype=float) if has else None
    objective = float(m.ObjVal) if has else None
    is_mip = bool(model.integrality.any())
    bound = None
    try:
        bound = float(m.ObjBound) if is_mip else (objective if st == GRB.OPTIMAL else None)
    except Exception:  # noqa: BLE001 - ObjBound is unavailable when no bound was computed
        bound = None
    if bound is not None and not np.isfinite(bound):
        bound = None
    notes: list[str] = []
    if st == GRB.OPTIMAL:
        status = SolveStatus.OPTIMAL
    elif st in (GRB.INFEASIBLE, GRB.INF_OR_UNBD):
        status, x, objective = SolveStatus.INFEASIBLE, None, None
        if st == GRB.INF_OR_UNBD:
            notes.append("Gurobi reports 'infeasible or unbounded'")
    elif st == GRB.UNBOUNDED:
        status = SolveStatus.UNBOUNDED
    elif st in (GRB.TIME_LIMIT, GRB.INTERRUPTED, GRB.NODE_LIMIT, GRB.SOLUTION_LIMIT, GRB.ITERATION_LIMIT):
        status = SolveStatus.FEASIBLE if has else SolveStatus.NO_SOLUTION
        notes.append("stopped: time limit" if st == GRB.TIME_LIMIT else f"stopped (Gurobi status {st})")
    else:
        status = SolveStatus.FEASIBLE if has else SolveStatus.ERROR
        notes.append(f"Gurobi status {st}")
    node_count = int(m.NodeCount) if is_mip else None
    return SolverOutcome(status, "gurobi", objective, bound, x, seconds, "; ".join(notes), node_count)


def gurobi_iis_rows(model: LinearModel) -> list[int] | None:
    """Rows (our indices) of Gurobi's IIS of the MIP, or None if unavailable."""
    try:
        import gurobipy as gp
        from gurobipy import GRB
    except ImportError:
        return None
    A, sense, rhs, row_map = _split_rows(model)
    try:
        env = gp.Env(empty=True)
        env.setParam("OutputFlag", 0)
        env.start()
        m = gp.Model(env=env)
        vtype = np.where(model.integrality, GRB.INTEGER, GRB.CONTINUOUS)
        lb = np.where(np.isfinite(model.col_lower), model.col_lower, -GRB.INFINITY)
        ub = np.where(np.isfinite(model.col_upper), model.col_upper, GRB.INFINITY)
        x = m.addMVar(model.num_cols, lb=lb, ub=ub, vtype=vtype)
        constrs = m.addMConstr(A, x, sense, rhs) if A.shape[0] else None
        m.Params.TimeLimit = 30
        m.computeIIS()
        if constrs is None:
            return None
        flags = np.array(constrs.IISConstr, dtype=bool).ravel()
        rows = sorted({int(row_map[k]) for k in np.flatnonzero(flags)})
        m.dispose()
        env.dispose()
        return rows or None
    except gp.GurobiError:
        return None
