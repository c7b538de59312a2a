"""Several models in one capacity scenario sharing a GPU inventory: each model swept as one, a joint mix per point.

Sweep.  Each model m is a single-model `Scenario` (`planner.capacity.scenario.MultiScenario`) swept by
`planner.capacity.run.run_capacity` into a directory of its own, ``OUT/<model slug>/`` (its own
``results.sqlite`` under its own fingerprint, so each model resumes exactly as a single-model run of
it would; with ``--out`` also its own report.html, points.csv …).  Its own mixed answers
(`planner.capacity.mix`) are "the model planned alone": the cheapest mix for it with the *whole*
inventory, blind to the other models.

**Joint point i** = rate λ_{m,i} (the i-th rate) of every model m.  Its answer:

1. **Plan** — one request-class MILP (`planner.deployment.classes.solve_class_plan`) over every model:
   one class per model (rate λ_{m,i}); per model, every configuration c answered at λ_{m,i}, with
   that model's measured per-worker rate ``μ_{m,c} = λ_{m,i} / N_{m,c}`` (N_{m,c}: c's simulated answer
   for m at that rate, as the one-class mix reads it); the shared GPU types with their prices and
   ``available`` inventory (``Σ_m Σ_{c of m on g} t_c·n_c ≤ G_g``).  Workers are never shared between
   models: a configuration belongs to one model.
2. **Check** — each model's chosen sub-fleet is simulated on that model's own stream at λ_{m,i}
   (`planner.capacity.mix.check_mix`: the scenario's router over its workers, repaired one worker at
   a time, falling back to its best single configuration when that is cheaper), in model order,
   **within the remaining inventory**: model m may use ``G_g`` minus the GPUs of the models already
   checked (their final fleets) and of the models still to check (their planned fleets).  So the
   total never exceeds the inventory; a model whose fleet cannot be repaired within it is reported as
   not meeting its criterion.  Each model's verdict is its own criterion recounted from the per-request
   times (`planner.capacity.points.criterion_check`).
3. **Compare** — (a) the sum of each model's best single configuration at its rate (no inventory),
   and (b) each model planned alone (its own mixed answer at that rate, or its best single configuration
   within the inventory when it has one configuration); for both the totals per GPU type say whether they
   fit the shared inventory (planning the models one at a time can overdraw it).

What it assumes: as the one-class mix (μ read at one operating point; the simulation checks it); one
joint point pairs the models' i-th rates, it does not search over rate combinations.

Outputs (`planner capacity` on a ``models:`` file): each model's points table, its own mixed fleets and
cost-model lines, then the joint table (per point and model: fleet, $/h, verdict, best single, planned
alone; a total row per point saying whether the alone plans overdraw the inventory).  ``--out DIR``:
each model's report files in ``DIR/<model slug>/``, ``DIR/report.html`` (joint section and plot, links
to the models' reports) and ``DIR/joint.csv`` (`planner.capacity.report.JOINT_COLUMNS`; the report files are
written by `planner.capacity.report.write_multi_outputs`).  ``--json``: ``models`` (each model's
single-model object plus ``model``, ``fingerprint``, ``directory``), ``joint_fleets`` (`JointAnswer.to_dict`
per point), ``status`` (`multi_status`), ``objective`` = the joint $/h at the last point; ``bound`` and
``gap`` are null (the joint mix is checked by simulation, not proven; each model's certified bounds are
in its object).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from planner.capacity.mix import MixedAnswer, MixSetting, build_setting, capacity_routing, check_mix, gpu_counts
from planner.capacity.run import CapacityResult, build_points, run_capacity
from planner.capacity.scenario import MultiScenario, Scenario


def model_dir_name(model: str) -> str:
    """The sub-directory of one model's sweep, e.g. ``llama-2-70b``."""
    from planner.costmodels.files import slug

    return slug(model)


@dataclass
class ModelShare:
    """One model's part of a joint answer (see the module docstring)."""

    model: str
    rate: float
    counts: dict[str, int]  # "GPU TPn" → workers (the checked fleet)
    gpus: dict[str, int]  # GPU type → GPUs
    usd_per_hour: float
    plan_counts: dict[str, int]  # the joint MILP's plan for this model
    plan_usd_per_hour: float
    met: bool
    repairs: int
    source: str
    p_ttft_s: float
    p_tpot_s: float
    attainment: float
    criterion: str
    check: dict[str, Any]
    capacities: dict[str, float]  # μ_{m,c}, req/s per worker
    best_single: str  # cheapest single configuration at the rate, no inventory
    best_single_usd_per_hour: float
    best_single_gpus: dict[str, int]
    alone: str  # the model planned alone (own mixed answer with the whole inventory)
    alone_usd_per_hour: float
    alone_gpus: dict[str, int]
    alone_met: bool
    note: str = ""

    def fleet(self) -> str:
        return _fleet_text(self.counts)


@dataclass
class JointAnswer:
    """The joint mixed fleet of every model at joint point ``index`` (module docstring)."""

    index: int
    rates: dict[str, float]  # model → req/s
    models: list[ModelShare]
    usd_per_hour: float
    gpus: dict[str, int]  # GPU type → GPUs over every model
    inventory: dict[str, int | None]  # GPU type → available (None: no limit)
    met: bool  # every model's simulated fleet meets its criterion
    plan_usd_per_hour: float
    plan_bound_usd_per_hour: float | None
    plan_status: str
    best_singles_usd_per_hour: float
    best_singles_gpus: dict[str, int]
    best_singles_fit: bool  # the best single configurations side by side fit the inventory
    alone_usd_per_hour: float
    alone_gpus: dict[str, int]
    alone_fit: bool  # the models planned alone, side by side, fit the inventory
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["models"] = [dict(m.__dict__) for m in self.models]
        return d

    def rate_label(self) -> str:
        return ", ".join(f"{m} {r:g}" for m, r in self.rates.items())

    def line(self) -> str:
        if not self.models:
            return f"Joint fleet at point {self.index + 1} ({self.rate_label()} req/s): {self.note}."
        parts = "; ".join(f"{m.model} at {m.rate:g} req/s: {m.fleet()} ${m.usd_per_hour:,.2f}/h "
                          f"({'meets' if m.met else 'does NOT meet'} its criterion)" for m in self.models)
        fits = "fit" if self.alone_fit else "do NOT fit"
        singles = "fit" if self.best_singles_fit else "do NOT fit"
        return (f"Joint fleet at point {self.index + 1}: {parts}; total ${self.usd_per_hour:,.2f}/h "
                f"({_gpu_text(self.gpus)}{_inventory_text(self.inventory)}). Best single configurations summed: "
                f"${self.best_singles_usd_per_hour:,.2f}/h (they {singles} the inventory); each model planned alone: "
                f"${self.alone_usd_per_hour:,.2f}/h (side by side they {fits} the inventory).")


def _gpu_text(gpus: dict[str, int]) -> str:
    return " + ".join(f"{n} × {g}" for g, n in gpus.items() if n) or "no GPUs"


def _inventory_text(inventory: dict[str, int | None]) -> str:
    limits = [f"{g} ≤ {n}" for g, n in inventory.items() if n is not None]
    return f"; inventory {', '.join(limits)}" if limits else ""


def _fits(gpus: dict[str, int], inventory: dict[str, int | None]) -> bool:
    return all(inventory.get(g) is None or n <= inventory[g] for g, n in gpus.items())


def _add(total: dict[str, int], more: dict[str, int]) -> dict[str, int]:
    out = dict(total)
    for g, n in more.items():
        out[g] = out.get(g, 0) + int(n)
    return out


@dataclass
class MultiCapacityResult:
    scenario: MultiScenario
    results: list[CapacityResult]  # per model, in scenario order
    joint: list[JointAnswer]  # per joint point
    failures: dict[str, str] = field(default_factory=dict)  # "model: point key" → message


def run_multi_capacity(multi: MultiScenario, out_dir: Path, *, executor: str = "local", workers: int | None = None,
                       address: str | None = None, progress: bool = True) -> MultiCapacityResult:
    """Sweep every model into ``out_dir/<model slug>/`` (resumable) and plan the joint fleet per point."""
    results = []
    for scenario in multi.models:
        sub = Path(out_dir) / model_dir_name(scenario.model.name)
        sub.mkdir(parents=True, exist_ok=True)
        results.append(run_capacity(scenario, sub, executor=executor, workers=workers, address=address,
                                    progress=progress))
    failures = {f"{r.scenario.model.name}: {k}": v for r in results for k, v in r.failures.items()}
    joint = [] if failures else joint_answers(multi, results)
    return MultiCapacityResult(multi, results, joint, failures)


def _params(result: CapacityResult) -> dict[str, dict[str, Any]]:
    return {p.key: p.params for p in build_points(result.scenario, result.configurations)}


def model_setting(scenario: Scenario, result: CapacityResult, params: dict[str, dict[str, Any]], rate: float,
                  available: dict[str, int | None]) -> MixSetting | None:
    """`planner.capacity.mix.MixSetting` of one model at ``rate`` with the inventory ``available`` (GPU type →
    GPUs it may use); unlike `mix_setting` one configuration suffices.  None when none is answered there."""
    table = result.points
    rows = table[table.rate == rate] if not table.empty else table
    if rows.empty:
        return None
    prices = {g.spec.name: float(g.spec.price_per_hour) for g in scenario.gpus}  # type: ignore[arg-type]
    return build_setting(rows, params, rate, prices, available)


def _alone(result: CapacityResult, setting: MixSetting, rate: float) -> tuple[str, float, dict[str, int], bool]:
    """The model planned alone at ``rate``: its own mixed answer, else its best single configuration within the
    inventory (fleet text, $/h, GPUs, meets)."""
    own: MixedAnswer | None = next((m for m in result.mixed_by_rate if m.rate == rate and m.counts), None)
    if own is not None:
        return (" + ".join(f"{n} × {k}" for k, n in own.counts.items() if n), float(own.usd_per_hour), dict(own.gpus),
                bool(own.met))
    best = setting.best
    if best is None:
        return "none within the inventory", float("nan"), {}, False
    return (f"{int(best.workers)} × {best.gpu} TP{int(best.tensor_parallel)}", float(best.usd_per_hour),
            {best.gpu: int(best.gpus)}, bool(best.validation["feasible"]))


def joint_answers(multi: MultiScenario, results: list[CapacityResult]) -> list[JointAnswer]:
    """The joint answer at every joint point (module docstring)."""
    return [joint_answer(multi, results, i) for i in range(multi.points)]


def _joint_problem(multi: MultiScenario, settings: list[MixSetting], rates: dict[str, float], index: int
                   ) -> tuple[Any, list[tuple[int, int]]]:
    """The request-class problem of joint point ``index`` (module docstring, step 1) and, per configuration,
    its (model, configuration of that model's setting)."""
    from planner.deployment.classes import ClassPlanProblem, Configuration, GPUType, RequestClass

    names = [g.spec.name for g in multi.gpus]
    prices = {g.spec.name: float(g.spec.price_per_hour) for g in multi.gpus}  # type: ignore[arg-type]
    confs, owner = [], []
    for m, st in enumerate(settings):
        for c, label in enumerate(st.labels):
            gpu, tp = st.keys[c]
            mu = st.rate / int(st.rows.iloc[c].workers)
            confs.append(Configuration(name=label, model_index=m, gpu_index=names.index(gpu), tensor_parallel=tp,
                                       capacity=((m, mu),)))
            owner.append((m, c))
    problem = ClassPlanProblem(
        name=f"{multi.name}: joint point {index + 1}", models=tuple(s.model.name for s in multi.models),
        gpus=tuple(GPUType(name=g.spec.name, price_per_gpu_hour=prices[g.spec.name], available=g.available,
                           source="catalog") for g in multi.gpus),
        classes=tuple(RequestClass(model_index=m, name="workload", rate=rates[s.model.name])
                      for m, s in enumerate(multi.models)),
        configurations=tuple(confs),
        provenance="per-worker rates measured by the fleet simulator at each model's rate")
    return problem, owner


def _checked_share(multi: MultiScenario, m: int, result: CapacityResult, params: dict[str, dict[str, Any]],
                   settings: list[MixSetting], planned: list[np.ndarray], final: list[np.ndarray | None]) -> ModelShare:
    """Model m's sub-fleet simulated within the inventory the other models leave (module docstring, step 2),
    with its comparisons (step 3); ``final[m]`` is set to its checked counts."""
    scenario, st = multi.models[m], settings[m]
    inventory = {g.spec.name: g.available for g in multi.gpus}
    others: dict[str, int] = {}
    for j, other in enumerate(settings):
        if j != m:
            others = _add(others, gpu_counts(other, final[j] if final[j] is not None else planned[j]))
    remaining = {g: None if n is None else n - others.get(g, 0) for g, n in inventory.items()}
    local = model_setting(scenario, result, params, st.rate, remaining)
    groups, worst = capacity_routing(local)
    got = check_mix(local, planned[m], groups=groups, worst=worst)
    counts = np.asarray(got["counts"], int)
    final[m] = counts
    rows = st.rows
    cheapest = next(rows.sort_values(["usd_per_hour", "gpus"]).itertuples())
    alone = _alone(result, st, st.rate)
    return ModelShare(
        model=scenario.model.name, rate=st.rate,
        counts={label: int(n) for label, n in zip(st.labels, counts)}, gpus=gpu_counts(st, counts),
        usd_per_hour=float(st.price() @ counts),
        plan_counts={label: int(n) for label, n in zip(st.labels, planned[m])},
        plan_usd_per_hour=float(st.price() @ planned[m]), met=bool(got["met"]), repairs=int(got["repairs"]),
        source=got["source"], p_ttft_s=float(got["p_ttft_s"]), p_tpot_s=float(got["p_tpot_s"]),
        attainment=float(got["attainment"]), criterion=scenario.criterion_label, check=got["check"],
        capacities={label: st.rate / int(r.workers) for label, r in zip(st.labels, rows.itertuples())},
        best_single=f"{int(cheapest.workers)} × {cheapest.gpu} TP{int(cheapest.tensor_parallel)}",
        best_single_usd_per_hour=float(cheapest.usd_per_hour), best_single_gpus={cheapest.gpu: int(cheapest.gpus)},
        alone=alone[0], alone_usd_per_hour=alone[1], alone_gpus=alone[2], alone_met=alone[3],
        note=got.get("note", ""))


def joint_answer(multi: MultiScenario, results: list[CapacityResult], index: int) -> JointAnswer:
    """Plan, check and compare joint point ``index`` (module docstring)."""
    from planner.deployment.classes import solve_class_plan

    inventory = {g.spec.name: g.available for g in multi.gpus}
    names = [g.spec.name for g in multi.gpus]
    rates = {s.model.name: float(s.rates[index]) for s in multi.models}
    params = [_params(r) for r in results]
    settings = [model_setting(s, r, p, s.rates[index], inventory) for s, r, p in zip(multi.models, results, params)]
    missing = [s.model.name for s, st in zip(multi.models, settings) if st is None]

    def empty(note: str, bound=None, status="not solved") -> JointAnswer:
        return JointAnswer(index, rates, [], float("nan"), {}, inventory, False, float("nan"), bound, status,
                           float("nan"), {}, False, float("nan"), {}, False, note)

    if missing:
        return empty(f"no configuration has an answer for {', '.join(missing)} at its rate")
    problem, owner = _joint_problem(multi, settings, rates, index)
    plan = solve_class_plan(problem, solver=multi.models[0].solver, time_limit=10.0, seed=multi.models[0].seed)
    if plan.solution is None:
        return empty(f"no joint fleet within the inventory: {plan.message}", plan.bound, plan.status.value)
    planned = [np.zeros(len(st.labels), int) for st in settings]
    for (m, c), n in zip(owner, plan.solution.counts):
        planned[m][c] = int(n)
    final: list[np.ndarray | None] = [None] * len(settings)
    shares = [_checked_share(multi, m, result, params[m], settings, planned, final) for m, result in enumerate(results)]
    total: dict[str, int] = {}
    singles: dict[str, int] = {}
    alone_gpus: dict[str, int] = {}
    for s in shares:
        total = _add(total, s.gpus)
        singles = _add(singles, s.best_single_gpus)
        alone_gpus = _add(alone_gpus, s.alone_gpus)
    total = {g: total[g] for g in names if g in total}
    return JointAnswer(
        index=index, rates=rates, models=shares, usd_per_hour=float(sum(s.usd_per_hour for s in shares)), gpus=total,
        inventory=inventory, met=all(s.met for s in shares) and _fits(total, inventory),
        plan_usd_per_hour=float(sum(s.plan_usd_per_hour for s in shares)), plan_bound_usd_per_hour=plan.bound,
        plan_status=plan.status.value,
        best_singles_usd_per_hour=float(sum(s.best_single_usd_per_hour for s in shares)), best_singles_gpus=singles,
        best_singles_fit=_fits(singles, inventory),
        alone_usd_per_hour=float(sum(s.alone_usd_per_hour for s in shares)), alone_gpus=alone_gpus,
        alone_fit=_fits(alone_gpus, inventory) and not any(math.isnan(s.alone_usd_per_hour) for s in shares),
        note="; ".join(f"{s.model}: {s.note}" for s in shares if s.note))


# ---- status (the report files: planner.capacity.report) ------------------------------------------

def _fleet_text(counts: dict[str, int]) -> str:
    return " + ".join(f"{n} × {name}" for name, n in counts.items() if n) or "-"


def multi_status(result: MultiCapacityResult) -> str:
    """``failed`` when no joint point has a fleet; ``partial`` when a point failed, a model's sweep is not
    complete or a joint fleet misses a criterion; else ``feasible`` (a joint mix is checked, never proven
    optimal)."""
    from planner.capacity.report import json_summary

    if not any(j.models for j in result.joint):
        return "failed"
    if result.failures or not all(j.met for j in result.joint):
        return "partial"
    if any(json_summary(r)["status"] in ("partial", "failed") for r in result.results):
        return "partial"
    return "feasible"
