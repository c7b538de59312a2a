"""The one CLI grammar (docs/cli.md), checked on the command tree itself.

* A shared option (declared once in `planner.cli.common`) has the same name, help and default on every command
  that has it; ``--time-limit`` defaults to `TIME_LIMIT_S` everywhere except ``planner capacity``, whose
  ``--time-limit`` and ``--seed`` are query flags that default to the scenario's ``solve:`` section.
* Every solve, compare, simulate, plan and capacity command has the shared options the grammar gives it; the
  ones a command leaves out are listed below with the reason its ``--help`` states.
* No option or command of an earlier grammar is left (no aliases), ``--help`` shows no value type for a
  flag, and a moved command typed the old way gets one line naming the new spelling.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.core import TyperOption
from typer.testing import CliRunner

from support import cli_commands

from planner.cli import common
from planner.cli.main import MOVED, app

ROOT = Path(__file__).resolve().parents[2]
#: a hang guard per subprocess, not a speed assertion
HANG_GUARD_S = 120

#: The options of `planner.cli.common` that must read the same wherever they appear.
SHARED = ("--json", "--out", "--force", "--solver", "--threads", "--time-limit", "--seed", "--verbose", "--report",
          "--parallel", "--trace-format")
#: Worker and SLO options declared once in `planner.cli.common` (`ModelOption` ...): the same help wherever a
#: command builds a worker and SLOs from flags; defaults are each command's (`simulate fleet` runs an H100 at
#: a 1 s TTFT).  `capacity` (query flags) and `plan worker-config` (required, several degrees) word their own.
SAME_HELP = ("--model", "--gpu", "--tp", "--cost-model", "--ttft", "--tpot", "--mode", "--strictness", "--kv-headroom")
OWN_WORDING = {"capacity", "plan worker-config", "fit", "cost predict", "models"}
#: Query flags of `planner capacity`: their default is the scenario's (docs/cli.md).
CAPACITY_QUERY = {"--time-limit", "--seed", "--solver", "--trace-format"}
#: What every command of a verb has, before the exceptions below.
RESULT_OPTIONS = {"--json", "--out", "--force"}
RUN_OPTIONS = {"--solver", "--threads", "--time-limit", "--seed"}
REQUIRED = {"solve": RESULT_OPTIONS | RUN_OPTIONS, "compare": RESULT_OPTIONS | RUN_OPTIONS,
            "simulate": RESULT_OPTIONS, "plan": RESULT_OPTIONS, "capacity": RESULT_OPTIONS | {"--report"}}
#: Shared options a command has without its verb requiring them (its --help says what they apply to).
EXTRA = {"simulate queueing": {"--solver", "--time-limit", "--threads"},
         "simulate replay": RUN_OPTIONS | {"--report"}, "plan scaling": RUN_OPTIONS,
         "simulate fleet": {"--seed"}, "capacity": {"--time-limit", "--seed", "--solver", "--parallel"}}
#: Shared run options a solve/compare command leaves out, and why (stated in its --help).
EXEMPT: dict[str, set[str]] = {}
#: Spellings of earlier grammars; none may remain (typing one gives a one-line error naming the new one).
OLD_OPTIONS = {"--degrees", "--scheduler", "--policy", "--exact-method", "--atgt", "--window-s", "--rates",
               "--cost-models", "--format", "--C", "--P", "--M", "--R-max", "--goal-scheduler"}


COMMANDS = cli_commands()


def _options(command) -> dict[str, TyperOption]:
    return {opt: p for p in command.params if isinstance(p, TyperOption) for opt in p.opts}


def test_the_tree_has_the_grammar_verbs_and_no_moved_command():
    assert {name.split()[0] for name in COMMANDS} >= {"capacity", "solve", "compare", "simulate", "plan", "generate"}
    for old in MOVED:
        assert old.removeprefix("planner ") not in COMMANDS, old
    for new in MOVED.values():
        assert new.removeprefix("planner ") in COMMANDS, new


def test_a_shared_option_reads_the_same_everywhere():
    seen: dict[str, tuple[str, str, object]] = {}
    for name, command in COMMANDS.items():
        for opt, param in _options(command).items():
            if opt not in SHARED or (name == "capacity" and opt in CAPACITY_QUERY):
                continue
            got = (param.help, repr(param.default))
            first = seen.setdefault(opt, (name, *got))
            assert got == first[1:], f"{opt} on '{name}' reads {got}, on '{first[0]}' {first[1:]}"
    assert seen["--time-limit"][2] == repr(common.TIME_LIMIT_S)


def test_worker_and_slo_options_read_the_same_everywhere():
    seen: dict[str, tuple[str, str]] = {}
    for name, command in COMMANDS.items():
        if name in OWN_WORDING:
            continue
        for opt, param in _options(command).items():
            if opt not in SAME_HELP or (opt == "--cost-model" and name == "simulate fleet"):  # it also takes batch-time files
                continue
            first = seen.setdefault(opt, (name, param.help))
            assert param.help == first[1], f"{opt} on '{name}' reads {param.help!r}, on '{first[0]}' {first[1]!r}"
    assert set(seen) == set(SAME_HELP), sorted(set(SAME_HELP) - set(seen))


def test_every_run_command_has_the_shared_options_its_verb_gives_it():
    problems = []
    for name, command in COMMANDS.items():
        verb = name.split()[0]
        if verb not in REQUIRED:
            continue
        want = (REQUIRED[verb] | EXTRA.get(name, set())) - EXEMPT.get(name, set())
        missing = want - set(_options(command))
        if missing:
            problems.append(f"{name}: missing {sorted(missing)}")
    assert not problems, "\n".join(problems)


def test_no_option_of_an_earlier_grammar_is_left():
    for name, command in COMMANDS.items():
        old = OLD_OPTIONS & set(_options(command))
        assert not old, f"'{name}' still takes {sorted(old)}"
        # --workers is the fleet size of `simulate fleet`; executor parallelism is --parallel
        assert name == "simulate fleet" or "--workers" not in _options(command), name


def test_tensor_parallel_degrees_are_spelled_tp():
    for name, command in COMMANDS.items():
        for param in command.params:
            if param.name in ("tensor_parallel", "tp", "degrees"):
                assert param.opts == ["--tp"], (name, param.opts)


def test_help_shows_no_value_type_for_a_flag():
    runner = CliRunner()
    for name in ("", "solve placement", "capacity", "simulate replay", "plan worker-config", "solve deployment"):
        result = runner.invoke(app, [*name.split(), "--help"], env={"COLUMNS": "200"})
        assert result.exit_code == 0, result.output
        assert "--help" in result.output and "<bool>" not in result.output, name
    # a flag (no value) has no value type; an option that takes a value keeps its own (typer ≥ 0.29 shows
    # value types at all; older versions have no `display_type_rich` and show none, checked above)
    command = COMMANDS["solve placement"]
    if not hasattr(next(iter(_options(command).values())), "display_type_rich"):
        return
    ctx = command.make_context("placement", ["x.yaml"])
    shown = {opt: p.display_type_rich(ctx) for opt, p in _options(command).items()}
    assert shown["--json"] is None and shown["--force"] is None and shown["--verbose"] is None
    assert shown["--time-limit"] == "<float>" and shown["--seed"] == "<int>"


def _planner(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "200", "PLANNER_DEBUG": ""}
    return subprocess.run([sys.executable, "-m", "planner", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=HANG_GUARD_S, env=env, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("old, new", [
    (["replay", "--rate", "1"], "planner simulate replay"),
    (["plan", "cost", "instances/deployment/cost-overload.yaml"], "planner solve deployment"),
])
def test_a_moved_command_typed_the_old_way_gets_one_line_naming_the_new(old, new):
    proc = _planner(*old)
    assert proc.returncode == 2 and proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "No such command" in lines[0] and f"it is now '{new}'" in lines[0], proc.stderr


def test_an_old_option_gets_one_line():
    proc = _planner("simulate", "batching", "instances/batching/tiny3.yaml", "--scheduler", "vllm")
    assert proc.returncode == 2 and proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "No such option: --scheduler" in lines[0], proc.stderr


def test_plan_worker_config_takes_repeated_tp_and_writes_out(tmp_path):
    out = tmp_path / "wc.json"
    proc = _planner("plan", "worker-config", "--model", "Llama-2-70B", "--gpu", "A100-80GB-SXM", "--tp", "2",
                    "--tp", "4", "--json", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert out.read_text().strip() == proc.stdout.strip()  # --out holds the object --json prints
    import json

    degrees = [o["tensor_parallel"] for o in json.loads(proc.stdout)["options"]]
    assert degrees == [2, 4]
