"""Outputs of `planner capacity`: a self-contained HTML report (plots embedded as base64 PNGs),
``points.csv`` / ``points.parquet`` (every point), ``eq7.csv`` (the fitted lines) and ``mixed.csv``
(the mixed-fleet answer per rate, one class and, with ``classes:``, size classes), and the headline of
``--json`` (`json_summary`).

The output directory.  ``DIR/results.sqlite`` is the sweep's results database: a re-run of the
same scenario resumes from it (finished points are not solved again; a database of another
scenario is refused).  The report files (`REPORT_FILES`) are derived from it at the end of a run;
they are never overwritten without ``--force``: `check_report_files` refuses, before anything is
solved, a directory that already holds one of them.  So a killed or interrupted sweep (no report
yet) resumes with the same command; regenerating the reports of a finished sweep, or retrying its
failed points, takes ``--force``.  Other files in the directory are left alone.  The report files
are written all-or-nothing through private temporary files (`planner.core.outputs.write_files`).
"""

from __future__ import annotations

import base64
import html
import io
import os
from numbers import Number
from datetime import datetime, timezone
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from planner.capacity.multi import (  # noqa: E402
    JointAnswer,
    MultiCapacityResult,
    _fleet_text,
    _gpu_text,
    _inventory_text,
    model_dir_name,
)
from planner.capacity.run import CapacityResult, horizon_note  # noqa: E402
from planner.capacity.scenario import MultiScenario  # noqa: E402
from planner.core.outputs import write_files  # noqa: E402
from planner.errors import PlannerError  # noqa: E402
from planner.solver.outcome import relative_gap  # noqa: E402

POINT_COLUMNS = (
    "gpu", "tensor_parallel", "rate", "requests", "status", "workers", "gpus", "bound_workers", "bound_gpus",
    "gap", "bound_binding", "steady_bound_gpus", "guarantee", "p_ttft_s", "p_tpot_s", "attainment", "utilisation",
    "simulations", "answer_source", "snapshot_gpus", "snapshot_bound_gpus", "snapshot_status", "snapshot_method",
    "best_fit_workers", "price_per_gpu_hour", "usd_per_hour", "eq7_workers", "best_config", "cost_model",
    "cost_model_path", "seconds", "note",
)

#: ``--json`` points: the CSV columns plus the solver contract's per-point keys (`planner.capacity.run`).
POINT_JSON_COLUMNS = POINT_COLUMNS + ("solver", "solve_seconds", "validation", "snapshot_validation", "bound")

#: Top-level ``status`` of ``planner capacity --json``.
STATUSES = {
    "optimal": "every point's simulated answer equals its certified bound (proven fewest workers)",
    "feasible": "every point has a simulated answer that meets the criterion, at least one above its bound "
                "(see its gap)",
    "partial": "some points failed (re-run to retry them); the others have simulated answers",
    "failed": "no point has a simulated answer",
}

CSS = """
body { font-family: -apple-system, 'Segoe UI', Helvetica, Arial, sans-serif; margin: 2em auto; max-width: 1100px;
       color: #222; line-height: 1.45; padding: 0 1em; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; } h2 { font-size: 1.25em; margin-top: 1.6em; border-bottom: 1px solid #ddd; }
.sub { color: #666; margin-top: 0; }
table { border-collapse: collapse; margin: 0.6em 0; font-size: 0.9em; }
th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: right; }
th { background: #f3f5f7; } td.l, th.l { text-align: left; }
tr.best td { background: #eef8ee; }
.answer { background: #f6f8fb; border-left: 4px solid #3b6fb6; padding: 0.6em 1em; margin: 1em 0; }
img { max-width: 100%; border: 1px solid #eee; margin: 0.4em 0; }
.small { font-size: 0.85em; color: #555; }
"""


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def _page_head(title: str, heading_html: str) -> str:
    """The page's head (title, `CSS`) and its ``<h1>`` (``heading_html`` is already escaped)."""
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>Capacity plan: {html.escape(title)}</title>"
            f"<style>{CSS}</style></head><body><h1>{heading_html}</h1>")


def _answer_box(lines: list[str]) -> str:
    """The highlighted answer lines ("" when there are none)."""
    return "<div class='answer'>" + "<br>".join(html.escape(x) for x in lines) + "</div>" if lines else ""


def _failures(failures: dict) -> str:
    """The failed points (the first five), or ""."""
    if not failures:
        return ""
    return (f"<p><b>{len(failures)} point(s) failed</b> (re-run the same command to retry): "
            + "; ".join(html.escape(f"{k}: {v}") for k, v in list(failures.items())[:5]) + "</p>")


def _page_foot(source: str) -> str:
    return (f"<p class='small'>Generated {datetime.now(timezone.utc):%Y-%m-%d %H:%M UTC} by planner capacity from "
            f"{html.escape(source)}.</p></body></html>")


def _series(points: pd.DataFrame):
    for (gpu, tp), frame in points.groupby(["gpu", "tensor_parallel"], sort=True):
        yield f"{gpu} TP{tp}", frame.sort_values("rate")


def plot_gpus(result: CapacityResult) -> str:
    fig, ax = plt.subplots(figsize=(9, 4.8))
    fits = {(r.gpu, r.tensor_parallel): r for r in result.fits.itertuples()}
    for k, (label, frame) in enumerate(_series(result.points)):
        color = f"C{k}"
        ax.plot(frame.rate, frame.gpus, "o-", color=color, label=f"{label}: simulated answer ●")
        ax.fill_between(frame.rate, frame.bound_gpus, frame.gpus, color=color, alpha=0.15, step=None)
        ax.plot(frame.rate, frame.bound_gpus, "v", color=color, alpha=0.7, markersize=5,
                label=f"{label}: certified bound ▼")
        snap = frame.snapshot_gpus.astype(float)
        if snap.notna().any():
            ax.plot(frame.rate, snap, "x", color=color, alpha=0.7, label=f"{label}: snapshot placement ×")
        fit = fits.get((frame.gpu.iloc[0], frame.tensor_parallel.iloc[0]))
        if fit is not None:
            xs = pd.Series(sorted(set(frame.rate)))
            tp = frame.tensor_parallel.iloc[0]
            ax.plot(xs, (fit.k_w * xs + fit.c_w) * tp, "--", color=color, alpha=0.6, linewidth=1)
    ax.set_xlabel("arrival rate (req/s)")
    ax.set_ylabel("GPUs")
    ax.set_title("GPUs vs arrival rate (band: certified bound ▼ to simulated answer ●; dashed: Eq. 7 fit)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    return _png(fig)


def plot_cost(result: CapacityResult) -> str:
    fig, ax = plt.subplots(figsize=(9, 4.2))
    for k, (label, frame) in enumerate(_series(result.points)):
        ax.plot(frame.rate, frame.usd_per_hour, "o-", color=f"C{k}", label=label, alpha=0.8)
    front = result.points.groupby("rate").usd_per_hour.min().sort_index()
    ax.plot(front.index, front.values, "k--", linewidth=1.5, label="cheapest single configuration (Pareto front)")
    mixed = [m for m in result.mixed_by_rate if m.counts]
    if mixed:
        ax.plot([m.rate for m in mixed], [m.usd_per_hour for m in mixed], "s-", color="black", linewidth=2,
                markersize=6, label="mixed fleet (class MILP, simulated)")
    buckets = [m for m in result.classes_by_rate if m.counts]
    if buckets:
        ax.plot([m.rate for m in buckets], [m.usd_per_hour for m in buckets], "D-", color="tab:purple", linewidth=2,
                markersize=6, label=f"mixed fleet over {buckets[0].kind} (class-aware routing, simulated)")
    ax.set_xlabel("arrival rate (req/s)")
    ax.set_ylabel("US$ per hour")
    ax.set_title("Fleet cost vs arrival rate (simulated answers)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    return _png(fig)


def plot_percentiles(result: CapacityResult) -> str:
    """P-th percentile TTFT and TPOT vs fleet size at the highest rate (every size the search simulated)."""
    s = result.scenario
    pct = s.percentile or 99.0
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    pts = result.points
    top = pts[pts.rate == pts.rate.max()]
    for k, row in enumerate(top.itertuples()):
        curve = result.curves.get((row.gpu, row.tensor_parallel, row.rate), {})
        if not curve:
            continue
        ns = sorted(int(n) for n in curve)
        label = f"{row.gpu} TP{row.tensor_parallel}"
        ax1.plot([n * row.tensor_parallel for n in ns], [curve[str(n)][0] for n in ns], "o-", color=f"C{k}", label=label)
        ax2.plot([n * row.tensor_parallel for n in ns], [curve[str(n)][1] * 1000 for n in ns], "o-", color=f"C{k}",
                 label=label)
    ax1.axhline(s.ttft_s, color="k", linestyle=":", label=f"TTFT SLO {s.ttft_s:g} s")
    ax2.axhline(s.atgt_s * 1000, color="k", linestyle=":", label=f"TPOT SLO {s.atgt_s * 1000:g} ms")
    for ax, what in ((ax1, f"P{pct:g} TTFT (s)"), (ax2, f"P{pct:g} TPOT (ms)")):
        ax.set_xlabel("GPUs (simulated fleet)")
        ax.set_ylabel(what)
        ax.set_yscale("log")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"Simulated percentiles vs fleet size at {top.rate.max():g} req/s" if not top.empty else "")
    fig.subplots_adjust(wspace=0.32)
    return _png(fig)


def _table(frame: pd.DataFrame, columns: list[tuple[str, str]], best_col: str | None = None) -> str:
    head = "".join(f"<th class='l'>{html.escape(t)}</th>" if i == 0 else f"<th>{html.escape(t)}</th>"
                   for i, (_, t) in enumerate(columns))
    body = []
    for _, row in frame.iterrows():
        cls = " class='best'" if best_col and bool(row.get(best_col)) else ""
        cells = []
        for i, (col, _) in enumerate(columns):
            value = row[col]
            if isinstance(value, float):
                text = f"{value:.4g}" if not (col.endswith("usd_per_hour") or col == "gap") else (
                    f"{value:,.2f}" if col.endswith("usd_per_hour") else f"{100 * value:.1f}%")
            else:
                text = "-" if value is None else str(value)
            left = i == 0 or not isinstance(value, Number) or isinstance(value, (bool, np.bool_))
            cells.append(f"<td{' class=l' if left else ''}>"
                         f"{html.escape(text)}</td>")
        body.append(f"<tr{cls}>{''.join(cells)}</tr>")
    return f"<table><tr>{head}</tr>{''.join(body)}</table>"


def answer_lines(result: CapacityResult) -> list[str]:
    """One sentence per GPU type at the highest rate, cheapest first."""
    pts = result.points
    if pts.empty:
        return []
    top = max(pts.rate)
    best = pts[(pts.rate == top) & pts.best_config].sort_values("usd_per_hour")
    lines = []
    cheapest = None
    for row in best.itertuples():
        cheapest = cheapest or row
        extra = "" if row is cheapest else f" ({row.usd_per_hour / cheapest.usd_per_hour - 1:+.0%} vs {cheapest.gpu})"
        lines.append(
            f"At {top:g} req/s: {row.gpus} × {row.gpu} (TP {row.tensor_parallel}, {row.workers} workers) "
            f"for ${row.usd_per_hour:,.2f}/h{extra}, simulated; no policy can do it with fewer than "
            f"{row.bound_gpus} GPUs ({row.status}, gap {100 * row.gap:.0f} %) under cost model "
            f"{Path(row.cost_model_path).name if row.cost_model_path else row.gpu} ({row.cost_model})."
        )
    if result.mixed is not None and result.mixed.counts:
        lines.append(result.mixed.line())
    over = [m for m in result.classes_by_rate if m.rate == top]
    if over:
        lines.append(over[0].line() if over[0].counts else f"Mixed fleet over {over[0].kind} at {top:g} req/s: "
                                                           f"{over[0].note}.")
    return lines


#: Columns of ``mixed.csv`` (one row per rate and kind of mix).
MIXED_COLUMNS = ("kind", "rate", "fleet", "gpus", "usd_per_hour", "met", "source", "repairs", "plan_usd_per_hour",
                 "plan_bound_usd_per_hour", "plan_status", "best_single", "best_single_usd_per_hour",
                 "one_class_usd_per_hour", "p_ttft_s", "p_tpot_s", "attainment", "note")
MIXED_HTML_COLUMNS = [("rate", "req/s"), ("fleet", "mixed fleet (workers)"), ("usd_per_hour", "$/h"),
                      ("met", "meets (simulated)"), ("source", "from"), ("plan_usd_per_hour", "MILP plan $/h"),
                      ("best_single", "best single"), ("best_single_usd_per_hour", "best single $/h"),
                      ("note", "note")]
CLASSES_NOTE = ("Per rate and class k: μ_(k,c) = rate / N_(k,c), N_(k,c) the fewest workers of c meeting the "
                "criterion on class k alone at the whole rate (planner.capacity.classes); the class MILP routes each "
                "class's rate over the configurations; the fleet is simulated on the full stream with each request "
                "sent to a configuration by its class's routed-rate split (smooth weighted round robin) and then by "
                "the scenario's router among that configuration's workers; repaired like the one-class mix.")


def mixed_frame(answers) -> pd.DataFrame:
    """One row per `MixedAnswer` (``mixed.csv``, the report's tables)."""
    rows = []
    for m in answers:
        d = m.to_dict()
        d["fleet"] = " + ".join(f"{n} × {name}" for name, n in m.counts.items() if n) or "-"
        d["gpus"] = " + ".join(f"{n} × {g}" for g, n in m.gpus.items() if n) or "-"
        rows.append({k: d.get(k) for k in MIXED_COLUMNS})
    return pd.DataFrame(rows, columns=list(MIXED_COLUMNS))


def _valid(point: dict) -> bool:
    validation = point.get("validation")
    return isinstance(validation, dict) and bool(validation.get("feasible"))


def json_summary(result: CapacityResult) -> dict:
    """The solver contract's top-level keys of ``planner capacity --json``.

    * ``status``: see `STATUSES` (a point whose answer fails its criterion recount counts as failed).
    * ``objective``: the headline a capacity planner reads first, the fleet cost ($/h) of the
      cheapest configuration at the highest rate (simulated answer); ``bound``: the lowest $/h any
      configuration swept at that rate could reach (min over them of certified GPU bound × price), so
      no policy on a swept GPU type / TP serves that rate for less under its cost model;
      ``gap`` = |objective − bound| / objective.
    * ``solve_seconds``: sum of the points' wall times (points resumed from the database included).
    * ``solver``: ``fleet-simulation`` (the answers come from `planner.fleet`).
    * ``solution``: the recommended configuration (the cheapest one at the highest rate) with its
      point's criterion recount, and the best configuration of every GPU type at that rate.
    * ``validation``: the verdict over every finished point (feasible when every answer's criterion,
      recounted from the per-request times, holds), its ``objective`` the headline $/h from the
      recount's worker count, and the violations of every point (``where`` prefixed by the point).
    """
    pts = result.points
    rows = [] if pts.empty else pts.to_dict(orient="records")
    planned = [r for r in rows if _valid(r)]
    failed = len(result.failures) + len(rows) - len(planned)
    if not planned:
        status = "failed"
    elif failed:
        status = "partial"
    elif all(r["status"] == "optimal" for r in planned):
        status = "optimal"
    else:
        status = "feasible"
    violations = []
    for r in rows:
        for v in (r.get("validation") or {}).get("violations", []):
            where = f"{r['gpu']} TP{r['tensor_parallel']} at {r['rate']:g} req/s: {v['where']}"
            violations.append({**v, "where": where})
    summary = {"status": status, "objective": None, "bound": None, "gap": None,
               "solve_seconds": round(float(sum(r["solve_seconds"] for r in rows)), 4),
               "solver": "+".join(sorted({r["solver"] for r in rows})) or None, "solution": None,
               "validation": {"feasible": bool(rows) and len(planned) == len(rows), "objective": None,
                              "violations": violations}}
    if not planned:
        return summary
    top = max(r["rate"] for r in planned)
    at_top = [r for r in planned if r["rate"] == top]

    def order(r: dict) -> tuple:
        return (r["usd_per_hour"], r["gpus"], r["tensor_parallel"], r["gpu"])

    best = sorted((min((r for r in at_top if r["gpu"] == gpu), key=order) for gpu in {r["gpu"] for r in at_top}),
                  key=order)
    cheapest = best[0]
    objective = float(cheapest["usd_per_hour"])
    bound = min(float(r["bound_gpus"] * r["price_per_gpu_hour"]) for r in at_top)
    keys = ("gpu", "tensor_parallel", "workers", "gpus", "bound_workers", "bound_gpus", "usd_per_hour", "status",
            "cost_model")
    checked = cheapest["validation"]["objective"] * cheapest["tensor_parallel"] * cheapest["price_per_gpu_hour"]
    summary.update(
        objective=objective, bound=bound, gap=relative_gap(objective, bound),
        solution={"rate": top, **{k: cheapest[k] for k in keys},
                  "bound_usd_per_hour": float(cheapest["bound_gpus"] * cheapest["price_per_gpu_hour"]),
                  "validation": cheapest["validation"],
                  "per_gpu_type": [{k: r[k] for k in keys} for r in best]},
    )
    summary["validation"].update(objective=float(checked),
                                 objective_name=f"$/h of the cheapest configuration at {top:g} req/s")
    return summary


def render_html(result: CapacityResult) -> str:
    s = result.scenario
    pts = result.points
    parts = [_page_head(s.name, f"Capacity plan: {html.escape(s.name)}")]
    parts.append(f"<p class='sub'>{html.escape(s.model.name)} · {html.escape(s.criterion_label)} · "
                 f"workload: {html.escape(s.workload_label)} · rates {', '.join(f'{r:g}' for r in s.rates)} req/s · "
                 f"simulated: {html.escape(s.scheduler)} engine, {html.escape(s.router)} router</p>")
    parts.append(_answer_box(answer_lines(result)))
    parts.append(_failures(result.failures))
    if not pts.empty:
        parts.append("<h2>GPUs vs arrival rate</h2>")
        parts.append(f"<img alt='GPUs vs rate' src='{plot_gpus(result)}'>")
        parts.append("<h2>Cost vs arrival rate</h2>")
        parts.append(f"<img alt='cost vs rate' src='{plot_cost(result)}'>")
        parts.append("<h2>Best configuration per GPU type and rate</h2>")
        best = pts[pts.best_config].sort_values(["rate", "usd_per_hour"])
        parts.append(_table(best, [("gpu", "GPU type"), ("rate", "req/s"), ("tensor_parallel", "TP"),
                                   ("workers", "workers"), ("gpus", "GPUs (simulated)"), ("bound_gpus", "≥ GPUs (bound)"),
                                   ("gap", "gap"), ("snapshot_gpus", "snapshot GPUs"),
                                   ("usd_per_hour", "$/h"), ("status", "status"), ("cost_model", "cost model")]))
        parts.append("<h2>Percentiles vs fleet size</h2>")
        parts.append(f"<img alt='percentiles vs fleet size' src='{plot_percentiles(result)}'>")
    if not result.fits.empty:
        parts.append("<h2>Eq. 7: workers = ⌈k·λ + c⌉</h2>")
        fits = result.fits.copy()
        parts.append(_table(fits, [("gpu", "GPU type"), ("tensor_parallel", "TP"), ("k_w", "k (workers per req/s)"),
                                   ("c_w", "c (workers)"), ("r2", "R²")]))
    if result.eq6:
        parts.append("<h2>Worker configuration (Eqs. 5–6: decode tokens/s per GPU)</h2>")
        rows = []
        for gpu, report in result.eq6.items():
            for o in report.options:
                rows.append({"gpu": gpu, "tp": o.tensor_parallel, "feasible": "yes" if o.feasible else o.reason,
                             "tok": o.tokens_per_s_per_gpu, "batch": o.batch, "bottleneck": o.bottleneck,
                             "best": report.best is not None and o.tensor_parallel == report.best.tensor_parallel})
        parts.append(_table(pd.DataFrame(rows), [("gpu", "GPU type"), ("tp", "TP"), ("feasible", "feasible"),
                                                 ("tok", "tokens/s per GPU"), ("batch", "batch"),
                                                 ("bottleneck", "bottleneck")], best_col="best"))
    if result.excluded:
        parts.append("<h2>Configurations left out</h2><ul>" + "".join(
            f"<li>{html.escape(e.gpu)} TP {e.tensor_parallel}: {html.escape(e.reason)}</li>" for e in result.excluded)
            + "</ul>")
    if not pts.empty:
        parts.append("<h2>Every point</h2>")
        parts.append(_table(pts, [("gpu", "GPU type"), ("tensor_parallel", "TP"), ("rate", "req/s"),
                                  ("requests", "measured requests"), ("status", "status"),
                                  ("workers", "workers"), ("bound_workers", "≥ workers"), ("gap", "gap"),
                                  ("bound_binding", "bound binds"), ("p_ttft_s", "P TTFT s"), ("p_tpot_s", "P TPOT s"),
                                  ("attainment", "attainment"), ("utilisation", "utilisation"),
                                  ("snapshot_workers", "snapshot workers"), ("snapshot_status", "snapshot"),
                                  ("usd_per_hour", "$/h"), ("seconds", "s")], best_col="best_config"))
    if result.mixed_by_rate:
        parts.append("<h2>Mixed fleet at every rate</h2>")
        parts.append(_table(mixed_frame(result.mixed_by_rate), MIXED_HTML_COLUMNS))
        m = result.mixed_by_rate[-1]
        parts.append("<p class='small'>Per rate: per-worker rates μ_c = rate / N_c (N_c: the configuration's own "
                     "simulated answer) into the request-class MILP (one class, the whole workload; inventory "
                     "respected); the plan is simulated on the rate's stream (the scenario's router over every "
                     "worker) and workers are added until it meets the criterion; a repaired mix that would cost "
                     "more than the best single configuration is replaced by it. At "
                     f"{m.rate:g} req/s μ = " + html.escape(", ".join(f"{k}: {v:.3g}" for k, v in m.capacities.items()))
                     + " req/s per worker.</p>")
    classes = result.classes_by_rate
    if classes:
        parts.append(f"<h2>Mixed fleet over {html.escape(classes[0].kind)} (request classes)</h2>")
        parts.append(_table(mixed_frame(classes), MIXED_HTML_COLUMNS + [("one_class_usd_per_hour", "one-class mix $/h")]))
        for m in classes:
            cap = "; ".join(f"{k}: " + ", ".join(f"{c} {v:.3g}" for c, v in row.items())
                            for k, row in m.class_capacities.items())
            split = "; ".join(f"{k} → " + ", ".join(f"{c} {100 * v:.0f} %" for c, v in row.items())
                              for k, row in m.routing.items())
            parts.append(f"<p class='small'>{m.rate:g} req/s — classes (req/s): "
                         + html.escape(", ".join(f"{k} {v:.3g}" for k, v in m.classes.items()))
                         + f"<br>μ_(k,c) (req/s per worker): {html.escape(cap)}<br>routing: {html.escape(split)}</p>")
        parts.append("<p class='small'>" + html.escape(CLASSES_NOTE) + "</p>")
    parts.append("<h2>How to read this</h2><ul class='small'>")
    parts.append(f"<li>Answer: the fewest workers whose simulated fleet meets the criterion ({html.escape(s.criterion_label)}) "
                 f"on a seeded Poisson stream of {s.window_s:g} s (requests arriving in the first {s.warmup_s:g} s are not "
                 f"measured): planner.fleet, every worker running the {html.escape(s.scheduler)} preset of the batching family "
                 f"(KV limit, preemption), requests routed by {html.escape(s.router)}. Every rate thins one master stream, so "
                 "a lower rate's requests are a subset of a higher rate's.</li>")
    parts.append("<li>Bound: planner.capacity.bound on the same measured requests — no scheduling policy on fewer workers "
                 "serves them meeting the criterion under the cost model (prefill work within TTFT windows, decode work, "
                 "decode iterations from the TPOT budget and the KV limit). 'optimal' = the answer equals the bound. "
                 "The bound also covers policies the simulator does not run (e.g. disaggregated prefill), so a gap is "
                 "expected where prefills stall decodes.</li>")
    parts.append(f"<li>Snapshot: Aladdin's decode-only placement of the requests decoding at one instant "
                 f"({html.escape(horizon_note(s))}), placement MIP (time limit {s.time_limit_s:g} s) or best-fit; shown "
                 "for comparison, it is not a fleet answer (it ignores prefill work and interference).</li>")
    parts.append("<li>GPUs = workers × TP; $/h = GPUs × the scenario's price per GPU-hour. Every number is relative to "
                 "the named cost model.</li>")
    parts.append(f"<li>Sweep: {html.escape(result.summary.line())}.</li></ul>")
    parts.append(_page_foot(s.source))
    return "".join(parts)


#: The files `write_outputs` writes into the output directory, by key.
REPORT_FILES = {"report": "report.html", "csv": "points.csv", "parquet": "points.parquet", "eq7": "eq7.csv",
                "mixed": "mixed.csv"}


def check_report_files(out_dir: Path, force: bool) -> None:
    """Before the sweep: one line if ``out_dir`` holds a report file of an earlier run and not ``force``."""
    existing = [name for name in REPORT_FILES.values() if os.path.lexists(out_dir / name)]
    for name in existing:
        if (out_dir / name).is_dir():
            raise PlannerError(f"--report {out_dir / name}: is a directory; the report file cannot be written")
    _refuse_earlier_files(out_dir, existing, force)


def _refuse_earlier_files(out_dir: Path, existing: list[str], force: bool) -> None:
    """One line when ``existing`` (report files of an earlier run in ``out_dir``) is not empty and not ``force``."""
    if existing and not force:
        raise PlannerError(f"{out_dir}: already holds {', '.join(existing)} of an earlier run; pass --force to "
                           "overwrite them (finished points are not solved again) or use another --report directory")


#: Why points.parquet was not written, when the optional parquet engine is missing (None when it is there).
PARQUET_MISSING = "points.parquet not written: it needs pyarrow (pip install 'planner[parquet]'); points.csv has the same table"


def parquet_available() -> bool:
    """Whether pandas can write Parquet here (pyarrow, the ``parquet`` extra, is installed)."""
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return False
    return True


def write_outputs(result: CapacityResult, out_dir: Path, force: bool = False) -> dict[str, Path]:
    """Write report.html, points.csv, points.parquet (when pyarrow is installed: the ``parquet`` extra)
    and eq7.csv into ``out_dir`` (all or none; an existing one only with ``force``); return the paths
    written, by key."""
    pts = result.points
    table = pts.reindex(columns=list(POINT_COLUMNS)) if not pts.empty else pd.DataFrame(columns=list(POINT_COLUMNS))
    paths = {key: out_dir / name for key, name in REPORT_FILES.items()}
    mixed = mixed_frame([*result.mixed_by_rate, *result.classes_by_rate])
    files = [(paths["csv"], table.to_csv(index=False)), (paths["eq7"], result.fits.to_csv(index=False)),
             (paths["mixed"], mixed.to_csv(index=False)), (paths["report"], render_html(result))]
    if parquet_available():
        buf = io.BytesIO()
        table.astype({"eq7_workers": "Float64"}).to_parquet(buf, index=False)
        files.append((paths["parquet"], buf.getvalue()))
    else:
        del paths["parquet"]
    write_files(files, force)
    return paths


# ---- several models sharing an inventory (planner.capacity.multi) ----------------------------------

#: Columns of ``joint.csv``: one row per joint point and model, then one ``total`` row per joint point.
JOINT_COLUMNS = ("point", "model", "rate", "fleet", "gpus", "usd_per_hour", "met", "source", "repairs",
                 "plan_fleet", "plan_usd_per_hour", "plan_bound_usd_per_hour", "plan_status", "best_single",
                 "best_single_usd_per_hour", "alone", "alone_usd_per_hour", "alone_fits_inventory", "p_ttft_s",
                 "p_tpot_s", "attainment", "criterion", "note")

#: The files `write_multi_outputs` writes at the top of the output directory (each model's own report
#: files, `REPORT_FILES`, go into its sub-directory).
MULTI_REPORT_FILES = {"report": "report.html", "joint": "joint.csv"}


def joint_frame(answers: list[JointAnswer]) -> pd.DataFrame:
    """``joint.csv`` (`JOINT_COLUMNS`)."""
    rows = []
    for j in answers:
        for s in j.models:
            rows.append({"point": j.index + 1, "model": s.model, "rate": s.rate, "fleet": s.fleet(),
                         "gpus": _gpu_text(s.gpus), "usd_per_hour": s.usd_per_hour, "met": s.met, "source": s.source,
                         "repairs": s.repairs, "plan_fleet": _fleet_text(s.plan_counts),
                         "plan_usd_per_hour": s.plan_usd_per_hour, "plan_bound_usd_per_hour": None,
                         "plan_status": j.plan_status, "best_single": s.best_single,
                         "best_single_usd_per_hour": s.best_single_usd_per_hour, "alone": s.alone,
                         "alone_usd_per_hour": s.alone_usd_per_hour, "alone_fits_inventory": None,
                         "p_ttft_s": s.p_ttft_s, "p_tpot_s": s.p_tpot_s, "attainment": s.attainment,
                         "criterion": s.criterion, "note": s.note})
        rows.append({"point": j.index + 1, "model": "total", "rate": None, "fleet": None, "gpus": _gpu_text(j.gpus),
                     "usd_per_hour": j.usd_per_hour, "met": j.met, "source": None, "repairs": None,
                     "plan_fleet": None, "plan_usd_per_hour": j.plan_usd_per_hour,
                     "plan_bound_usd_per_hour": j.plan_bound_usd_per_hour, "plan_status": j.plan_status,
                     "best_single": _gpu_text(j.best_singles_gpus),
                     "best_single_usd_per_hour": j.best_singles_usd_per_hour, "alone": _gpu_text(j.alone_gpus),
                     "alone_usd_per_hour": j.alone_usd_per_hour, "alone_fits_inventory": j.alone_fit,
                     "p_ttft_s": None, "p_tpot_s": None, "attainment": None, "criterion": None, "note": j.note})
    return pd.DataFrame(rows, columns=list(JOINT_COLUMNS))


def plot_joint(result: MultiCapacityResult) -> str:
    """The joint fleet's $/h per joint point beside the models planned alone and the best singles summed."""
    fig, ax = plt.subplots(figsize=(9, 4.2))
    done = [j for j in result.joint if j.models]
    xs = [j.index + 1 for j in done]
    ax.plot(xs, [j.usd_per_hour for j in done], "s-", color="black", linewidth=2, label="joint fleet (simulated)")
    ax.plot(xs, [j.alone_usd_per_hour for j in done], "o--", color="tab:red",
            label="each model planned alone (hollow: overdraws the inventory)")
    for j in done:
        if not j.alone_fit:
            ax.plot([j.index + 1], [j.alone_usd_per_hour], "o", color="white", markeredgecolor="tab:red", markersize=9)
    ax.plot(xs, [j.best_singles_usd_per_hour for j in done], "v:", color="tab:blue",
            label="best single configurations summed (no inventory)")
    ax.set_xticks(xs, [j.rate_label().replace(", ", "\n") for j in done], fontsize=7)
    ax.set_xlabel("joint point (each model's rate, req/s)")
    ax.set_ylabel("US$ per hour")
    ax.set_title("Fleet cost of every model together per joint point (each under its own cost models)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    return _png(fig)


def render_multi_html(result: MultiCapacityResult) -> str:
    """The top-level report.html: the models, the joint fleets and a link to each model's own report."""
    s = result.scenario
    parts = [_page_head(s.name, f"Capacity plan: {html.escape(s.name)} ({len(s.models)} models, shared GPUs)")]
    inv = _inventory_text({g.spec.name: g.available for g in s.gpus}).removeprefix("; ")
    parts.append("<p class='sub'>GPU types: " + html.escape(", ".join(
        f"{g.spec.name} ${g.spec.price_per_hour:g}/GPU-h" for g in s.gpus)) + (f" · {html.escape(inv)}" if inv else
                                                                              " · no inventory limit") + "</p>")
    parts.append(_answer_box([j.line() for j in result.joint]))
    parts.append(_failures(result.failures))
    parts.append("<h2>Models</h2><ul>")
    for scen in s.models:
        sub = model_dir_name(scen.model.name)
        parts.append(f"<li><a href='{html.escape(sub)}/report.html'>{html.escape(scen.model.name)}</a>: "
                     f"{html.escape(scen.criterion_label)} · workload {html.escape(scen.workload_label)} · rates "
                     f"{', '.join(f'{r:g}' for r in scen.rates)} req/s (its sweep, points and own mixed fleets: "
                     f"{html.escape(sub)}/)</li>")
    parts.append("</ul>")
    if any(j.models for j in result.joint):
        parts.append("<h2>Joint mixed fleet per point (every model, shared inventory)</h2>")
        parts.append(f"<img alt='joint cost per point' src='{plot_joint(result)}'>")
        frame = joint_frame(result.joint)
        frame["met"] = frame["met"].map({True: "yes", False: "NO"})
        parts.append(_table(frame, [("point", "point"), ("model", "model"), ("rate", "req/s"), ("fleet", "fleet (workers)"),
                                    ("gpus", "GPUs"), ("usd_per_hour", "$/h"), ("met", "meets (simulated)"),
                                    ("source", "from"), ("plan_fleet", "MILP plan"),
                                    ("best_single", "best single"), ("best_single_usd_per_hour", "best single $/h"),
                                    ("alone", "planned alone"), ("alone_usd_per_hour", "alone $/h"),
                                    ("alone_fits_inventory", "alone fits inventory")]))
    parts.append("<p class='small'>Per joint point: one request-class MILP over every model (one class per model at "
                 "its rate; each model's configurations with its measured per-worker rate μ = rate / N_c; GPUs per "
                 "type within the shared inventory); each model's sub-fleet is simulated on its own stream (workers "
                 "are not shared between models) and repaired within the inventory the other models leave "
                 "(planner.capacity.multi). 'Planned alone' is each model's own mixed fleet with the whole inventory: "
                 "side by side they can overdraw it. Every number is relative to each model's cost models (see its "
                 "report).</p>")
    parts.append(_page_foot(s.source))
    return "".join(parts)


def check_multi_report_files(multi: MultiScenario, out_dir: Path, force: bool) -> None:
    """Before the sweep: one line if ``out_dir`` or a model's sub-directory holds report files and not ``force``."""
    _refuse_earlier_files(out_dir, [name for name in MULTI_REPORT_FILES.values() if os.path.lexists(out_dir / name)],
                          force)
    for scen in multi.models:
        sub = out_dir / model_dir_name(scen.model.name)
        if sub.exists() and not sub.is_dir():
            raise PlannerError(f"--report {sub}: is a file; each model's results go into a sub-directory of that name")
        if sub.is_dir():
            check_report_files(sub, force)


def write_multi_outputs(result: MultiCapacityResult, out_dir: Path, force: bool = False) -> dict[str, Path]:
    """Each model's report files into its sub-directory, then report.html and joint.csv at the top."""
    paths: dict[str, Path] = {}
    for res in result.results:
        sub = out_dir / model_dir_name(res.scenario.model.name)
        for key, path in write_outputs(res, sub, force).items():
            paths[f"{res.scenario.model.name}:{key}"] = path
    top = {key: out_dir / name for key, name in MULTI_REPORT_FILES.items()}
    write_files([(top["joint"], joint_frame(result.joint).to_csv(index=False)),
                 (top["report"], render_multi_html(result))], force)
    return {**top, **paths}
