"""Cost plans: heuristics, the MILP (min $/h, or max servable load when the load does not fit), validation.

`solve_cost_plan` first solves the min-cost MILP.  If it is infeasible (the inventory cannot serve
the load) it answers "with only this inventory, what is the most load I can serve?": the max-load
MILP gives the largest common scale s* of all rates, then a second MILP finds the cheapest plan
serving s*·λ.  The result then has status ``infeasible`` (for the requested load), the plan for s*,
and the message names s*.  Never a crash.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from planner.core.phases import Phase, run_phases
from planner.core.result import Result
from planner.core.work import WorkClock
from planner.deployment import effort
from planner.deployment.cost_formulation import build_cost_model, build_max_load_model
from planner.deployment.plan_pipeline import PlanState, best_valid, final_answer, take_milp_outcome, with_phases
from planner.deployment.problem import CostPlanProblem
from planner.deployment.runner import run_heuristic
from planner.deployment.solution import CostPlanSolution
from planner.deployment.validator import validate_cost_plan
from planner.solver import LinearModel, SolveOptions, SolverOutcome, SolveStatus, VarBlock, solve

FAMILY = "deployment"


def _labels(problem: CostPlanProblem) -> tuple[str, ...]:
    return tuple(problem.option_label(k) for k in range(len(problem.options)))


def _greedy_fill(problem: CostPlanProblem, counts: np.ndarray, rates: np.ndarray, cover: bool = False) -> np.ndarray | None:
    """Add instances to ``counts`` until every model m serves ``rates[m]``, per model (largest unmet
    rate first) while the inventory has room; None when some model stays short.  Each instance added
    is of the option with the lowest $/h per req/s, or with ``cover`` the one that covers the model's
    unmet rate at the least $/h (``π_k·⌈need / cap_k⌉`` when the room allows that many, else its $/h
    per req/s): a small remainder then gets a small instance."""
    counts = np.array(counts, dtype=np.int64, copy=True)
    tp = np.array([o.tensor_parallel for o in problem.options])
    gpu = np.array([o.gpu_index for o in problem.options])
    cap = np.array([o.capacity for o in problem.options])
    model = np.array([o.model_index for o in problem.options])
    free = np.array([inv.gpus for inv in problem.inventory]) - np.bincount(gpu, weights=tp * counts,
                                                                           minlength=len(problem.inventory)).astype(np.int64)
    served = np.bincount(model, weights=cap * counts, minlength=len(problem.demands))
    price = problem.option_price
    need = np.asarray(rates, float) - served
    for m in sorted(range(len(problem.demands)), key=lambda m: (-need[m], m)):
        ks = sorted((k for k in range(len(problem.options)) if model[k] == m), key=lambda k: (price[k] / cap[k], k))
        if not cover:
            for k in ks:
                while need[m] > 1e-12 and free[gpu[k]] >= tp[k]:
                    counts[k] += 1
                    free[gpu[k]] -= tp[k]
                    need[m] -= cap[k]
        while cover and need[m] > 1e-12:
            best, best_score = -1, np.inf
            for k in ks:
                room = free[gpu[k]] // tp[k]
                if room < 1:
                    continue
                wanted = int(np.ceil(need[m] / cap[k] - 1e-12))
                score = price[k] * wanted if wanted <= room else price[k] / cap[k] * need[m] * 1e6
                if score < best_score:
                    best, best_score = k, score
            if best < 0:
                break
            counts[best] += 1
            free[gpu[best]] -= tp[best]
            need[m] -= cap[best]
        if need[m] > 1e-12:
            return None
    return counts


def greedy_cheapest(problem: CostPlanProblem) -> CostPlanSolution | None:
    """Per model (largest rate first), add the option with the lowest $/h per req/s until served."""
    counts = _greedy_fill(problem, np.zeros(len(problem.options), dtype=np.int64),
                          np.array([d.rate for d in problem.demands]))
    return None if counts is None else CostPlanSolution.from_array(counts, "greedy", _labels(problem))


def lp_rounding(problem: CostPlanProblem, lp_counts: np.ndarray) -> CostPlanSolution | None:
    """The LP relaxation's counts rounded down (within the inventory, since the LP is), then
    `_greedy_fill` for what they leave unserved."""
    floor = np.floor(np.maximum(np.asarray(lp_counts, float), 0.0) + 1e-9).astype(np.int64)
    counts = _greedy_fill(problem, floor, np.array([d.rate for d in problem.demands]), cover=True)
    return None if counts is None else CostPlanSolution.from_array(counts, "lp-rounding", _labels(problem))


def max_load_rounding(problem: CostPlanProblem, lp_counts: np.ndarray, max_steps: int = 100_000) -> tuple[np.ndarray, float]:
    """A plan for the max-load question from the LP relaxation's counts, rounded down.  Then, for the
    model m with the least served share ``served_m / λ_m``, one step of: add its option with the most
    req/s per GPU that fits the free GPUs; else free GPUs of a type by removing one instance of another
    model m' and add m's option there, when both shares end above the least share (the removal that
    leaves m' the largest share).  Each step raises the shares sorted ascending lexicographically, so
    it ends (at a local optimum or after ``max_steps``).  Returns (counts, min_m served_m / λ_m)."""
    counts = np.floor(np.maximum(np.asarray(lp_counts, float), 0.0) + 1e-9).astype(np.int64)
    tp = np.array([o.tensor_parallel for o in problem.options])
    gpu = np.array([o.gpu_index for o in problem.options])
    cap = np.array([o.capacity for o in problem.options])
    model = np.array([o.model_index for o in problem.options])
    rates = np.array([d.rate for d in problem.demands])
    free = np.array([inv.gpus for inv in problem.inventory]) - np.bincount(gpu, weights=tp * counts,
                                                                           minlength=len(problem.inventory)).astype(np.int64)
    served = np.bincount(model, weights=cap * counts, minlength=len(rates))
    gain = cap / rates[model]  # share one instance adds to its model
    per_gpu = cap / tp
    for _ in range(max_steps):
        share = served / rates
        m = int(np.argmin(share))
        low = share[m]
        room = (model == m) & (free[gpu] >= tp)
        if room.any():
            k = int(np.flatnonzero(room)[np.argmax(per_gpu[room])])
            counts[k] += 1
            free[gpu[k]] -= tp[k]
            served[m] += cap[k]
            continue
        best = None  # (share left to m', option removed, option added)
        for k in np.flatnonzero(model == m)[np.argsort(-per_gpu[model == m], kind="stable")]:
            short = tp[k] - free[gpu[k]]
            removable = (counts > 0) & (gpu == gpu[k]) & (model != m) & (tp >= short)
            if not removable.any():
                continue
            left = share[model] - gain  # the other model's share after losing one instance
            ok = removable & (left > low * (1 + 1e-12))
            if ok.any() and low + gain[k] > low * (1 + 1e-12):
                j = int(np.flatnonzero(ok)[np.argmax(left[ok])])
                if best is None or left[j] > best[0]:
                    best = (float(left[j]), j, int(k))
        if best is None:
            break
        _, j, k = best
        counts[j] -= 1
        free[gpu[j]] += tp[j]
        served[model[j]] -= cap[j]
        counts[k] += 1
        free[gpu[k]] -= tp[k]
        served[m] += cap[k]
    return counts, float((served / rates).min())


def single_type(problem: CostPlanProblem) -> CostPlanSolution | None:
    """The cheapest plan that uses one GPU type for everything (each model on its cheapest TP there)."""
    best, best_cost = None, np.inf
    price = problem.option_price
    for g, inv in enumerate(problem.inventory):
        counts = np.zeros(len(problem.options), dtype=np.int64)
        used = 0
        ok = True
        for m, demand in enumerate(problem.demands):
            ks = [k for k, o in enumerate(problem.options) if o.model_index == m and o.gpu_index == g]
            if not ks:
                ok = False
                break
            per_k = {k: int(np.ceil(demand.rate / problem.options[k].capacity - 1e-9)) for k in ks}
            k = min(ks, key=lambda k: (per_k[k] * price[k], k))
            counts[k] = per_k[k]
            used += per_k[k] * problem.options[k].tensor_parallel
        if ok and used <= inv.gpus:
            cost = float(counts @ price)
            if cost < best_cost:
                best, best_cost = counts, cost
    return None if best is None else CostPlanSolution.from_array(best, "single-type", _labels(problem))


HEURISTICS = {"greedy": greedy_cheapest, "single-type": single_type}


def run_cost_heuristic(problem: CostPlanProblem, method: str) -> Result[CostPlanSolution]:
    """The heuristic ``method`` (`HEURISTICS`), validated (`planner.deployment.runner.run_heuristic`: an
    invalid plan is an error with the plan kept)."""
    return run_heuristic(problem, method, HEURISTICS[method], validate_cost_plan, family=FAMILY,
                         none_message=f"{method} found no plan within the inventory")


def cost_lower_bound(problem: CostPlanProblem) -> float:
    """``Σ_m λ_m · min_{k: m(k)=m} π_k / cap_k`` ($/h): a lower bound on every plan's cost.

    Proof: a plan serves model m only if ``Σ_{k: m(k)=m} cap_k·n_k ≥ λ_m``; its cost on m is
    ``Σ_k π_k·n_k = Σ_k (π_k / cap_k)·cap_k·n_k ≥ (min_k π_k / cap_k)·Σ_k cap_k·n_k ≥ (min_k π_k / cap_k)·λ_m``
    (``n_k ≥ 0``, ``cap_k > 0``); summing over the models bounds the plan's cost.  A model without any
    option has no plan at all (+∞).  ∎"""
    price = problem.option_price
    best = np.full(len(problem.demands), np.inf)
    for k, o in enumerate(problem.options):
        best[o.model_index] = min(best[o.model_index], price[k] / o.capacity)
    rates = np.array([d.rate for d in problem.demands])
    return float((rates * best).sum()) * (1.0 - 1e-12)


def load_scale_upper_bound(problem: CostPlanProblem) -> float:
    """``Σ_g G_g / Σ_m λ_m · min_{k: m(k)=m} t_k / cap_k``: no plan within the inventory serves a larger
    common scale s of the rates.

    Proof: serving s·λ_m needs ``Σ_{k: m(k)=m} cap_k·n_k ≥ s·λ_m``, hence at least
    ``Σ_k t_k·n_k ≥ (min_k t_k / cap_k)·s·λ_m`` GPUs for model m (as in `cost_lower_bound`); the models'
    GPUs add up to at most the inventory ``Σ_g G_g``.  ∎  (0 when a model has no option.)"""
    need = np.full(len(problem.demands), np.inf)
    for o in problem.options:
        need[o.model_index] = min(need[o.model_index], o.tensor_parallel / o.capacity)
    rates = np.array([d.rate for d in problem.demands])
    per_scale = float((rates * need).sum())
    total = float(sum(inv.gpus for inv in problem.inventory))
    return 0.0 if not np.isfinite(per_scale) else total / per_scale * (1.0 + 1e-12)


@dataclass
class _Budget:
    """The call's `WorkClock` and what it decided (phases skipped, wall-clock cuts)."""

    clock: WorkClock
    solver: str
    threads: int | None
    seed: int
    skipped: list[str] = field(default_factory=list)
    wall_cut: bool = False

    def wall_left(self, reserve: float = 0.0) -> float | None:
        limit = self.clock.time_limit
        if limit is None:
            return None
        return max(self.clock.guard_share * limit - self.clock.wall_seconds() - reserve, 0.0)

    def lp(self, model: LinearModel) -> SolverOutcome:
        """The LP relaxation of ``model`` (simplex: repeatable; the wall clock only as a guard)."""
        relaxed = LinearModel(**{**model.__dict__, "integrality": np.zeros_like(model.integrality)})
        self.clock.charge(effort.cost_lp_seconds(model.num_nonzeros))
        outcome = solve(relaxed, self.solver, SolveOptions(time_limit=self.wall_left(), threads=self.threads,
                                                          seed=self.seed))
        self._note_cut(outcome)
        return outcome

    def milp(self, model: LinearModel, what: str, share: float, warm: np.ndarray | None) -> SolverOutcome | None:
        """``model`` with a node limit from ``share`` of the nominal time left (None, and the skip listed,
        when its build, root and `MIN_MILP_NODES` nodes do not fit); no limit without a time limit."""
        nz = model.num_nonzeros
        limit = self.clock.time_limit
        node_limit = None
        if limit is not None:
            budget = share * (self.clock.left() or 0.0)
            nodes = effort.cost_milp_nodes_within(budget, nz)
            if nodes < MIN_MILP_NODES or not self.clock.allows():
                self.skipped.append(f"the {what} MILP ({nz:,} nonzeros: about {effort.cost_milp_root_seconds(nz):.2g} s "
                                    f"to solve its root, {budget:.2g} s for it)")
                self.wall_cut = self.wall_cut or self.clock.wall_cut
                return None
            node_limit = 1 + nodes
        outcome = solve(model, self.solver, SolveOptions(time_limit=self.wall_left(), threads=self.threads,
                                                         seed=self.seed, node_limit=node_limit, warm_start=warm))
        if limit is not None:
            self.clock.charge(effort.cost_milp_root_seconds(nz) + effort.cost_milp_node_seconds(nz) * (outcome.node_count or 0))
        self._note_cut(outcome)
        return outcome

    def _note_cut(self, outcome: SolverOutcome) -> None:
        if self.clock.time_limit is not None and "time limit" in (outcome.message or "").lower():
            self.wall_cut = True

    def stats(self) -> dict:
        return {"skipped": list(self.skipped), "nominal_seconds": round(self.clock.spent, 6),
                "wall_cut": bool(self.wall_cut or self.clock.wall_cut)}

    def notes(self) -> list[str]:
        out = []
        if self.skipped:
            out.append("time limit: skipped " + ", ".join(self.skipped))
        if self.wall_cut or self.clock.wall_cut:
            out.append("the wall clock stopped a solver before its nominal budget (a slower or busier machine than the "
                       "calibration of planner.deployment.effort): this run may not repeat exactly")
        return out


#: Fewest branch-and-bound nodes worth starting a MILP for under a time limit.
MIN_MILP_NODES = 10
#: Share of the nominal time left that the max-load MILP may take (the cheapest plan for its load gets the rest).
MAX_LOAD_SHARE = 0.5


def _join(*parts: str) -> str:
    return "; ".join(p for p in parts if p)


def _counts_vector(model: LinearModel, n: VarBlock, counts: np.ndarray, extra: dict[int, float] | None = None) -> np.ndarray:
    x = np.zeros(model.num_cols)
    x[n.columns] = counts
    for col, value in (extra or {}).items():
        x[col] = value
    return x


@dataclass(frozen=True)
class MaxLoad:
    """The max-load answer: the scale served, an upper bound on it, its plan and how they were found."""

    scale: float | None
    bound: float
    counts: np.ndarray | None
    status: SolveStatus
    solver: str
    seconds: float
    message: str


def _max_load(problem: CostPlanProblem, budget: _Budget, share: float) -> MaxLoad:
    """The largest common scale s of the rates the inventory serves: the LP relaxation (bound), the
    LP-rounding plan (`max_load_rounding`), then the max-load MILP when it fits ``share`` of the time left."""
    t0 = time.perf_counter()
    model, n, scale_var = build_max_load_model(problem)
    bound = load_scale_upper_bound(problem)
    lp = budget.lp(model)
    if lp.status == SolveStatus.OPTIMAL and lp.objective is not None:
        bound = min(bound, float(lp.objective) * (1.0 + 1e-9))
    counts, scale = max_load_rounding(problem, n.values(lp.x) if lp.x is not None else np.zeros(len(problem.options)))
    warm = _counts_vector(model, n, counts, {int(scale_var.col(0)): scale})
    outcome = budget.milp(model, "max-load", share, warm)
    status, solver, message = SolveStatus.FEASIBLE, "heuristic", "LP rounding"
    if outcome is not None:
        solver, message = outcome.solver, outcome.message
        if outcome.bound is not None:
            bound = min(bound, float(outcome.bound) * (1.0 + 1e-9))
        if outcome.status.has_solution and outcome.x is not None:
            milp_counts = np.rint(n.values(outcome.x)).astype(np.int64)
            rates = np.array([d.rate for d in problem.demands])
            served = np.bincount([o.model_index for o in problem.options],
                                 weights=[o.capacity * c for o, c in zip(problem.options, milp_counts)],
                                 minlength=len(rates))
            milp_scale = float((served / rates).min())
            if milp_scale > scale:
                counts, scale = milp_counts, milp_scale
            if outcome.status == SolveStatus.OPTIMAL:
                status = SolveStatus.OPTIMAL
    if scale >= bound * (1 - 1e-6):
        status = SolveStatus.OPTIMAL
    return MaxLoad(scale, max(bound, scale), counts, status, solver, time.perf_counter() - t0, message)


def max_servable_load(problem: CostPlanProblem, *, solver: str = "highs", time_limit: float | None = None,
                      threads: int | None = None, seed: int = 0,
                      started: float | None = None) -> tuple[float | None, float | None, SolverOutcome]:
    """(s*, upper bound on s, outcome): the max-load pipeline of `_max_load` with the whole of
    ``time_limit`` (nominal seconds, as `solve_cost_plan`)."""
    clock = WorkClock(time_limit, started if started is not None else time.perf_counter())
    if started is not None:
        clock.charge(effort.cost_load_seconds(len(problem.options)))
    budget = _Budget(clock, solver, threads, seed)
    answer = _max_load(problem, budget, 1.0)
    outcome = SolverOutcome(answer.status, answer.solver, answer.scale, answer.bound, None, answer.seconds,
                            _join(answer.message if answer.status != SolveStatus.OPTIMAL else "", *budget.notes()),
                            extra=budget.stats())
    return answer.scale, answer.bound, outcome


def _stats(model) -> dict:
    return {"variables": model.num_cols, "integer_variables": model.num_integer,
            "constraints": model.num_rows, "nonzeros": model.num_nonzeros}


@dataclass
class _CostState(PlanState):
    """The state of one `solve_cost_plan` call, filled in by its phases (`COST_PHASES`)."""

    problem: CostPlanProblem | None = None
    budget: _Budget | None = None
    model: LinearModel | None = None
    n: VarBlock | None = None
    lp: SolverOutcome | None = None
    #: the requested load is proven not to fit (the LP relaxation or the MILP is infeasible)
    proven_infeasible: bool = False


def _build_phase(s: _CostState) -> None:
    """The min-cost MILP, its size, and the first bound (`cost_lower_bound`)."""
    started = time.perf_counter()
    s.model, s.n = build_cost_model(s.problem)
    s.build = time.perf_counter() - started
    s.stats = {**_stats(s.model), "options": len(s.problem.options)}
    s.bound, s.bound_source = cost_lower_bound(s.problem), "cheapest $/h per req/s of each model"


def _lp_phase(s: _CostState) -> None:
    """The LP relaxation: infeasible proves the load does not fit; else its value bounds the cost."""
    s.lp = s.budget.lp(s.model)
    if s.lp.status == SolveStatus.INFEASIBLE:
        s.proven_infeasible = True
    elif s.lp.status == SolveStatus.OPTIMAL and s.lp.objective is not None:
        s.raise_bound(float(s.lp.objective) * (1 - 1e-9), "LP relaxation")


def _heuristics_phase(s: _CostState) -> None:
    """`greedy_cheapest`, `single_type` and `lp_rounding`: the incumbent."""
    problem = s.problem
    candidates = [greedy_cheapest(problem), single_type(problem)]
    if s.lp.x is not None:
        candidates.append(lp_rounding(problem, s.n.values(s.lp.x)))
    s.budget.clock.charge(effort.cost_heuristics_seconds(len(problem.options), len(problem.demands)))
    s.best = best_valid(problem, candidates, validate_cost_plan)


def _milp_phase(s: _CostState) -> None:
    """The min-cost MILP warm-started from the incumbent, within its node budget (infeasible: the load does not fit)."""
    warm = _counts_vector(s.model, s.n, np.asarray(s.best[1].counts)) if s.best is not None else None
    s.outcome = s.budget.milp(s.model, "min-cost", 1.0, warm)
    if s.outcome is not None and s.outcome.status == SolveStatus.INFEASIBLE:
        s.proven_infeasible = True


def _max_load_phase(s: _CostState) -> Result[CostPlanSolution]:
    """The load does not fit: the most load the inventory serves and the cheapest plan for it (`_infeasible_answer`)."""
    return _infeasible_answer(s.problem, s.budget, s.model, s.stats, s.build, s.t0)


def _milp_plan_phase(s: _CostState) -> None:
    """The MILP's bound and plan (`planner.deployment.plan_pipeline.take_milp_outcome`)."""
    labels = _labels(s.problem)
    take_milp_outcome(s, s.problem, s.model, lambda x: CostPlanSolution.from_array(s.n.values(x), "milp", labels),
                      validate_cost_plan)


def _answer_phase(s: _CostState) -> Result[CostPlanSolution]:
    """The incumbent with the bound (`final_answer`), with the notes on the time limit."""
    s.budget.clock.charge(effort.cost_validate_seconds(len(s.problem.options)))
    s.stats.update(s.budget.stats(), lower_bound_source=s.bound_source)
    return final_answer(s, FAMILY, s.budget.notes(), COST_REL_GAP)


def _fits(s: _CostState) -> bool:
    return not s.proven_infeasible


#: The pipeline of `solve_cost_plan`, in order (`planner.core.phases`); ``stats["phases"]`` holds their wall seconds.
COST_PHASES: tuple[Phase[_CostState, Result[CostPlanSolution]], ...] = (
    Phase("build", _build_phase),
    Phase("lp", _lp_phase),
    Phase("heuristics", _heuristics_phase, when=_fits),
    Phase("milp", _milp_phase, when=lambda s: _fits(s) and s.needs_milp(COST_REL_GAP)),
    Phase("max_load", _max_load_phase, when=lambda s: s.proven_infeasible),
    Phase("milp_plan", _milp_plan_phase, when=lambda s: s.outcome is not None),
    Phase("answer", _answer_phase),
)


def solve_cost_plan(problem: CostPlanProblem, *, solver: str = "highs", time_limit: float | None = None,
                    threads: int | None = None, seed: int = 0, started: float | None = None) -> Result[CostPlanSolution]:
    """The cost-minimal plan with its optimality gap, or the max servable load when the load does not fit:
    the phases of `COST_PHASES` (`planner.deployment.plan_pipeline` holds the rules shared with request classes).

    ``build``; ``lp``, the LP relaxation of the min-cost MILP (its value, with `cost_lower_bound`, is the
    bound when the MILP does not improve on it; an infeasible LP proves the load does not fit);
    ``heuristics`` (`greedy_cheapest`, `single_type`, `lp_rounding`); ``milp``, warm-started from the
    cheapest valid plan, unless that plan already meets the bound; when the load does not fit,
    ``max_load`` (`_max_load`, then the cheapest plan serving that load: the same steps on the scaled
    rates) ends the pipeline; else ``milp_plan`` and ``answer``.

    ``time_limit`` covers the whole call and is spent in nominal seconds (`planner.deployment.effort`):
    a MILP runs only if its root and `MIN_MILP_NODES` nodes fit in what is left, with a node limit from
    the nominal budget (HiGHS with a node limit repeats exactly), so the same input, seed and limit
    give the same plan; the wall clock is a guard (each solver's time limit), and when it decides,
    ``stats.wall_cut`` is true and the message says the run may not repeat.  ``started``: the
    `time.perf_counter` time the caller's call began, when it read the instance first (the CLI).
    ``stats["phases"]``: wall seconds per phase run."""
    t0 = time.perf_counter()
    clock = WorkClock(time_limit, started if started is not None else t0)
    if started is not None:
        clock.charge(effort.cost_load_seconds(len(problem.options)))
    state = _CostState(t0=t0, problem=problem, budget=_Budget(clock, solver, threads, seed))
    return with_phases(run_phases(COST_PHASES, state), state)


#: Relative gap at which a cost plan counts as optimal (the solver's default ``mip_rel_gap``).
COST_REL_GAP = 1e-6


def _infeasible_answer(problem: CostPlanProblem, budget: _Budget, model: LinearModel, stats: dict, build: float,
                       t0: float) -> Result[CostPlanSolution]:
    """The requested load does not fit (proven): the most load this inventory can serve (`_max_load`,
    `MAX_LOAD_SHARE` of the time left) and the cheapest plan serving it (the rest)."""
    answer = _max_load(problem, budget, MAX_LOAD_SHARE)
    scale = answer.scale
    stats = {**stats, "max_load_scale_bound": answer.bound}
    if scale is None or scale <= 1e-12:
        stats.update(budget.stats(), max_load_scale=0.0)
        return Result(family=FAMILY, method="milp", solver=answer.solver, status=SolveStatus.INFEASIBLE, objective=None,
                      bound=None, solve_seconds=time.perf_counter() - t0,
                      solution=CostPlanSolution.from_array(np.zeros(len(problem.options)), "milp", _labels(problem),
                                                           load_scale=0.0, mode="max_load"),
                      build_seconds=build,
                      message=_join("no load can be served: some model has no instance option within the inventory",
                                    *budget.notes()), validation=None, bound_source="", stats=stats)
    served = scale * (1 - 1e-9)
    scaled = problem.model_copy(update={"demands": tuple(
        d.model_copy(update={"rate": d.rate * served}) for d in problem.demands)})
    cheap_model, cheap_n = build_cost_model(scaled)
    candidates = [CostPlanSolution.from_array(answer.counts, "max-load plan", _labels(problem)),
                  greedy_cheapest(scaled)]
    lp = budget.lp(cheap_model)
    if lp.x is not None:
        candidates.append(lp_rounding(scaled, cheap_n.values(lp.x)))
    budget.clock.charge(effort.cost_heuristics_seconds(len(problem.options), len(problem.demands)))
    best = best_valid(scaled, candidates, validate_cost_plan)
    warm = _counts_vector(cheap_model, cheap_n, np.asarray(best[1].counts)) if best is not None else None
    cheap = budget.milp(cheap_model, "cheapest plan for that load", 1.0, warm)
    counts = np.asarray(best[1].counts) if best is not None else np.zeros(len(problem.options), dtype=np.int64)
    if cheap is not None and cheap.status.has_solution and cheap.x is not None:
        milp_counts = np.rint(cheap_n.values(cheap.x)).astype(np.int64)
        report = validate_cost_plan(scaled, CostPlanSolution.from_array(milp_counts, "milp", _labels(problem)))
        if report.feasible and (best is None or report.objective <= best[0] + 1e-9):
            counts = milp_counts
    solution = CostPlanSolution.from_array(counts, "milp", _labels(problem), load_scale=served, mode="max_load")
    report = validate_cost_plan(problem, solution)
    proven = "proven" if answer.status == SolveStatus.OPTIMAL else f"bound {answer.bound:.4g}"
    message = (f"the load does not fit the inventory: at most {scale:.4g}x the requested rates can be served "
               f"({proven}); the plan below serves that load at {report.objective:.4g} $/h")
    stats.update(budget.stats(), max_load_scale=scale, max_load_cost_per_hour=report.objective)
    return Result(family=FAMILY, method="milp", solver=answer.solver, status=SolveStatus.INFEASIBLE, objective=None,
                  bound=None, solve_seconds=time.perf_counter() - t0, solution=solution, build_seconds=build,
                  message=_join(message, *budget.notes()), validation=report, bound_source="", stats=stats)
