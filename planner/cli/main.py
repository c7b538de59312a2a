"""Entry point of the `planner` command.

Every `PlannerError` (bad input, infeasible request, unavailable solver)
reaches the user as one line on stderr and exit code 2; a traceback is shown
only with ``PLANNER_DEBUG=1``.  Ctrl-C stops any command within about a second
(solver runs included) with the one line "interrupted" and exit code 130, and
leaves no partial output file.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from typing import NoReturn

import typer
from rich.markup import escape

from planner import __version__
from planner.cli import cost as cost_cli
from planner.cli import fit as fit_cli
from planner.cli import fleet as fleet_cli
from planner.cli import models as models_cli
from planner.cli import online as online_cli
from planner.cli import placement as placement_cli
from planner.cli import validate as validate_cli
from planner.cli import workload as workload_cli
from planner.cli.common import CommandGroups, debug_enabled, err, one_line
from planner.core.interrupt import requested as interrupt_requested
from planner.core.interrupt import sigint_handler
from planner.core.stdio import reserve_stdout

app = typer.Typer(
    name="planner",
    help="Offline planning of LLM inference serving with exact optimization and certified bounds.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
solve_app = typer.Typer(help="Solve a planning problem to proven optimality (or report the gap).", no_args_is_help=True)
compare_app = typer.Typer(help="Compare every heuristic of a family against the exact optimum.", no_args_is_help=True)
generate_app = typer.Typer(help="Generate problem instances from real-trace length distributions.", no_args_is_help=True)
simulate_app = typer.Typer(help="Run a method (scheduler, policy, router, online heuristic) over time on an instance or a trace.",
                           no_args_is_help=True)
plan_app = typer.Typer(help="Sizing answers: the best TP degree per GPU, workers needed per arrival rate.",
                       no_args_is_help=True)

app.add_typer(solve_app, name="solve")
app.add_typer(compare_app, name="compare")
app.add_typer(generate_app, name="generate")
app.add_typer(simulate_app, name="simulate")
app.add_typer(plan_app, name="plan")
app.add_typer(workload_cli.app, name="workload")

solve_app.command("placement")(placement_cli.solve_placement_cmd)
compare_app.command("placement")(placement_cli.compare_placement_cmd)
generate_app.command("placement")(placement_cli.generate_placement_cmd)
plan_app.command("worker-config")(placement_cli.worker_config_cmd)
simulate_app.command("replay")(online_cli.replay_cmd)
plan_app.command("scaling")(online_cli.scaling_cmd)
simulate_app.command("fleet")(fleet_cli.simulate_fleet_cmd)

GROUPS = CommandGroups(app=app, solve=solve_app, compare=compare_app, generate=generate_app,
                       simulate=simulate_app, plan=plan_app)
# Each family's CLI module adds its own commands to the shared groups.
for _family_cli in ("batching", "priority", "queueing", "deployment", "capacity"):
    __import__(f"planner.cli.{_family_cli}", fromlist=["register"]).register(GROUPS)
# after `planner capacity` (the headline command, registered above), so `planner --help` lists it first
app.command("validate")(validate_cli.validate_cmd)
app.command("fit")(fit_cli.fit_cmd)
app.command("models")(models_cli.models_cmd)
app.add_typer(cost_cli.app, name="cost")


@app.command("version")
def version_cmd() -> None:
    """Print the version."""
    print(__version__)


#: Commands of an earlier grammar and where they are now (docs/cli.md).  They are not aliases: typing one
#: gives click's one-line "No such command" error, with the new spelling named.
MOVED = {"planner worker-config": "planner plan worker-config", "planner replay": "planner simulate replay",
         "planner scaling": "planner plan scaling", "planner plan cost": "planner solve deployment"}


def _moved(ctx, message: str) -> str | None:  # noqa: ANN001
    """``No such command 'replay'; it is now 'planner simulate replay' (see …)`` when ``message`` refuses a
    command that moved, else None."""
    import re

    found = re.match(r"No such command '([^']+)'", message)
    if ctx is None or found is None:
        return None
    root = ctx.find_root()
    path = "planner" + ctx.command_path[len(root.command_path):]  # `python -m planner` spells its root differently
    new = MOVED.get(f"{path} {found.group(1)}")
    return None if new is None else f"No such command '{found.group(1)}'; it is now '{new}' (see '{new} --help')"


def _interrupted() -> NoReturn:
    """Ctrl-C: one line "interrupted" on stderr and exit code 130, at once.

    Every ``finally`` on the way up has run (partial output files and temporary files removed,
    worker processes ended); the interpreter's own teardown (freeing every module, ~0.5 s here)
    and the atexit handlers are skipped, as is the wait for a native solve that ignored its
    interrupt (`planner.solver.highs_backend`).  Ray processes this command started are ended by
    their watchdog (`planner.sweep.engine`).
    """
    with _EXIT_LOCK:  # the main thread and the interrupt watchdog may both get here
        with contextlib.suppress(Exception):
            err.print("interrupted")
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(130)


_EXIT_LOCK = threading.Lock()


def main() -> None:
    reserve_stdout()  # from here on, native libraries' prints (solver banners, license notices) go to stderr
    with sigint_handler(on_timeout=_interrupted):  # Ctrl-C: planner.core.interrupt
        _run()


def _run() -> None:
    from planner.errors import PlannerError

    try:
        code = app(standalone_mode=False)  # click returns a typer.Exit's code instead of raising it
        if code == 130 or interrupt_requested():  # typer turns a KeyboardInterrupt into Exit(130)
            _interrupted()
        if isinstance(code, int) and code != 0:
            sys.exit(code)
    except PlannerError as exc:
        if interrupt_requested():  # an error on the way out of an interrupted command
            _interrupted()
        err.print(f"[bold red]error:[/bold red] {escape(one_line(str(exc)))}", markup=True, highlight=False)
        if debug_enabled():
            raise
        sys.exit(2)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        err.print("aborted")
        sys.exit(130)
    except KeyboardInterrupt:
        _interrupted()
    except Exception as exc:  # usage errors (typer's vendored click) and bugs: still one line
        if interrupt_requested():
            _interrupted()
        if callable(getattr(exc, "show", None)) and isinstance(getattr(exc, "exit_code", None), int):
            if type(exc).__name__ == "NoArgsIsHelpError" or not callable(getattr(exc, "format_message", None)):
                exc.show()  # a bare group command: its help is the answer
            else:  # a bad option or argument: one line, not click's usage block
                ctx = getattr(exc, "ctx", None)
                hint = f" (see '{ctx.command_path} --help')" if ctx is not None and ctx.command_path else ""
                text = _moved(ctx, exc.format_message()) or exc.format_message() + hint
                err.print(f"[bold red]error:[/bold red] {escape(one_line(text))}", markup=True, highlight=False)
            sys.exit(exc.exit_code)
        if debug_enabled():
            raise
        err.print(f"[bold red]internal error:[/bold red] {escape(one_line(f'{type(exc).__name__}: {exc}'))} "
                  "(rerun with PLANNER_DEBUG=1 for a traceback)",
                  markup=True, highlight=False)
        sys.exit(1)


if __name__ == "__main__":
    main()
