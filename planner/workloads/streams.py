"""Request streams: Poisson arrivals with lengths from a shipped distribution (seeded)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from planner.core.io import shown
from planner.core.types import PlannedRequest, Workload
from planner.costmodels.files import default_models_dir
from planner.errors import PlannerError
from planner.workloads.lengths import LengthDistribution, load_length_distribution


def distribution_dir(models_dir: Path | str | None = None) -> Path:
    return (Path(models_dir) if models_dir else default_models_dir()) / "workloads"


def available_distributions(models_dir: Path | str | None = None) -> list[str]:
    return sorted(p.stem for p in distribution_dir(models_dir).glob("*.yaml"))


def find_distribution(name_or_path: str, models_dir: Path | str | None = None) -> LengthDistribution:
    """A shipped distribution by name (``sharegpt``, ``azure_conv`` …) or a YAML path."""
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml") or os.path.lexists(path):  # lexists: False for a name too long for a path
        return load_length_distribution(path)
    candidate = distribution_dir(models_dir) / f"{name_or_path}.yaml"
    if not os.path.lexists(candidate):
        known = ", ".join(available_distributions(models_dir)) or "none found"
        raise PlannerError(f"unknown workload distribution {shown(name_or_path)} (known: {known})")
    return load_length_distribution(candidate)


def poisson_workload(
    dist: LengthDistribution,
    *,
    rate: float,
    count: int | None = None,
    duration_s: float | None = None,
    seed: int = 0,
    max_total_tokens: int | None = None,
    slo_class: str = "default",
    prefix: str = "r",
    start_s: float = 0.0,
) -> Workload:
    """Poisson arrivals at ``rate`` req/s: ``count`` requests, or all arrivals within ``duration_s``.

    Predicted outputs use Aladdin's predictor (mean output of the input's bin).
    """
    if rate <= 0:
        raise PlannerError(f"arrival rate must be positive, got {rate}")
    if (count is None) == (duration_s is None):
        raise PlannerError("give exactly one of count or duration_s")
    rng = np.random.default_rng(seed)
    if count is None:
        n_expected = int(rate * duration_s * 1.5 + 50)
        gaps = rng.exponential(1.0 / rate, size=n_expected)
        arrivals = start_s + np.cumsum(gaps)
        while arrivals[-1] < start_s + duration_s:
            more = arrivals[-1] + np.cumsum(rng.exponential(1.0 / rate, size=n_expected))
            arrivals = np.concatenate([arrivals, more])
        arrivals = arrivals[arrivals < start_s + duration_s]
    else:
        arrivals = start_s + np.cumsum(rng.exponential(1.0 / rate, size=count))
    inputs, outputs = dist.sample(arrivals.size, rng, max_total_tokens)
    predicted = dist.predict_output(inputs)
    if max_total_tokens is not None:
        predicted = np.minimum(predicted, np.maximum(max_total_tokens - inputs, 1))
    width = max(4, len(str(arrivals.size)))
    return Workload(
        requests=tuple(
            PlannedRequest(
                request_id=f"{prefix}{k:0{width}d}",
                arrival_s=float(t),
                input_tokens=int(i),
                output_tokens=int(o),
                predicted_output_tokens=int(p),
                slo_class=slo_class,
            )
            for k, (t, i, o, p) in enumerate(zip(arrivals, inputs, outputs, predicted))
        )
    )
