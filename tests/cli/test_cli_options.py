"""`planner.cli.options`: the shared run options declared once and put in a command's signature by `run_command`.

Checked on toy typer apps (what typer reads from the rewritten signature, what the body receives, the checks made
before the body runs) and on the real command tree (every command with a run option takes it through
`run_command`, so no command repeats the shared parameter lines).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
import typer.main
from typer.core import TyperOption
from support import cli_commands
from typer.testing import CliRunner

from planner.cli import common
from planner.cli.options import RESULT, RUN, SHARED_OPTIONS, RunArgs, run_command, shared
from planner.errors import PlannerError

runner = CliRunner()


def _app(command) -> typer.Typer:  # noqa: ANN001
    app = typer.Typer()
    app.command("x")(command)
    app.command("unused")(lambda: None)  # two commands: typer keeps the name "x" on the command line
    return app


def _option_names(app: typer.Typer) -> list[str]:
    command = typer.main.get_command(app).commands["x"]
    return [p.opts[0] for p in command.params]


def test_the_markers_put_the_shared_options_where_they_stand_in_the_signature():
    @run_command
    def cmd(name: str = typer.Argument(...), run: RunArgs = shared("threads solver"),
            level: int = typer.Option(1, "--level"), _out: RunArgs = shared(RESULT)) -> None:
        """Doc."""

    assert _option_names(_app(cmd)) == ["name", "--threads", "--solver", "--level", "--json", "--out", "--force"]
    command = typer.main.get_command(_app(cmd)).commands["x"]
    solver = next(p for p in command.params if p.name == "solver")
    assert isinstance(solver, TyperOption) and solver.default == "highs" and solver.help == common.SOLVER_HELP
    assert command.help == "Doc."


def test_the_body_gets_one_run_with_the_values_given_and_the_clock_started():
    seen: list[tuple[RunArgs, RunArgs, int]] = []

    @run_command
    def cmd(run: RunArgs = shared(RUN), level: int = typer.Option(1, "--level"),
            _out: RunArgs = shared(RESULT, "verbose")) -> None:
        seen.append((run, _out, level))

    result = runner.invoke(_app(cmd), ["x", "--solver", "cbc", "--time-limit", "7", "--seed", "3", "--level", "2",
                                       "--json", "--verbose"])
    assert result.exit_code == 0, result.output
    run, other, level = seen[0]
    assert run is other and level == 2
    assert (run.solver, run.time_limit, run.threads, run.seed, run.json_out, run.output, run.force, run.verbose) == \
        ("cbc", 7.0, None, 3, True, None, False, True)
    assert run.started > 0
    assert (run.options.solver, run.options.time_limit, run.options.seed) == ("cbc", 7.0, 3)


def test_start_clock_reads_the_clock_again_and_keeps_the_options():
    first = RunArgs(solver="cbc", time_limit=3.0, started=1.0)
    again = first.start_clock()
    assert again.started > first.started and (again.solver, again.time_limit) == ("cbc", 3.0)
    assert first.started == 1.0  # frozen: the run the decorator made is unchanged


def test_an_option_the_command_does_not_list_is_not_on_its_command_line_and_holds_its_default():
    seen: list[RunArgs] = []

    @run_command
    def cmd(run: RunArgs = shared("json")) -> None:
        seen.append(run)

    assert _option_names(_app(cmd)) == ["--json"]
    assert runner.invoke(_app(cmd), ["x", "--time-limit", "5"]).exit_code != 0
    assert runner.invoke(_app(cmd), ["x"]).exit_code == 0
    assert seen[0].solver == "highs" and seen[0].time_limit is None and seen[0].output is None


@pytest.mark.parametrize("args, message", [
    (["--time-limit", "-1"], "--time-limit must be positive, got -1.0"),
    (["--time-limit", "nan"], "--time-limit must be positive, got nan"),
    (["--threads", "0"], "--threads must be at least 1, got 0"),
    (["--solver", "nope"], "nope"),
])
def test_the_shared_checks_run_before_the_body(args, message):
    ran: list[bool] = []

    @run_command
    def cmd(run: RunArgs = shared(RUN, RESULT)) -> None:
        ran.append(True)

    result = runner.invoke(_app(cmd), ["x", *args])
    assert isinstance(result.exception, PlannerError) and message in str(result.exception)
    assert ran == []


def test_out_is_checked_before_the_body_and_an_existing_file_needs_force(tmp_path: Path):
    ran: list[bool] = []
    existing = tmp_path / "x.json"
    existing.write_text("{}")

    @run_command
    def cmd(run: RunArgs = shared(RESULT)) -> None:
        ran.append(True)

    refused = runner.invoke(_app(cmd), ["x", "--out", str(existing)])
    assert isinstance(refused.exception, PlannerError) and "--force" in str(refused.exception) and ran == []
    assert runner.invoke(_app(cmd), ["x", "--out", str(existing), "--force"]).exit_code == 0 and ran == [True]
    assert existing.read_text() == "{}"  # the check writes nothing


def test_a_command_check_runs_before_the_shared_checks():
    calls: list[str] = []

    def check(run: RunArgs) -> None:
        calls.append("check")
        if run.time_limit == float("inf"):
            raise PlannerError("finite please")

    @run_command(check=check)
    def cmd(run: RunArgs = shared("time_limit")) -> None:
        calls.append("body")

    result = runner.invoke(_app(cmd), ["x", "--time-limit", "-1"])
    assert calls == ["check"] and "--time-limit must be positive" in str(result.exception)
    result = runner.invoke(_app(cmd), ["x", "--time-limit", "inf"])
    assert "finite please" in str(result.exception)
    assert runner.invoke(_app(cmd), ["x"]).exit_code == 0 and calls[-1] == "body"


def test_emit_writes_out_and_prints_json(tmp_path: Path, capsys):
    target = tmp_path / "o.json"
    RunArgs(json_out=True, output=target).emit({"a": 1}, show=lambda: print("table"))
    printed = capsys.readouterr().out
    assert '"a": 1' in printed and "table" not in printed and '"a": 1' in target.read_text()
    RunArgs().emit({"a": 2}, show=lambda: print("table"))
    assert capsys.readouterr().out == "table\n"
    with pytest.raises(typer.Exit):
        RunArgs().emit({"a": 3}, failed=True)


class _Caveated:
    """A cost model that states one caveat (what `common.print_cost_caveats` reads)."""

    model, gpu, tensor_parallel = "M", "G", 2


@pytest.mark.parametrize("status, exit_on_error, exits, caveats_shown", [
    ("optimal", True, False, True), ("error", True, True, False), ("error", False, False, False)])
def test_emit_result_shows_the_caveats_after_a_result_and_exits_1_when_the_solve_could_not_run(
        monkeypatch, capsys, status, exit_on_error, exits, caveats_shown):
    from planner.core.result import Result
    from planner.solver import SolveStatus

    monkeypatch.setattr(common, "cost_model_caveats", lambda cost: ["code: detail"])
    result = Result(family="f", method="m", solver="s", status=SolveStatus(status), objective=1.0, bound=1.0,
                    solve_seconds=0.0, solution=None)
    emitted = lambda: RunArgs().emit_result(Path("i.yaml"), "n", result, lambda: print("table"),  # noqa: E731
                                            cost_models=[_Caveated()], caveats=["x"], exit_on_error=exit_on_error)
    if exits:
        with pytest.raises(typer.Exit):
            emitted()
    else:
        emitted()
    shown = capsys.readouterr().out
    assert shown.startswith("table")
    assert ("cost model M / G / TP 2 caveats: code: detail" in shown) == caveats_shown


def test_emit_result_json_holds_the_instance_the_result_the_fields_and_the_caveats_last(tmp_path: Path):
    import json

    from planner.core.result import Result
    from planner.solver import SolveStatus

    target = tmp_path / "o.json"
    result = Result(family="f", method="m", solver="s", status=SolveStatus.OPTIMAL, objective=2.0, bound=2.0,
                    solve_seconds=0.0, solution=None)
    RunArgs(output=target).emit_result(Path("i.yaml"), "n", result, lambda: None, cost_models=[],
                                       caveats=["a: b"], evaluation={"k": 1})
    data = json.loads(target.read_text())
    assert (data["instance"], data["name"], data["objective"], data["evaluation"]) == ("i.yaml", "n", 2.0, {"k": 1})
    assert list(data)[-1] == "cost_model_caveats" and data["cost_model_caveats"] == ["a: b"]


def test_a_wrong_declaration_is_refused_when_the_module_is_imported():
    with pytest.raises(ValueError, match="unknown option"):
        shared("solver timelimit")
    with pytest.raises(ValueError, match="listed twice"):
        @run_command
        def twice(run: RunArgs = shared("seed"), _again: RunArgs = shared("seed json")) -> None: ...
    with pytest.raises(ValueError, match="no shared"):
        @run_command
        def none(level: int = typer.Option(1)) -> None: ...
    with pytest.raises(ValueError, match="name of a shared option"):
        @run_command
        def clash(seed: int = typer.Option(0), run: RunArgs = shared("seed")) -> None: ...


def test_every_command_with_a_run_option_takes_the_shared_options_through_run_command():
    """No command declares --out, --threads or --verbose itself (the lines `run_command` makes unnecessary)."""
    run_only = {"--out", "--threads", "--verbose"}
    problems = []
    for name, command in cli_commands().items():
        opts = {o for p in command.params for o in getattr(p, "opts", ())}
        if opts & run_only and getattr(command.callback, "__wrapped__", None) is None:
            problems.append(name)
    assert not problems, f"declare the shared options with planner.cli.options.run_command: {problems}"
    assert set(SHARED_OPTIONS) == {"solver", "time_limit", "threads", "seed", "json", "out", "force", "verbose"}
