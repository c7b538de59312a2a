"""Shared CLI pieces: consoles, one-line errors, JSON output, progress display."""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional, TypeVar

import typer
from rich.live import Live
from rich.table import Table
from rich.text import Text

from planner.core.outputs import check_output_dir, check_output_file, write_file, write_files  # noqa: F401 (re-exported)
from planner.errors import PlannerError

if TYPE_CHECKING:
    from planner.solver import ProgressEvent

SOLVER_HELP = ("MIP solver: highs (default, no license), cbc (bundled with PuLP, no license) or gurobi "
               "(size-limited pip license)")

# The options the commands share (docs/cli.md), declared once.  Use them as annotations with the default in
# the signature, e.g. ``solver: SolverOption = "highs"``, ``time_limit: TimeLimitOption = TIME_LIMIT_S``;
# tests/cli/test_cli_grammar.py checks that every command gives a shared option the same name, help and default.
#: The one default of --time-limit (seconds) on every command that runs a solver.
TIME_LIMIT_S = 60.0
SolverOption = Annotated[str, typer.Option(help=SOLVER_HELP)]
TimeLimitOption = Annotated[float, typer.Option(
    "--time-limit", help="seconds for the exact solve (heuristics, model build, solver), or for each one where a "
                         "command runs many (a re-solve, a heartbeat's MIP); the best plan and its bound are "
                         "returned when hit")]
ThreadsOption = Annotated[Optional[int], typer.Option(
    help="solver threads (default: the solver's; HiGHS: fixed for the process after the first solve)")]
VerboseOption = Annotated[bool, typer.Option("--verbose", help="show the solver log on stderr")]
ReportOption = Annotated[Optional[Path], typer.Option(
    "--report", help="folder for the report files (see the command's help); never overwritten without --force")]
ParallelOption = Annotated[Optional[int], typer.Option(
    "--parallel", help="parallel runs of the executor (default: the CPU count, or the Ray cluster's CPUs)")]
TraceFormatOption = Annotated[str, typer.Option("--trace-format", help="format of --trace: azure, mooncake or sharegpt")]
#: --tpot on every command that takes an SLO (one quantity: the Aladdin paper calls it ATGT).
TPOT_HELP = "TPOT SLO (s): mean gap between a request's output tokens (the Aladdin paper's ATGT)"
# The worker and SLO options of the commands that build one worker configuration and a placement from flags
# (generate placement, simulate replay, plan scaling, simulate fleet); the defaults stay in the signatures.
ModelOption = Annotated[str, typer.Option("--model", help="model (catalog name)")]
GPUOption = Annotated[str, typer.Option("--gpu", help="GPU type (catalog name)")]
WorkerTPOption = Annotated[int, typer.Option("--tp", help="GPUs per worker (tensor-parallel degree)")]
AladdinFileOption = Annotated[Optional[Path], typer.Option(
    "--cost-model", help="Aladdin cost-model file (default: models/aladdin/<model>__<gpu>__tp<g>.yaml)")]
TTFTOption = Annotated[float, typer.Option("--ttft", help="TTFT SLO (s)")]
TPOTOption = Annotated[float, typer.Option("--tpot", help=TPOT_HELP)]
ModeOption = Annotated[str, typer.Option(
    "--mode", help="placement mode: colocated (prefill and decode on one worker) or decode_only")]
StrictnessOption = Annotated[float, typer.Option(
    "--strictness", help="strictness knob λ in [0, 1] of Aladdin's decode SLO rows (0.5 meets the TPOT on average)")]
KVHeadroomOption = Annotated[float, typer.Option(
    "--kv-headroom", help="θ in (0, 1]: fraction of the KV cache a plan may fill")]


def _check_seed(value: int | None) -> int | None:
    """--seed feeds numpy's generators, which take non-negative integers only: one clear line otherwise."""
    if value is not None and value < 0:
        from planner.errors import PlannerError

        raise PlannerError(f"--seed must be a non-negative integer, got {value}")
    return value


SeedOption = Annotated[int, typer.Option(help="random seed: the same inputs and seed give the same result",
                                         callback=_check_seed)]
JsonOption = Annotated[bool, typer.Option("--json", help="print one JSON object instead of tables")]
OutOption = Annotated[Optional[Path], typer.Option(
    "--out", help="also write the JSON object --json prints to this file")]
ForceOption = Annotated[bool, typer.Option("--force", help="overwrite the files this command writes if they exist")]


def _flags_show_no_value_type() -> None:
    """A flag takes no value, so ``--help`` shows no value type for it.

    typer 0.29 prints a value type after every option (``--time-limit <float>``) and applies it to flags
    too, which reads as if ``--json``, ``--force`` and typer's own ``--help`` took a boolean argument
    (``--help <bool>``).  Its `TyperOption.display_type_rich` is wrapped to return nothing for a flag;
    versions without that method (typer < 0.29) show no value types at all and are left alone."""
    from typer.core import TyperOption  # noqa: PLC0415

    shown = getattr(TyperOption, "display_type_rich", None)
    if shown is None or getattr(shown, "_planner_flags_hidden", False):
        return

    def display_type_rich(self: Any, ctx: Any) -> Any:
        return None if getattr(self, "is_flag", False) else shown(self, ctx)

    display_type_rich._planner_flags_hidden = True  # type: ignore[attr-defined]
    TyperOption.display_type_rich = display_type_rich  # type: ignore[method-assign]


_flags_show_no_value_type()


@dataclass(frozen=True)
class CommandGroups:
    """The typer command groups family CLI modules register their commands on."""

    app: Any  # planner
    solve: Any  # planner solve ...
    compare: Any  # planner compare ...
    generate: Any  # planner generate ...
    simulate: Any  # planner simulate ...
    plan: Any  # planner plan ...


from planner.core.consoles import err, out  # noqa: E402,F401 (the two consoles, shared with the sweep engine)


_CONTROL = ({c: f"\\x{c:02x}" for c in (*range(0x20), 0x7F, 0x85) if c != 0x09}
            | {0x0A: "\\n", 0x0D: "\\r", 0x2028: "\\u2028", 0x2029: "\\u2029"})


def one_line(text: str) -> str:
    """``text`` with line breaks and other control characters written as escapes (``\\n``, ``\\x1b``),
    so that an error message quoting user text stays one line on the terminal."""
    return text.translate(_CONTROL)


def _clean(value: Any) -> Any:
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        try:
            return _clean(value.item())
        except (TypeError, ValueError):
            return value
    return value


def to_json(data: Any) -> str:
    return json.dumps(_clean(data), indent=2, default=str)


def check_out(path: Path | None, force: bool, option: str = "--out") -> None:
    """Before any solving: one line unless ``path`` (if given) can be written (`planner.core.outputs`)."""
    check_output_file(path, force, option)


def write_output(path: Path | None, text: str, force: bool) -> None:
    """Write ``text`` to ``path`` atomically; never overwrite an existing file without ``force``.

    The command calls `check_output_file` (the same checks) before it solves; this final write cannot
    overwrite a file that appeared meanwhile (`planner.core.outputs`)."""
    if path is None:
        return
    write_file(path, text, force)


def cost_model_caveats(cost: Any) -> list[str]:
    """The caveats a cost-model file states, as ``"code: detail"`` lines ([] when it states none).

    Every output built on one cost model carries them: ``--json`` as the top-level list
    ``cost_model_caveats``, the terminal as one line after the result (`print_cost_caveats`)."""
    from planner.costmodels.models import cost_model_caveats as caveats  # noqa: PLC0415

    return caveats(cost)


def cost_model_label(cost: Any) -> str:
    """``<model> / <gpu> / TP <g>`` for a file fitted to one configuration, else the model's name (InferMax sets)."""
    model, gpu, degree = (getattr(cost, a, None) for a in ("model", "gpu", "tensor_parallel"))
    if model and gpu and degree:
        return f"{model} / {gpu} / TP {degree}"
    return str(getattr(cost, "name", None) or getattr(cost, "kind", "cost model"))


def several_cost_model_caveats(models: Any) -> list[str]:
    """Caveats of an output built on several cost models (one per configuration): ``"<label>: code: detail"``
    lines, each model once (by `cost_model_label`, in the order given); [] when none states any."""
    lines: list[str] = []
    seen: set[str] = set()
    for cost in models:
        label = cost_model_label(cost)
        if label in seen:
            continue
        seen.add(label)
        lines += [f"{label}: {line}" for line in cost_model_caveats(cost)]
    return lines


def cost_models_of(problem: Any, result: Any = None) -> list[Any]:
    """The cost models a family problem's results are built on, in the order the problem names them:

    * placement, batching: the instance's model (Aladdin / InferMax); priority: its bilinear model (none
      when every job gives its own latencies);
    * a deployment cluster: the p1..p8 model (static estimate) or Aladdin model (continuous estimate) of
      every (GPU, TP) it enumerates (with its ``result``: of the (GPU, TP) with a throughput estimate, i.e.
      not refused by the memory check or the SLOs; with a TP plan: of the degrees it chose); a cost plan: the
      Aladdin models behind its estimated capacities (none for capacities the file gives); request classes:
      none (the file gives every capacity);
    * routing: every instance's p1..p8 model;
    * queueing: the Aladdin model of every (group model, instance GPU, TP) whose work the estimator
      estimated, read through the estimator's own cached look-up (the very file its numbers came from).
    """
    of_kind = _COST_MODELS_OF.get(type(problem).__name__)
    return [] if of_kind is None else of_kind(problem, result)  # request classes: the file gives every capacity


def _cluster_cost_models(problem: Any, result: Any) -> list[Any]:
    """A cluster's p1..p8 (static) or Aladdin (continuous) models: of the (GPU, TP) with an estimate in an
    enumeration ``result``, of the chosen degrees in a TP plan, else all."""
    from planner.deployment.problem import model_key  # noqa: PLC0415

    models = problem.hetero_models if problem.estimator == "static" else problem.aladdin_models
    solution = getattr(result, "solution", None)
    if getattr(solution, "estimates", None) is not None:
        used = {model_key(e.gpu, e.tensor_parallel) for e in solution.estimates if e.feasible}
    elif getattr(solution, "degrees", None) is not None:  # a TP plan: the (GPU, TP) of each group's degree
        used = {model_key(g.gpu.name, t) for g, t in zip(problem.machines, solution.degrees)}
    else:
        return list(models.values())
    return [cost for key, cost in models.items() if key in used]


def _queueing_cost_models(problem: Any, result: Any) -> list[Any]:
    """The Aladdin model of every (group model, GPU, TP) the estimator estimated, by its own cached look-up."""
    from planner.queueing.estimator import _cost_model  # noqa: PLC0415

    models, seen = [], set()
    for t, typ in enumerate(problem.types):
        for i, group in enumerate(problem.groups):
            key = (group.model, typ.gpu, typ.tensor_parallel)
            if key in seen or not math.isfinite(float(problem.work_s[t, i])):
                continue
            seen.add(key)
            cost = _cost_model(*key, None)
            if cost is not None:
                models.append(cost)
    return models


#: `cost_models_of` by problem type name.
_COST_MODELS_OF = {
    "BatchingProblem": lambda problem, result: [_published_file(problem.cost) or problem.cost],
    "PlacementProblem": lambda problem, result: [problem.cost],
    "PriorityProblem": lambda problem, result: [] if problem.cost_model is None else [problem.cost_model],
    "ClusterProblem": _cluster_cost_models,
    "CostPlanProblem": lambda problem, result: [o.cost_model for o in problem.options if o.cost_model is not None],
    "RoutingProblem": lambda problem, result: [inst.cost for inst in problem.instances],
    "QueueingProblem": _queueing_cost_models,
}


def _published_file(cost: Any) -> Any:
    """The shipped ``models/infermax/published-*.yaml`` file holding exactly the coefficients of a built-in
    InferMax set (``cost_model: infermax-7b`` in an instance), so its stated error and caveats are shown;
    None for any other model, or when the file is absent or its coefficients differ."""
    from planner.batching.costmodel import COEFFICIENTS, PUBLISHED, load_infermax_model  # noqa: PLC0415
    from planner.costmodels.files import default_models_dir  # noqa: PLC0415

    if not any(cost is built_in for built_in in PUBLISHED.values()):  # a file or mapping states its own caveats
        return None
    path = default_models_dir() / "infermax" / f"published-{cost.name.removeprefix('infermax-')}.yaml"
    try:
        shipped = load_infermax_model(path)
    except Exception:  # noqa: BLE001 — no file (or an unreadable one): nothing more to show
        return None
    same = shipped.n_layers == cost.n_layers and all(getattr(shipped, c) == getattr(cost, c) for c in COEFFICIENTS)
    return shipped if same else None


def instance_cost_model_caveats(family: str, path: Path) -> list[str]:
    """``"<model> / <gpu> / TP <g>: code: detail"`` lines of the cost models an instance file of ``family``
    (`planner.harness` names) is solved under, e.g. for a per-instance field of `planner compare all`."""
    from planner.harness import available_families  # noqa: PLC0415

    return several_cost_model_caveats(cost_models_of(available_families()[family].load(path)))


def print_cost_caveats(*models: Any) -> None:
    """After a successful result: one line per cost model that states caveats,
    ``cost model <model> / <gpu> / TP <g> caveats: code: detail; …`` (nothing when none does)."""
    seen: set[str] = set()
    for cost in models:
        label = cost_model_label(cost)
        lines = cost_model_caveats(cost)
        if lines and label not in seen:
            seen.add(label)
            out.print(f"cost model {label} caveats: " + "; ".join(lines))


def check_run_options(time_limit: float | None = None, threads: int | None = None) -> None:
    """The same one-line errors for --time-limit and --threads in every solve / compare / simulate command."""
    if time_limit is not None and not time_limit > 0:  # also NaN
        raise PlannerError(f"--time-limit must be positive, got {time_limit}")
    if threads is not None and threads < 1:
        raise PlannerError(f"--threads must be at least 1, got {threads}")


def start_run(*, solver: str | None = None, time_limit: float | None = None, threads: int | None = None,
              output: Path | None = None, force: bool = False) -> float:
    """The checks every solve / compare / simulate / plan command makes before it reads its input: a known
    --solver (when the command has one), a positive --time-limit and --threads, and an --out that can be
    written.  Returns the clock reading its --time-limit counts from (reading the input is part of the run)."""
    if solver is not None:
        from planner.solver import check_solver_name  # noqa: PLC0415 (keeps `planner --help` fast)

        check_solver_name(solver)
    check_run_options(time_limit, threads)
    check_out(output, force)
    return time.perf_counter()


def run_progress(phase: str | None = None, *, verbose: bool = False, unit: str = "") -> "SolveProgress":
    """The progress display of a run (`SolveProgress`): phase, elapsed time, incumbent and bound on stderr,
    only when stderr is a terminal (stdout carries the result alone, --json included), from the first
    second on, and not with --verbose (the solver's log is the progress then)."""
    progress = SolveProgress(enabled=not verbose, unit=unit)
    if phase is not None:
        progress.phase(phase)
    return progress


def emit(payload: dict, *, json_out: bool, output: Path | None, force: bool,
         show: Any = None, failed: bool = False) -> None:
    """The end of every result command: the JSON object ``payload`` is written to --out (if given) and
    printed with --json; otherwise ``show()`` prints the tables.  ``failed`` (the requested solver could not
    run) exits with code 1 after the output, so a script still gets the object that says why."""
    text = to_json(payload)
    write_output(output, text, force)
    if json_out:
        print(text)
    elif show is not None:
        show()
    if failed:
        raise typer.Exit(1)


def fmt(value: float | None, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if math.isinf(value):
        return str(value)
    if float(value).is_integer() and abs(value) < 1e15:
        return f"{int(value)}"
    return f"{value:.{digits}g}"


def fmt_gap(gap: float | None) -> str:
    """A relative gap as a percentage; "-" when unknown (None or NaN).  Below 0.1 % four decimals, so a
    gap is never shown as 0.00 % or 0.01 % next to the 0.01 % optimality tolerance when it is not."""
    if gap is None or math.isnan(gap):
        return "-"
    return f"{100 * gap:.2f}%" if gap == 0 or abs(gap) >= 1e-3 else f"{100 * gap:.4f}%"


def summary_table(title: str) -> Table:
    """The two-column summary table of one result (bold names, values), titled ``title``."""
    t = Table(title=title, show_header=False, title_justify="left")
    t.add_column("", style="bold")
    t.add_column("")
    return t


def add_verdict_rows(t: Table, result: Any, objective: str = "objective", digits: int = 3) -> None:
    """The last rows of a summary table: the independent validator's verdict (``valid, <objective> recomputed =
    <value>`` or its violations) and the result's note, each when there is one."""
    if result.validation is not None:
        v = result.validation
        t.add_row("validator", f"valid, {objective} recomputed = {fmt(v.objective, digits)}" if v.feasible
                  else v.summary())
    if result.message:
        t.add_row("note", result.message)


_Line = TypeVar("_Line", bound="LiveLine")


class LiveLine:
    """A line on stderr that a rich `Live` display redraws four times a second from `_render` (so elapsed
    times keep moving while nothing is reported), only when ``enabled`` and stderr is a terminal; it
    disappears on `close` (or at the end of a ``with`` block).  A subclass sets the attributes its
    `_render` reads before calling ``super().__init__``: the display starts at once."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled and err.is_terminal
        self.live: Live | None = None
        if self.enabled:
            self.live = Live(console=err, transient=True, refresh_per_second=4, get_renderable=self._render)
            self.live.start()

    def _render(self) -> Text:
        return Text("")

    def close(self) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None

    def __enter__(self: _Line) -> _Line:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SolveProgress(LiveLine):
    """Shows phase, incumbent and bound on stderr once a solve has run for more than a second.

    The elapsed time keeps moving through phases that report nothing (presolve, LNS rounds); the line
    renders nothing during the first second and disappears when the solve ends (`LiveLine`).
    """

    def __init__(self, enabled: bool = True, unit: str = "") -> None:
        self.unit = unit
        self.start = time.perf_counter()
        self.phase_text = "starting"
        self.incumbent: float | None = None
        self.bound: float | None = None
        super().__init__(enabled)

    def _render(self) -> Text:
        elapsed = time.perf_counter() - self.start
        if elapsed < 1.0:
            return Text("")
        parts = [self.phase_text, f"{elapsed:5.1f}s"]
        if self.incumbent is not None:
            parts.append(f"incumbent {fmt(self.incumbent)}{self.unit}")
        if self.bound is not None:
            parts.append(f"bound {fmt(self.bound)}{self.unit}")
        return Text(" | ".join(parts), style="cyan")

    def phase(self, text: str) -> None:
        self.phase_text = text

    def __call__(self, event: ProgressEvent) -> None:
        if event.incumbent is not None:
            self.incumbent = event.incumbent
        if event.bound is not None:
            self.bound = math.ceil(event.bound - 1e-6) if self.unit == " workers" else event.bound


def debug_enabled() -> bool:
    return os.environ.get("PLANNER_DEBUG", "") not in ("", "0")
