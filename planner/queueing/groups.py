"""Request groups (docs/formulations.md §4.2).

QLM's Alg. 1 clusters requests by model, SLO and token distribution, then halves any group
larger than ``δ × average batch size`` (δ = 4).  Here the clustering is deterministic: the key
is (model, SLO class, length bucket) with the length bucket = ``floor(log2(input + output))``
(requests within a factor of two of total length share a distribution); this replaces k-means,
which needs a seed and a k, with a rule giving the same grouping every run.  Within a group the
requests are FCFS (sorted by arrival), and a split keeps that order (first half arrives first).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from planner.queueing.problem import RequestGroup


@dataclass(frozen=True)
class QueuedRequest:
    model: str
    slo_class: str
    slo_s: float
    input_tokens: int
    output_tokens: int
    arrival_s: float = 0.0
    max_output_tokens: int | None = None


def length_bucket(request: QueuedRequest) -> int:
    return int(math.floor(math.log2(max(request.input_tokens + request.output_tokens, 1))))


def _split(members: list[QueuedRequest], limit: int) -> list[list[QueuedRequest]]:
    if len(members) <= limit:
        return [members]
    half = (len(members) + 1) // 2
    return _split(members[:half], limit) + _split(members[half:], limit)


def form_groups(requests: list[QueuedRequest], avg_batch_size: dict[str, float], delta: float = 4.0,
                model_max_output: dict[str, int] | None = None) -> tuple[RequestGroup, ...]:
    """Group requests (model, SLO class, length bucket), FCFS inside, split above δ·avg batch."""
    keyed: dict[tuple[str, str, int], list[QueuedRequest]] = {}
    for r in sorted(requests, key=lambda r: r.arrival_s):
        keyed.setdefault((r.model, r.slo_class, length_bucket(r)), []).append(r)
    groups: list[RequestGroup] = []
    for (model, slo_class, bucket), members in sorted(keyed.items(), key=lambda kv: (kv[1][0].arrival_s, kv[0])):
        limit = max(1, int(delta * avg_batch_size.get(model, 1.0)))
        for part_index, part in enumerate(_split(members, limit)):
            outputs = np.array([r.output_tokens for r in part], dtype=float)
            cap = [r.max_output_tokens for r in part if r.max_output_tokens is not None]
            max_out = float(max(cap)) if cap else float((model_max_output or {}).get(model, outputs.max()))
            groups.append(RequestGroup(
                name=f"{model}/{slo_class}/L{bucket}#{part_index + 1}",
                model=model,
                slo_class=slo_class,
                slo_s=float(min(r.slo_s for r in part)),  # the group meets its SLO when its tightest request does
                num_requests=len(part),
                mean_input_tokens=float(np.mean([r.input_tokens for r in part])),
                mean_output_tokens=float(outputs.mean()),
                std_output_tokens=float(outputs.std()),
                max_output_tokens=max_out,
                arrival_s=float(part[0].arrival_s),
            ))
    return tuple(groups)
