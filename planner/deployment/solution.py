"""Solutions of the deployment family: one type per problem, the same for the MILP and every heuristic.

Each has ``to_dict`` (JSON-safe, with a ``kind`` key) and ``from_dict(problem, data)`` reading that
mapping back, or one written by hand (an operator's current deployment), with one-line errors
(`planner.core.plan_fields`).  The kinds: ``cost_plan`` (`CostPlanSolution`), ``class_plan``
(`planner.deployment.classes.ClassPlanSolution`), ``tp_degrees`` (`TPPlan`; the enumeration's ranked
table, ``tp_ranked``, is read as its best row), ``routing`` (`RoutingSolution`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from planner.catalog import canonical_gpu_name
from planner.core import plan_fields as pf
from planner.core.io import shown

if TYPE_CHECKING:
    from planner.deployment.problem import ClusterProblem, CostPlanProblem, RoutingProblem

#: Most instances of one option or configuration a plan may list (a larger count is refused when read).
MAX_PLAN_COUNT = 10**9


@dataclass(frozen=True)
class CostPlanSolution:
    """``counts[k]`` instances of option k of the problem; ``load_scale`` = fraction of the requested rates served."""

    counts: tuple[int, ...]
    method: str
    load_scale: float = 1.0
    mode: str = "min_cost"  # or "max_load" (the requested load did not fit the inventory)
    labels: tuple[str, ...] = ()

    @classmethod
    def from_array(cls, counts: np.ndarray, method: str, labels: tuple[str, ...] = (), **kw: Any) -> "CostPlanSolution":
        return cls(tuple(int(round(c)) for c in counts), method, labels=labels, **kw)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "cost_plan",
            "method": self.method,
            "mode": self.mode,
            "load_scale": self.load_scale,
            "instances": [{"option": self.labels[k] if self.labels else k, "count": c}
                          for k, c in enumerate(self.counts) if c],
        }

    @classmethod
    def from_dict(cls, problem: "CostPlanProblem", data: Any) -> "CostPlanSolution":
        """The plan in ``data`` (the mapping `to_dict` writes, or one written by hand)::

            {"kind": "cost_plan", "method": "current",
             "instances": [{"model": "Llama-2-70B", "gpu": "H100-80GB-SXM", "tensor_parallel": 4, "count": 4},
                           {"option": "Llama-2-7B on A100-80GB-SXM tp8", "count": 3}]}

        Each entry names one option of the instance, by ``option`` (its label ``<model> on <gpu> tp<t>``)
        or by ``model``, ``gpu`` (catalog name or alias) and ``tensor_parallel``, and gives its ``count``
        (a whole number ≥ 0, at most `MAX_PLAN_COUNT`); an option left out has none.
        ``load_scale`` (default 1: the requested rates; the plan must serve ``load_scale`` × every rate),
        ``mode`` (min_cost | max_load), ``kind`` and ``method`` are optional.  An option listed twice,
        or one the instance does not hold (no capacity known for it), is one `InputError` line."""
        data = pf.mapping(data, "", allowed=("kind", "method", "mode", "load_scale", "instances"),
                          required=("instances",))
        pf.kind(data, ("cost_plan",), "cost_plan")
        method = pf.name(data.get("method", "plan"), "method")
        load_scale = pf.number(data.get("load_scale", 1.0), "load_scale")
        mode = data.get("mode", "min_cost" if load_scale == 1.0 else "max_load")
        if mode not in ("min_cost", "max_load"):
            pf.refuse("mode", f"expected min_cost or max_load, got {shown(mode)}")
        labels = tuple(problem.option_label(k) for k in range(len(problem.options)))
        by_label = {label: k for k, label in enumerate(labels)}
        by_key = {(problem.demands[o.model_index].model, problem.inventory[o.gpu_index].gpu.name.lower(),
                   o.tensor_parallel): k for k, o in enumerate(problem.options)}
        counts = [0] * len(problem.options)
        listed: dict[int, int] = {}
        for e, entry in enumerate(pf.items(data["instances"], "instances")):
            field = pf.join("instances", e)
            entry = pf.mapping(entry, field, allowed=("option", "model", "gpu", "tensor_parallel", "count"))
            pf.mapping(entry, field, required=("count",) if "option" in entry else ("model", "gpu", "tensor_parallel",
                                                                                     "count"))
            if "option" in entry:
                k = pf.lookup(entry["option"], by_label, pf.join(field, "option"), "option")
            else:
                model = pf.name(entry["model"], pf.join(field, "model"))
                gpu = pf.name(entry["gpu"], pf.join(field, "gpu"))
                tp = pf.whole(entry["tensor_parallel"], pf.join(field, "tensor_parallel"), minimum=1)
                k = by_key.get((model, (canonical_gpu_name(gpu) or gpu).lower(), tp), -1)
                if k < 0:
                    pf.refuse(field, f"no option {model} on {gpu} tp{tp} in this instance (its options: "
                                     f"{'; '.join(labels[:8])}{' …' if len(labels) > 8 else ''})")
            if k in listed:
                pf.refuse(field, f"option {labels[k]!r} is listed twice (instances[{listed[k]}] and instances[{e}])")
            listed[k] = e
            counts[k] = pf.whole(entry["count"], pf.join(field, "count"), maximum=MAX_PLAN_COUNT)
        return cls(tuple(counts), method, load_scale, mode, labels)


@dataclass(frozen=True)
class RoutingSolution:
    """``assignment[r]`` is the index of the instance serving request r."""

    request_ids: tuple[str, ...]
    assignment: tuple[int, ...]
    method: str
    instance_names: tuple[str, ...] = ()

    @classmethod
    def from_array(cls, request_ids: tuple[str, ...], assignment: np.ndarray, method: str,
                   instance_names: tuple[str, ...] = ()) -> "RoutingSolution":
        return cls(tuple(request_ids), tuple(int(s) for s in assignment), method, instance_names)

    def as_array(self) -> np.ndarray:
        return np.asarray(self.assignment, dtype=np.int64)

    def to_dict(self) -> dict[str, Any]:
        names = self.instance_names or tuple(str(s) for s in range(max(self.assignment, default=-1) + 1))
        counts = {name: 0 for name in names}
        for s in self.assignment:
            counts[names[s]] += 1
        return {
            "kind": "routing",
            "method": self.method,
            "requests_per_instance": counts,
            "assignment": {r: names[s] for r, s in zip(self.request_ids, self.assignment)},
        }

    @classmethod
    def from_dict(cls, problem: "RoutingProblem", data: Any) -> "RoutingSolution":
        """The plan in ``data`` (the mapping `to_dict` writes, or one written by hand)::

            {"kind": "routing", "method": "current", "assignment": {"r0": "a100-0", "r1": "h100-0", "r2": "a100-0"}}

        ``assignment`` maps every request id of the batch to the name of the instance serving it.  A
        request left out, or an id the batch does not hold, is one `InputError` line (a JSON
        object holds one instance per request: a request cannot be routed twice).  ``requests_per_instance``
        (what `to_dict` adds) is derived and not read; ``kind`` and ``method`` are optional."""
        data = pf.mapping(data, "", allowed=("kind", "method", "assignment", "requests_per_instance"),
                          required=("assignment",))
        pf.kind(data, ("routing",), "routing")
        method = pf.name(data.get("method", "plan"), "method")
        names = tuple(inst.name for inst in problem.instances)
        index = {name: s for s, name in enumerate(names)}
        assignment = pf.mapping(data["assignment"], "assignment")
        known = set(problem.request_ids)
        for rid in assignment:
            if rid not in known:
                pf.refuse(pf.join("assignment", rid if len(rid) <= 60 else rid[:60] + "…"),
                          "unknown request id (not in the instance's batch)")
        chosen = []
        for rid in problem.request_ids:
            if rid not in assignment:
                pf.refuse("assignment", f"request {rid!r} is routed to no instance")
            chosen.append(pf.lookup(assignment[rid], index, pf.join("assignment", rid), "instance"))
        return cls(tuple(problem.request_ids), tuple(chosen), method, names)


@dataclass(frozen=True)
class TPPlan:
    """A TP degree per machine group of a cluster (`planner.deployment.problem.ClusterProblem`), in
    ``groups`` order: the plan `planner.deployment.validator.validate_tp_plan` checks."""

    groups: tuple[str, ...]
    degrees: tuple[int, ...]
    method: str = "plan"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "tp_degrees", "method": self.method, "degrees": dict(zip(self.groups, self.degrees))}

    @classmethod
    def from_dict(cls, problem: "ClusterProblem", data: Any) -> "TPPlan":
        """The plan in ``data``: ``{"kind": "tp_degrees", "degrees": {"dgx-a100": 4, "dgx-h100": 8}}``, one
        TP degree (an integer ≥ 1) per machine group, every group named once; or the enumeration's ranked
        table (``kind: tp_ranked``, `planner.deployment.enumeration.EnumerationSolution.to_dict`), read as
        its best row.  A degree that does not divide the machine's GPUs or whose model does not fit is
        read as written: the validator reports it."""
        data = pf.mapping(data, "")
        kind = pf.kind(data, ("tp_degrees", "tp_ranked"), "tp_degrees")
        method = pf.name(data.get("method", "plan" if kind == "tp_degrees" else "enumeration"), "method")
        if kind == "tp_ranked":
            pf.mapping(data, "", allowed=("kind", "method", "best", "combinations", "ranked", "estimates", "notes"),
                       required=("best",))
            best = pf.mapping(data["best"], "best", required=("degrees",))
            degrees, field = best["degrees"], "best.degrees"
        else:
            pf.mapping(data, "", allowed=("kind", "method", "degrees"), required=("degrees",))
            degrees, field = data["degrees"], "degrees"
        degrees = pf.mapping(degrees, field)
        groups = tuple(g.name for g in problem.machines)
        for name in degrees:
            if name not in groups:
                pf.refuse(pf.join(field, name),
                          f"unknown machine group (the cluster's: {', '.join(map(repr, groups[:8]))})")
        chosen = []
        for g in problem.machines:
            if g.name not in degrees:
                pf.refuse(field, f"machine group {g.name!r} has no TP degree")
            chosen.append(pf.whole(degrees[g.name], pf.join(field, g.name), minimum=1, maximum=g.gpus_per_machine))
        return cls(groups, tuple(chosen), method)
