"""HiGHS backend (highspy, in process, no license): the default solver.

Ctrl-C.  ``Highs.run`` is C++ that releases the GIL but never returns to Python until it is done,
so Python's SIGINT handler (which runs only in the main thread, between bytecodes) would wait for
the whole solve.  A solve started from the main thread therefore runs on one long-lived helper
thread (`_SolverThread`: always the same thread, so HiGHS's per-thread task scheduler and its
thread count behave as if the main thread ran every solve) while the main thread waits in short
interruptible sleeps.  On KeyboardInterrupt the main thread raises a flag that the subscribed
simplex / IPM / MIP interrupt callbacks turn into HiGHS's user interrupt (HiGHS polls them many
times a second), waits up to `STOP_GRACE_S` for the solver to stop, and re-raises: the caller
never receives a result, so nothing is written.  The callbacks also honour the CLI's process-wide
Ctrl-C request (`planner.core.interrupt`), and so does the return path.  Solves started from
other threads run in place.
"""

from __future__ import annotations

import atexit
import queue
import threading
import time

import numpy as np

from planner.core.stdio import native_stdout_discarded
from planner.solver.model import LinearModel
from planner.solver.outcome import ProgressEvent, SolveOptions, SolverOutcome, SolveStatus

# HiGHS sizes its global thread pool on first use, and a later `threads` value that differs from the
# pool makes `run` fail with status "Not Set".  So `threads` is set on the first instance of the process
# only (None there means HiGHS's default pool, recorded as "default"), and remembered to say so.
_THREADS_IN_EFFECT: int | str | None = None
_FEASIBILITY_TOLERANCE = 1e-8


def _to_highs_lp(model: LinearModel):
    import highspy

    lp = highspy.HighsLp()
    lp.num_col_ = model.num_cols
    lp.num_row_ = model.num_rows
    lp.col_cost_ = model.cost
    lp.col_lower_ = model.col_lower
    lp.col_upper_ = model.col_upper
    lp.row_lower_ = model.row_lower
    lp.row_upper_ = model.row_upper
    lp.offset_ = model.offset
    lp.sense_ = highspy.ObjSense.kMaximize if model.sense == "max" else highspy.ObjSense.kMinimize
    csr = model.matrix
    lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
    lp.a_matrix_.num_col_ = model.num_cols
    lp.a_matrix_.num_row_ = model.num_rows
    lp.a_matrix_.start_ = csr.indptr.astype(np.int32)
    lp.a_matrix_.index_ = csr.indices.astype(np.int32)
    lp.a_matrix_.value_ = csr.data.astype(float)
    if model.integrality.any():
        kinds = np.array([highspy.HighsVarType.kContinuous, highspy.HighsVarType.kInteger], dtype=object)
        lp.integrality_ = kinds[model.integrality.astype(np.intp)].tolist()  # ~5× faster than a per-flag loop
    return lp


def new_highs(options: SolveOptions):
    """A configured ``highspy.Highs`` (silent unless verbose)."""
    global _THREADS_IN_EFFECT
    import highspy

    with native_stdout_discarded():  # highspy ≥ 1.16 prints a banner to descriptor 1 from the constructor
        h = highspy.Highs()
    h.setOptionValue("output_flag", True)
    h.setOptionValue("log_to_console", bool(options.verbose))
    h.setOptionValue("random_seed", int(options.seed))
    h.setOptionValue("mip_feasibility_tolerance", _FEASIBILITY_TOLERANCE)
    h.setOptionValue("primal_feasibility_tolerance", _FEASIBILITY_TOLERANCE)
    if _THREADS_IN_EFFECT is None:
        if options.threads is not None:
            h.setOptionValue("threads", int(options.threads))
        _THREADS_IN_EFFECT = "default" if options.threads is None else int(options.threads)
    if options.time_limit is not None:
        h.setOptionValue("time_limit", float(max(options.time_limit, 0.0)))
    h.setOptionValue("mip_rel_gap", float(options.mip_rel_gap))
    if options.node_limit is not None:
        h.setOptionValue("mip_max_nodes", int(options.node_limit))
    if options.presolve is not None:
        h.setOptionValue("presolve", "on" if options.presolve else "off")
    if options.heuristic_effort is not None:
        h.setOptionValue("mip_heuristic_effort", float(options.heuristic_effort))
    return h


#: Seconds the main thread waits, after Ctrl-C, for HiGHS to stop before it re-raises anyway.
STOP_GRACE_S = 0.5
#: Seconds between the main thread's checks for Ctrl-C while HiGHS runs.
_POLL_S = 0.05


class _SolverThread:
    """One daemon thread that runs the HiGHS solves of the main thread, one at a time, in order."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.busy = threading.Event()  # set while a solve runs (or waits to run) on the thread

    def submit(self, fn) -> tuple[threading.Event, dict]:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._serve, name="planner-highs", daemon=True)
                self._thread.start()
                atexit.register(self.wait_idle, 2.0)
        done, box = threading.Event(), {}
        self.busy.set()
        self._jobs.put((fn, done, box))
        return done, box

    def wait_idle(self, timeout: float) -> None:
        """At interpreter exit: give an interrupted solve a moment to stop (C++ static destructors
        running under a live HiGHS solve abort the process)."""
        deadline = time.monotonic() + timeout
        while self.busy.is_set() and time.monotonic() < deadline:
            time.sleep(0.01)

    def _serve(self) -> None:
        while True:
            fn, done, box = self._jobs.get()
            try:
                box["value"] = fn()
            except BaseException as exc:  # handed to the waiting thread
                box["error"] = exc
            finally:
                if self._jobs.empty():
                    self.busy.clear()
                done.set()


_SOLVER_THREAD = _SolverThread()


def native_solve_running() -> bool:
    """Whether a HiGHS solve is still running on the helper thread (e.g. after Ctrl-C, past the grace)."""
    return _SOLVER_THREAD.busy.is_set()


def run_highs(h):
    """``h.run()``, stopped by Ctrl-C within about `STOP_GRACE_S` when called from the main thread."""
    if threading.current_thread() is not threading.main_thread():
        return h.run()
    from planner.core import interrupt

    stop = threading.Event()

    def _interrupt(event) -> None:
        if stop.is_set() or interrupt.requested():
            event.interrupt()

    for callback in (h.cbSimplexInterrupt, h.cbIpmInterrupt, h.cbMipInterrupt):
        callback.subscribe(_interrupt)
    done, box = _SOLVER_THREAD.submit(h.run)
    try:
        while not done.wait(_POLL_S):
            pass
    except KeyboardInterrupt:
        stop.set()
        done.wait(STOP_GRACE_S)
        raise
    interrupt.check()  # a Ctrl-C whose KeyboardInterrupt was lost still stops here
    if "error" in box:
        raise box["error"]
    return box.get("value")


def solve_highs(model: LinearModel, options: SolveOptions) -> SolverOutcome:
    import highspy

    notes: list[str] = []
    if options.threads is not None and _THREADS_IN_EFFECT not in (None, options.threads):
        notes.append(f"HiGHS threads stay at {_THREADS_IN_EFFECT} (set once per process)")
    h = new_highs(options)
    abs_gap = options.mip_abs_gap
    if abs_gap is None and model.objective_is_integral:
        abs_gap = 1.0 - 1e-6  # an integral objective is optimal once incumbent − bound < 1
    if abs_gap is not None:
        h.setOptionValue("mip_abs_gap", float(abs_gap))
    start = time.perf_counter()
    status = h.passModel(_to_highs_lp(model))
    if status == highspy.HighsStatus.kError:
        return SolverOutcome(SolveStatus.ERROR, "highs", None, None, None, 0.0, "HiGHS rejected the model")

    warm_ok = None
    if options.warm_start is not None and model.integrality.any():
        sol = highspy.HighsSolution()
        sol.col_value = np.asarray(options.warm_start, float).tolist()
        sol.value_valid = True
        warm_ok = h.setSolution(sol) != highspy.HighsStatus.kError

    is_mip = bool(model.integrality.any())
    if options.progress is not None and is_mip:
        last = [0.0]

        def _report(event) -> None:
            out = event.data_out
            now = time.perf_counter() - start
            if event.callback_type == highspy.cb.HighsCallbackType.kCallbackMipInterrupt and now - last[0] < 0.25:
                return
            last[0] = now
            inc = out.mip_primal_bound if np.isfinite(out.mip_primal_bound) else None
            bnd = out.mip_dual_bound if np.isfinite(out.mip_dual_bound) else None
            options.progress(ProgressEvent(now, inc, bnd))

        h.cbMipImprovingSolution.subscribe(_report)
        h.cbMipInterrupt.subscribe(_report)

    run_highs(h)
    seconds = time.perf_counter() - start
    return _outcome(h, model, seconds, warm_ok, notes)


def _outcome(h, model: LinearModel, seconds: float, warm_ok, notes: list[str]) -> SolverOutcome:
    import highspy

    ms = h.getModelStatus()
    info = h.getInfo()
    is_mip = bool(model.integrality.any())
    has_primal = info.primal_solution_status == 2  # kSolutionStatusFeasible
    x = np.array(h.getSolution().col_value, dtype=float) if has_primal else None
    objective = float(info.objective_function_value) if has_primal else None
    if is_mip:
        bound = float(info.mip_dual_bound)
        bound = bound if np.isfinite(bound) else None
    else:
        bound = objective if ms == highspy.HighsModelStatus.kOptimal else None
    node_count = int(info.mip_node_count) if is_mip else None
    S = highspy.HighsModelStatus
    if ms == S.kOptimal:
        status = SolveStatus.OPTIMAL
        if bound is None:
            bound = objective
    elif ms == S.kInfeasible:
        status, x, objective = SolveStatus.INFEASIBLE, None, None
    elif ms in (S.kUnbounded,):
        status = SolveStatus.UNBOUNDED
    elif ms == S.kUnboundedOrInfeasible:
        status, x, objective = SolveStatus.INFEASIBLE, None, None
        notes.append("HiGHS reports 'unbounded or infeasible'")
    elif ms in (S.kTimeLimit, S.kInterrupt, S.kSolutionLimit, S.kIterationLimit, S.kObjectiveBound, S.kObjectiveTarget, S.kHighsInterrupt):
        status = SolveStatus.FEASIBLE if has_primal else SolveStatus.NO_SOLUTION
        notes.append(f"stopped: {h.modelStatusToString(ms)}")
    elif ms == S.kModelEmpty:
        status, x, objective = SolveStatus.OPTIMAL, np.zeros(0), model.offset
        bound = objective
    else:
        status = SolveStatus.FEASIBLE if has_primal else SolveStatus.ERROR
        notes.append(f"HiGHS status: {h.modelStatusToString(ms)}")
    return SolverOutcome(
        status=status,
        solver="highs",
        objective=objective,
        bound=bound,
        x=x,
        seconds=seconds,
        message="; ".join(notes),
        node_count=node_count,
        warm_start_accepted=warm_ok,
    )


#: HiGHS ``iis_strategy``: 2 (elastic LP) + 4 (reduce to a true, irreducible IIS).
IIS_STRATEGY = 2 | 4
#: HiGHS ``iis_time_limit`` (seconds) for the IIS of the LP relaxation.
IIS_TIME_LIMIT_S = 30.0


def lp_relaxation_iis_rows(model: LinearModel) -> list[int] | None:
    """Rows of an IIS of the LP relaxation, or None when HiGHS finds none (e.g. the relaxation is feasible)."""
    import highspy

    h = new_highs(SolveOptions())
    # highspy 1.16's default strategy (0, a light test) finds only trivial conflicts and returns no rows for
    # e.g. a + b ≥ 3, a + b ≤ 1: 2 | 4 solves the elastic LP and reduces its conflict to a true IIS
    h.setOptionValue("iis_strategy", IIS_STRATEGY)
    h.setOptionValue("iis_time_limit", IIS_TIME_LIMIT_S)
    relaxed = LinearModel(**{**model.__dict__, "integrality": np.zeros_like(model.integrality)})
    h.passModel(_to_highs_lp(relaxed))
    run_highs(h)
    if h.getModelStatus() != highspy.HighsModelStatus.kInfeasible:
        return None
    status, iis = h.getIis()
    if status == highspy.HighsStatus.kError:
        return None
    rows = list(getattr(iis, "row_index_", []))
    return [int(r) for r in rows] or None
