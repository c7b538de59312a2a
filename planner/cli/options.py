"""The shared run options of a command, declared once: `RunArgs`, the `shared` marker and `run_command`.

A command marks where the shared options stand in its signature (and so in its ``--help``) with a parameter
whose default is ``shared(RUN, RESULT)`` (names of `SHARED_OPTIONS`, in order); `run_command` puts the typer
parameters of those options (`planner.cli.common`: ``SolverOption``, ``TimeLimitOption`` ...; same name, help
and default on every command) in that place, runs the checks every run command makes before any work and
passes one frozen `RunArgs` to the command body in the marker parameter::

    @run_command
    def solve_x_cmd(instance: Path = typer.Argument(...), run: RunArgs = shared(RUN, RESULT)) -> None:
        problem = load(instance)
        result = solve(problem, run.options)
        run.emit_result(instance, problem.name, result, show, cost_models=..., caveats=...)

Where a command's shared options are not one run of its ``--help`` (``solve batching``: its own options stand
between ``--seed`` and ``--json``), it has several marker parameters; every one receives the same `RunArgs`
(the body uses one, by convention ``run``).  An option a command does not list is not on its command line
and holds its `RunArgs` default (e.g. ``simulate batching`` runs no solver: no ``--solver``).

The checks, in this order, before the body runs (`start_run`): a known ``--solver`` (when listed),
``--time-limit`` and ``--threads`` positive (when listed), ``--out`` writable without overwriting a file unless
``--force`` (when listed); then the clock ``--time-limit`` counts from is read (`RunArgs.started`): reading the
input is part of the run.  A body that imports its solver modules first (seconds, for the MILP stacks) reads
the clock again after them with `RunArgs.start_clock`, so that module imports do not count.  ``--seed`` is
checked by its own option callback (non-negative).  ``run_command(check=f)`` runs ``f(run)`` before these
checks: a command's own stricter rule for a shared option (``compare all``: a finite --time-limit).

Why a decorator that rewrites the signature: typer builds a command from the parameters of its callback and
has no parameter groups, so the shared parameters must be in the signature typer reads.  `run_command` sets
``__signature__`` and ``__annotations__`` of a wrapper (typer 0.15 to 0.29 read both, through
`inspect.signature` and `typing.get_type_hints`); annotations are resolved in the command's module first, so
``from __future__ import annotations`` modules work.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from planner.cli import common

if TYPE_CHECKING:
    from planner.core.contract import RunOptions
    from planner.core.result import Result

#: Each shared option by its name in `shared`: (parameter name, annotation of `planner.cli.common`, default).
SHARED_OPTIONS: dict[str, tuple[str, Any, Any]] = {
    "solver": ("solver", common.SolverOption, "highs"),
    "time_limit": ("time_limit", common.TimeLimitOption, common.TIME_LIMIT_S),
    "threads": ("threads", common.ThreadsOption, None),
    "seed": ("seed", common.SeedOption, 0),
    "json": ("json_out", common.JsonOption, False),
    "out": ("output", common.OutOption, None),
    "force": ("force", common.ForceOption, False),
    "verbose": ("verbose", common.VerboseOption, False),
}


@dataclass(frozen=True)
class RunArgs:
    """The shared options of one command run (defaults for the options the command does not take), and the
    clock reading its ``--time-limit`` counts from."""

    solver: str = "highs"
    time_limit: float | None = None
    threads: int | None = None
    seed: int = 0
    json_out: bool = False
    output: Path | None = None
    force: bool = False
    verbose: bool = False
    #: `time.perf_counter` after the shared checks: where the run (reading the input included) starts.
    started: float = 0.0

    def start_clock(self) -> RunArgs:
        """This run with its clock read now: a command that imports its solver modules in its body (they take
        seconds to import) calls it after those imports, so that --time-limit counts the run, not the imports."""
        import dataclasses  # noqa: PLC0415
        import time  # noqa: PLC0415

        return dataclasses.replace(self, started=time.perf_counter())

    @property
    def options(self) -> RunOptions:
        """The family contract's `RunOptions` (solver, time limit, threads, seed)."""
        from planner.core.contract import RunOptions  # noqa: PLC0415 (keeps `planner --help` fast)

        return RunOptions(solver=self.solver, time_limit=self.time_limit, threads=self.threads, seed=self.seed)

    def emit(self, payload: dict, *, show: Callable[[], None] | None = None, failed: bool = False) -> None:
        """`planner.cli.common.emit` with this run's ``--json``, ``--out`` and ``--force``."""
        common.emit(payload, json_out=self.json_out, output=self.output, force=self.force, show=show, failed=failed)

    def emit_result(self, instance: Path, name: str, result: Result, show: Callable[[], None], *,
                    cost_models: Sequence[Any], caveats: list[str], exit_on_error: bool = True,
                    **fields: Any) -> None:
        """The end of a command with one `Result`: the JSON object ``instance``, ``name``, the result's
        fields, ``fields``, ``cost_model_caveats`` (``caveats``); on the terminal ``show()`` and then the caveats
        line of ``cost_models`` (`common.print_cost_caveats`), not after a solve that could not run
        (`SolveStatus.ERROR`), which exits with code 1 after its output unless ``exit_on_error`` is false."""
        from planner.solver import SolveStatus  # noqa: PLC0415

        errored = result.status == SolveStatus.ERROR

        def shown() -> None:
            show()
            if not errored:
                common.print_cost_caveats(*cost_models)

        payload = {"instance": str(instance), "name": name, **result.to_dict(), **fields, "cost_model_caveats": caveats}
        self.emit(payload, show=shown, failed=errored and exit_on_error)


@dataclass(frozen=True)
class Shared:
    """Marker default of a command parameter: the shared options (names of `SHARED_OPTIONS`) standing there."""

    names: tuple[str, ...]


#: The run options of a command that runs a solver, and the result options of a command with a result
#: (docs/cli.md), in their usual ``--help`` order: ``shared(RUN, RESULT)``.
RUN = "solver time_limit threads seed"
RESULT = "json out force"


def shared(*names: str) -> Any:
    """The marker of the shared options ``names`` (space-separated names of `SHARED_OPTIONS`, in ``--help``
    order), e.g. ``shared(RUN, RESULT, "verbose")`` or ``shared("solver threads time_limit seed")``."""
    found = tuple(n for group in names for n in group.split())
    unknown = [n for n in found if n not in SHARED_OPTIONS]
    if unknown or not found:
        raise ValueError(f"shared(): unknown option name(s) {unknown} (known: {', '.join(SHARED_OPTIONS)})")
    return Shared(found)


F = TypeVar("F", bound=Callable[..., Any])


def run_command(fn: F | None = None, *, check: Callable[[RunArgs], None] | None = None) -> Any:
    """The command ``fn`` with its `shared` markers replaced by the shared options' typer parameters (module
    docstring); the body gets one `RunArgs`, after the shared checks.  ``check(run)``, when given, runs first:
    a command's own stricter rule for a shared option (its own one line)."""
    if fn is None:
        return functools.partial(run_command, check=check)
    signature = inspect.signature(fn, eval_str=True)
    params, markers, taken = _expand(fn.__name__, signature)
    shared_args = {SHARED_OPTIONS[name][0] for name in taken}

    @functools.wraps(fn)
    def command(**kwargs: Any) -> Any:
        run = RunArgs(**{arg: kwargs.pop(arg) for arg in list(kwargs) if arg in shared_args})
        if check is not None:
            check(run)
        run = start(run, taken)
        return fn(**kwargs, **dict.fromkeys(markers, run))

    command.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
    command.__annotations__ = {p.name: p.annotation for p in params if p.annotation is not inspect.Parameter.empty}
    if signature.return_annotation is not inspect.Signature.empty:
        command.__annotations__["return"] = signature.return_annotation
    return command  # type: ignore[return-value]


def _expand(name: str, signature: inspect.Signature) -> tuple[list[inspect.Parameter], list[str], list[str]]:
    """The parameters of command ``name`` with each `shared` marker replaced by its options' parameters (all
    keyword-only: typer passes keywords), the names of the marker parameters and the shared options taken;
    a ValueError for a declaration typer would reject or misread."""
    params: list[inspect.Parameter] = []
    markers: list[str] = []
    taken: list[str] = []
    for param in signature.parameters.values():
        if not isinstance(param.default, Shared):
            params.append(param.replace(kind=inspect.Parameter.KEYWORD_ONLY))
            continue
        markers.append(param.name)
        for option in param.default.names:
            if option in taken:
                raise ValueError(f"{name}: shared option {option!r} listed twice")
            taken.append(option)
            arg, annotation, default = SHARED_OPTIONS[option]
            params.append(inspect.Parameter(arg, inspect.Parameter.KEYWORD_ONLY, default=default,
                                            annotation=annotation))
    if not markers:
        raise ValueError(f"{name}: no shared(...) parameter")
    names = [p.name for p in params]
    if len(set(names)) != len(names):
        raise ValueError(f"{name}: a parameter has the name of a shared option")
    return params, markers, taken


def start(run: RunArgs, taken: list[str] | tuple[str, ...]) -> RunArgs:
    """The shared checks of the options in ``taken`` (`common.start_run`), then ``run`` with its clock."""
    import dataclasses  # noqa: PLC0415

    started = common.start_run(solver=run.solver if "solver" in taken else None,
                               time_limit=run.time_limit if "time_limit" in taken else None,
                               threads=run.threads if "threads" in taken else None,
                               output=run.output if "out" in taken else None, force=run.force)
    return dataclasses.replace(run, started=started)
