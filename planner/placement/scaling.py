"""Worker count vs arrival rate: Aladdin's Eq. 7, ``N_w(λ) = ⌈k_w·λ + c_w⌉``.

For each arrival rate λ (req/s), `workers_vs_rate` draws a seeded Poisson
stream of ``duration_s`` seconds from a length distribution and replays it
with `planner.placement.online.replay`.  The workers needed at that rate are
the **maximum number of active workers over the heartbeats in
[warmup_s, duration_s]**: the fleet must be provisioned for the busiest
heartbeat of the steady state.  The warm-up, when the system fills up from
empty, and the drain after the last arrival are left out.
k_w (workers per req/s) and c_w (workers) are then fitted by ordinary least
squares on the (λ, N_w) points.  R² is ``1 − SS_res/SS_tot``.

Every rate uses the same ``seed`` (common random numbers), so the streams of
neighbouring rates are alike and the curve is smoother.

**Caveat: λ_min (paper §1.4).**  Eq. 7 holds only for ``λ ≥ λ_min``.  One
heartbeat places about ``n = λ·Δ`` requests, and the mean length of those
requests has standard error ``σ/√n`` (σ = std of the input or output lengths).
At low rates that error is large: the per-heartbeat demand is noisy, the
worker count is dominated by rounding and bursts, and the linear law breaks
down.  The table reports ``requests_per_heartbeat = λ·Δ`` and
``rel_stderr_output = (σ_o/ō)/√(λ·Δ)``.  Fit only on rates where the latter
is small (say below 0.2), or widen the heartbeat.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from planner.core.types import LLMSpec, SLOSet, WorkerConfig
from planner.costmodels.models import AladdinCostModel
from planner.errors import PlannerError
from planner.placement.online import ReplayResult, replay
from planner.placement.problem import PlacementOptions
from planner.workloads.lengths import LengthDistribution
from planner.workloads.streams import poisson_workload


@dataclass(frozen=True)
class ScalingFit:
    """Eq. 7 fit: ``N_w(λ) = ⌈k_w·λ + c_w⌉`` with the per-rate measurements behind it.

    With a single distinct rate there is no line to fit: ``k_w``, ``c_w`` and ``r2`` are None and
    `predict` answers only that rate (its measured worker count)."""

    k_w: float | None  # workers per (req/s)
    c_w: float | None  # workers
    r2: float | None
    table: pd.DataFrame  # one row per rate
    tensor_parallel: int
    heartbeat_s: float
    replays: tuple[ReplayResult, ...] = field(default=(), repr=False, compare=False)

    def predict(self, rate: float) -> int:
        """Workers for arrival rate ``rate`` (req/s): ``max(1, ⌈k_w·λ + c_w⌉)``."""
        if self.k_w is None or self.c_w is None:
            measured = self.table.loc[self.table.rate == float(rate), "workers"]
            if measured.empty:
                raise PlannerError(f"Eq. 7 was not fitted (one rate only); no prediction for rate {rate:g}")
            return int(measured.iloc[0])
        return max(1, math.ceil(self.k_w * rate + self.c_w - 1e-9))

    def predict_gpus(self, rate: float) -> int:
        return self.predict(rate) * self.tensor_parallel

    def to_dict(self) -> dict[str, Any]:
        return {
            "k_w": self.k_w,
            "c_w": self.c_w,
            "r2": self.r2,
            "tensor_parallel": self.tensor_parallel,
            "heartbeat_s": self.heartbeat_s,
            "points": self.table.to_dict(orient="records"),
        }


def fit_eq7(rates: Sequence[float], workers: Sequence[float]) -> tuple[float, float, float]:
    """Least-squares line ``workers ≈ k_w·rate + c_w``: (k_w, c_w, R²).

    R² is 1.0 for a perfect fit and NaN when all worker counts are equal but the
    line does not pass through them exactly (SS_tot = 0).
    """
    x = np.asarray(rates, dtype=float)
    y = np.asarray(workers, dtype=float)
    if x.size < 2 or np.unique(x).size < 2:
        raise PlannerError("Eq. 7 needs at least two distinct arrival rates")
    A = np.column_stack([x, np.ones_like(x)])
    (k_w, c_w), *_ = np.linalg.lstsq(A, y, rcond=None)
    ss_res = float(((y - (k_w * x + c_w)) ** 2).sum())
    ss_tot = float(((y - y.mean()) ** 2).sum())
    if ss_tot > 0:
        r2 = 1.0 - ss_res / ss_tot
    else:
        r2 = 1.0 if ss_res < 1e-12 else float("nan")
    return float(k_w), float(c_w), r2


def workers_vs_rate(
    rates: Sequence[float],
    *,
    dist: LengthDistribution,
    model: LLMSpec,
    worker: WorkerConfig,
    cost: AladdinCostModel,
    slos: SLOSet,
    options: PlacementOptions = PlacementOptions(),
    heartbeat_s: float = 1.0,
    duration_s: float = 300.0,
    warmup_s: float = 60.0,
    seed: int = 0,
    method: str = "best_fit",
    rebalance: bool = True,
    slo_class: str = "default",
    time_limit: float | None = 10.0,
    solver: str = "highs",
    threads: int | None = None,
) -> ScalingFit:
    """Replay a Poisson stream at each rate and fit Eq. 7 (see the module docstring).

    ``rates`` in req/s, ``duration_s`` and ``warmup_s`` in seconds
    (``warmup_s < duration_s``).  The replay uses ``dist`` as the Alg. 2
    predictor; ``time_limit`` (s) bounds each heartbeat's MIP of ``method="mip"`` (``solver``, ``threads``).  Table columns: ``rate``, ``requests``, ``workers`` (max active
    after warm-up), ``gpus`` (= workers × TP), ``mean_workers`` (after warm-up),
    ``slo_attainment`` (whole stream), ``p99_atgt_s``, ``kv_overflows``,
    ``requests_per_heartbeat`` and ``rel_stderr_output``.
    """
    if not 0 <= warmup_s < duration_s:
        raise PlannerError(f"need 0 <= warmup_s < duration_s, got warmup_s={warmup_s}, duration_s={duration_s}")
    rows: list[dict[str, Any]] = []
    results: list[ReplayResult] = []
    for rate in rates:
        wl = poisson_workload(dist, rate=float(rate), duration_s=duration_s, seed=seed,
                              max_total_tokens=model.max_context_tokens, slo_class=slo_class)
        res = replay(wl, model=model, worker=worker, cost=cost, slos=slos, options=options,
                     heartbeat_s=heartbeat_s, method=method, rebalance=rebalance, predictor=dist, seed=seed,
                     time_limit=time_limit, solver=solver, threads=threads)
        hb = res.heartbeats
        steady = hb[(hb.time_s >= warmup_s) & (hb.time_s <= duration_s)]
        if steady.empty:
            raise PlannerError(f"rate {rate}: no heartbeat between warmup_s={warmup_s} and duration_s={duration_s}")
        out = wl.output_tokens.astype(float)
        per_hb = float(rate) * heartbeat_s
        workers_needed = int(steady.active_workers.max())
        rows.append({
            "rate": float(rate),
            "requests": len(wl),
            "workers": workers_needed,
            "gpus": workers_needed * worker.tensor_parallel,
            "mean_workers": float(steady.active_workers.mean()),
            "slo_attainment": res.slo_attainment,
            "p99_atgt_s": res.p99_atgt_s,
            "kv_overflows": res.kv_overflows,
            "requests_per_heartbeat": per_hb,
            "rel_stderr_output": float(out.std() / out.mean() / math.sqrt(per_hb)) if out.size else float("nan"),
        })
        results.append(res)
    table = pd.DataFrame(rows)
    k_w = c_w = r2 = None
    if table.rate.nunique() >= 2:
        k_w, c_w, r2 = fit_eq7(table.rate, table.workers)
    return ScalingFit(k_w, c_w, r2, table, worker.tensor_parallel, heartbeat_s, tuple(results))
