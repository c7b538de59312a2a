"""`FleetResult`: per-request and per-worker outcome of one fleet simulation, and its summaries.

Per request (seconds, indexed like the input arrays):

* ``ttft_s`` = first token − arrival (the first token is produced at the end of the batch that
  processes the prompt's last chunk);
* ``tpot_s`` = (last token − first token) / (O − 1), NaN for O = 1 (no inter-token gap).  The
  project's ATGT is the same quantity.  A NaN TPOT meets every TPOT SLO and is left out of TPOT
  percentiles;
* ``e2e_s`` = last token − arrival; ``queueing_s`` = start of the first batch that processes any of
  its tokens − arrival; ``preemptions`` = times it was evicted (recompute).

Per worker: ``busy_s`` (Σ batch seconds), ``utilisation`` = busy / makespan, ``iterations``.
``makespan`` = last finish − first arrival.

Little's law: ``mean_in_flight`` is the time average of the number of requests in the system
(arrived, not finished) over the makespan, integrated from the arrival and finish events;
``throughput_rps`` = requests / makespan, so L = λ·W reads ``mean_in_flight ≈ throughput_rps ·
mean(e2e_s)``.  ``in_flight_at_arrivals`` is what each arriving request finds in the system (the
PASTA sample; its mean estimates the same L for Poisson arrivals).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from planner.errors import PlannerError

_TOL = 1e-9


@dataclass(frozen=True)
class FleetResult:
    arrival_s: np.ndarray
    input_tokens: np.ndarray
    output_tokens: np.ndarray
    worker: np.ndarray
    first_token_s: np.ndarray
    first_scheduled_s: np.ndarray
    finish_s: np.ndarray
    preemptions: np.ndarray
    busy_s: np.ndarray  # per worker
    iterations: np.ndarray  # per worker
    worker_labels: tuple[str, ...]
    worker_gpus: np.ndarray
    router: str
    schedulers: tuple[str, ...]
    cost_sources: tuple[str, ...]
    slo_ttft_s: float | None = None
    slo_tpot_s: float | None = None
    wall_seconds: float = 0.0  # simulation time (not deterministic; not in the arrays)
    source: str = ""

    # ---- per request ----------------------------------------------------------
    @property
    def n(self) -> int:
        return int(self.arrival_s.size)

    @property
    def ttft_s(self) -> np.ndarray:
        return self.first_token_s - self.arrival_s

    @property
    def tpot_s(self) -> np.ndarray:
        O = self.output_tokens
        return np.where(O > 1, (self.finish_s - self.first_token_s) / np.maximum(O - 1, 1), np.nan)

    @property
    def e2e_s(self) -> np.ndarray:
        return self.finish_s - self.arrival_s

    @property
    def queueing_s(self) -> np.ndarray:
        return self.first_scheduled_s - self.arrival_s

    # ---- per worker / fleet ---------------------------------------------------
    @property
    def num_workers(self) -> int:
        return int(self.busy_s.size)

    @property
    def num_gpus(self) -> int:
        return int(self.worker_gpus.sum())

    @property
    def makespan_s(self) -> float:
        return float(self.finish_s.max() - self.arrival_s.min())

    @property
    def utilisation(self) -> np.ndarray:
        span = self.makespan_s
        return self.busy_s / span if span > 0 else np.zeros_like(self.busy_s)

    @property
    def throughput_rps(self) -> float:
        span = self.makespan_s
        return self.n / span if span > 0 else float("inf")

    @property
    def mean_in_flight(self) -> float:
        """Time average of (arrived − finished) over [first arrival, last finish], by an event sweep."""
        times = np.concatenate([self.arrival_s, self.finish_s])
        steps = np.concatenate([np.ones(self.n), -np.ones(self.n)])
        order = np.lexsort((steps, times))  # at equal times a finish (−1) before an arrival
        times, level = times[order], np.cumsum(steps[order])
        span = self.makespan_s
        return float(np.sum(level[:-1] * np.diff(times)) / span) if span > 0 else 0.0

    @property
    def in_flight_at_arrivals(self) -> np.ndarray:
        """Per request (arrival order): requests in the system just before it arrives (arrived earlier in
        arrival order and finishing after its arrival)."""
        order = np.lexsort((np.arange(self.n), self.arrival_s))
        a = self.arrival_s[order]
        done = np.searchsorted(np.sort(self.finish_s), a, side="right")
        return np.arange(self.n) - done

    # ---- SLOs -----------------------------------------------------------------
    def _slos(self, ttft_s: float | None, tpot_s: float | None) -> tuple[float, float]:
        f = ttft_s if ttft_s is not None else self.slo_ttft_s
        t = tpot_s if tpot_s is not None else self.slo_tpot_s
        for name, value in (("ttft_s", f), ("tpot_s", t)):
            if value is not None and not value > 0:
                raise PlannerError(f"{name} must be positive, got {value}")
        return (f if f is not None else np.inf), (t if t is not None else np.inf)

    def _window(self, warmup_s: float) -> np.ndarray:
        if not warmup_s >= 0:
            raise PlannerError(f"warmup_s must be ≥ 0, got {warmup_s}")
        keep = self.arrival_s >= self.arrival_s.min() + warmup_s
        if not keep.any():
            raise PlannerError(f"no request arrives after the {warmup_s:g} s warm-up")
        return keep

    def slo_met(self, ttft_s: float | None = None, tpot_s: float | None = None) -> np.ndarray:
        """Per request: TTFT ≤ f and TPOT ≤ τ (NaN TPOT meets it); SLOs default to the simulation's."""
        f, t = self._slos(ttft_s, tpot_s)
        tpot = self.tpot_s
        return (self.ttft_s <= f * (1 + _TOL)) & (np.isnan(tpot) | (tpot <= t * (1 + _TOL)))

    def attainment(self, ttft_s: float | None = None, tpot_s: float | None = None, warmup_s: float = 0.0) -> float:
        """Fraction of the requests (arriving after the warm-up) meeting both SLOs."""
        return float(self.slo_met(ttft_s, tpot_s)[self._window(warmup_s)].mean())

    def percentile(self, metric: str, q: float, warmup_s: float = 0.0) -> float:
        """q-th percentile (numpy's linear interpolation) of ``ttft_s``, ``tpot_s``, ``e2e_s`` or ``queueing_s``
        over the requests arriving after the warm-up (NaN TPOTs left out)."""
        if not 0 < q <= 100:
            raise PlannerError(f"percentile must be in (0, 100], got {q}")
        values = getattr(self, metric)[self._window(warmup_s)]
        values = values[~np.isnan(values)]
        return float(np.percentile(values, q)) if values.size else float("nan")

    def meets(self, ttft_s: float | None = None, tpot_s: float | None = None, percentile: float = 99,
              warmup_s: float = 0.0) -> bool:
        """P-th percentile TTFT ≤ f and P-th percentile TPOT ≤ τ (an unset SLO always holds)."""
        f, t = self._slos(ttft_s, tpot_s)
        p_ttft = self.percentile("ttft_s", percentile, warmup_s)
        p_tpot = self.percentile("tpot_s", percentile, warmup_s)
        return bool(p_ttft <= f * (1 + _TOL) and (np.isnan(p_tpot) or p_tpot <= t * (1 + _TOL)))

    def meets_attainment(self, alpha: float, ttft_s: float | None = None, tpot_s: float | None = None,
                         warmup_s: float = 0.0) -> bool:
        """At least a fraction ``alpha`` of the requests meet both SLOs."""
        if not 0 < alpha <= 1:
            raise PlannerError(f"attainment target must be in (0, 1], got {alpha}")
        return self.attainment(ttft_s, tpot_s, warmup_s) >= alpha - _TOL

    def summary(self, ttft_s: float | None = None, tpot_s: float | None = None,
                percentiles: tuple[float, ...] = (50, 90, 99), warmup_s: float = 0.0) -> dict[str, Any]:
        """Percentiles of TTFT, TPOT, e2e and queueing delay, SLO attainment, utilisation, Little's-law terms."""
        f, t = self._slos(ttft_s, tpot_s)
        out: dict[str, Any] = {
            "requests": self.n, "workers": self.num_workers, "gpus": self.num_gpus, "router": self.router,
            "schedulers": sorted(set(self.schedulers)), "cost_models": sorted(set(self.cost_sources)),
            "warmup_s": warmup_s, "makespan_s": self.makespan_s,
        }
        for metric in ("ttft_s", "tpot_s", "e2e_s", "queueing_s"):
            for q in percentiles:
                out[f"p{q:g}_{metric}"] = self.percentile(metric, q, warmup_s)
            vals = getattr(self, metric)[self._window(warmup_s)]
            out[f"mean_{metric}"] = float(np.nanmean(vals)) if np.any(~np.isnan(vals)) else float("nan")
        out.update({
            "slo_ttft_s": None if np.isinf(f) else f, "slo_tpot_s": None if np.isinf(t) else t,
            "slo_attainment": self.attainment(ttft_s, tpot_s, warmup_s),
            "preemptions": int(self.preemptions.sum()),
            "iterations": int(self.iterations.sum()),
            "mean_utilisation": float(self.utilisation.mean()),
            "max_utilisation": float(self.utilisation.max()),
            "throughput_rps": self.throughput_rps,
            "mean_in_flight": self.mean_in_flight,
            "mean_e2e_all_s": float(self.e2e_s.mean()),
        })
        return out

    def to_frame(self):
        """One row per request (input order)."""
        import pandas as pd

        return pd.DataFrame({
            "arrival_s": self.arrival_s, "input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
            "worker": self.worker, "first_scheduled_s": self.first_scheduled_s, "first_token_s": self.first_token_s,
            "finish_s": self.finish_s, "ttft_s": self.ttft_s, "tpot_s": self.tpot_s, "e2e_s": self.e2e_s,
            "queueing_s": self.queueing_s, "preemptions": self.preemptions,
        })

    def workers_frame(self):
        """One row per worker."""
        import pandas as pd

        counts = np.bincount(self.worker, minlength=self.num_workers)
        return pd.DataFrame({
            "worker": np.arange(self.num_workers), "label": self.worker_labels, "scheduler": self.schedulers,
            "gpus": self.worker_gpus, "requests": counts, "iterations": self.iterations, "busy_s": self.busy_s,
            "utilisation": self.utilisation, "cost_model": self.cost_sources,
        })
