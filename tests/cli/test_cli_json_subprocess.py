"""What a user sees: every command that has ``--json`` runs as a real process on a shipped instance, and
its stdout is exactly one JSON object, whatever the solver libraries print from native code.

In-process tests (``capsys``) cannot see output written by C code to file descriptor 1 (highspy 1.16's
constructor banner reached stdout that way while the in-process suite stayed green), so these run the
installed ``planner`` entry point (``python -m planner``) as subprocesses.  The table below must cover
every command whose options include ``--json``: a new one without a case here fails
`test_every_json_command_has_a_subprocess_case`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from support import cli_commands

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared" / "data"
#: a hang guard per command, not a speed assertion (the slowest case takes ~15 s on 2 loaded cores)
HANG_GUARD_S = 300

needs_shared = pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/data not present")


def _capacity_scenario(tmp: Path) -> Path:
    scenario = tmp / "capacity.yaml"
    scenario.write_text(
        "family: capacity\nname: json-check\nmodel: Llama-2-70B\nslos: {ttft_s: 1.6, atgt_s: 0.075}\n"
        "workload: {distribution: sharegpt}\nrates: [2]\n"
        "gpus:\n  - {type: A100-80GB-SXM, price_per_hour: 1.8, tensor_parallel: [2]}\n"
        "placement: {strictness: 0.5, kv_headroom: 1.0}\nsolve: {time_limit_s: 5, exact_max_requests: 200, seed: 0}\n")
    return scenario


def _compare_all_dir(tmp: Path) -> Path:
    folder = tmp / "compare-in"
    folder.mkdir()
    shutil.copy(ROOT / "instances/batching/tiny3.yaml", folder)
    shutil.copy(ROOT / "instances/priority/fig3_toy.yaml", folder)
    return folder


def _cost_rows(tmp: Path) -> Path:
    rows = tmp / "rows.csv"
    rows.write_text("batch_size,prompt_tokens,output_tokens\n1,512,128\n")
    return rows


def _tiny3_plan(tmp: Path) -> Path:
    plan = tmp / "plan.json"
    plan.write_text(json.dumps({"batches": [{"tokens": {"a": 2, "b": 1}}, {"tokens": {"a": 1, "c": 3}, "evicted": ["b"]},
                                            {"tokens": {"a": 1, "b": 2}}]}))
    return plan


#: (command words, extra arguments given the temporary folder) — one case per command with --json.
CASES: dict[str, tuple[list[str], object]] = {
    "plan worker-config": (["plan", "worker-config", "--model", "Llama-2-70B", "--gpu", "A100-80GB-SXM"], None),
    "fit": (["fit"], lambda tmp: [str(SHARED / "profiling/splitwise_sim/perf_model.csv"), "--kind", "both"]),
    "simulate replay": (["simulate", "replay"], lambda tmp: [
        "--trace", str(SHARED / "traces/azure_llm_inference_2023/AzureLLMInferenceTrace_conv.csv"),
        "--trace-format", "azure", "--workload", "azure_conv", "--duration", "30"]),
    "plan scaling": (["plan", "scaling", "--rate", "1", "--rate", "2", "--duration", "120"], None),
    "capacity": (["capacity"], lambda tmp: [str(_capacity_scenario(tmp)), "--report", str(tmp / "capacity-out"),
                                            "--no-progress"]),
    "solve placement": (["solve", "placement", "instances/placement/sharegpt-70b-a100-n40.yaml"], None),
    "solve batching": (["solve", "batching", "instances/batching/tiny3.yaml"], None),
    "solve priority": (["solve", "priority", "instances/priority/hetero_n10_b2.yaml", "--formulation", "milp"], None),
    "solve queueing": (["solve", "queueing", "instances/queueing/hetero-fleet-n16.yaml"], None),
    "solve deployment": (["solve", "deployment", "instances/deployment/cost-two-models.yaml"], None),
    "solve routing": (["solve", "routing", "instances/routing/llama3-8b-v100-small.yaml", "--time-limit", "2"], None),
    "compare placement": (["compare", "placement", "instances/placement/sharegpt-70b-a100-n40.yaml"], None),
    "compare batching": (["compare", "batching", "instances/batching/tiny3.yaml"], None),
    "compare priority": (["compare", "priority", "instances/priority/fig3_toy.yaml"], None),
    "compare queueing": (["compare", "queueing", "instances/queueing/two-models-one-a100.yaml"], None),
    "compare deployment": (["compare", "deployment", "instances/deployment/cost-two-models.yaml"], None),
    "compare routing": (["compare", "routing", "instances/routing/llama3-8b-v100-small.yaml", "--time-limit", "2"], None),
    "compare all": (["compare", "all"], lambda tmp: [str(_compare_all_dir(tmp))]),
    "simulate batching": (["simulate", "batching", "instances/batching/tiny3.yaml"], None),
    "simulate fleet": (["simulate", "fleet", "--rate", "2", "--duration", "30", "--workers", "2"], None),
    "simulate queueing": (["simulate", "queueing", "instances/queueing/trace-n60.yaml", "--method", "qlm",
                          "--time-limit", "1"], None),
    "validate": (["validate", "batching", "instances/batching/tiny3.yaml"], lambda tmp: [str(_tiny3_plan(tmp))]),
    "workload show": (["workload", "show"], None),
    "models": (["models"], None),
    "cost predict": (["cost", "predict", "models/batchtime/llama-2-70b__a100-80gb-sxm__tp2.yaml"],
                     lambda tmp: [str(_cost_rows(tmp))]),
    "cost derive": (["cost", "derive", "models/batchtime/llama-2-70b__a100-80gb-sxm__tp2.yaml"],
                    lambda tmp: [str(tmp / "derived.yaml"), "--kind", "aladdin"]),
}
#: the same commands again where a second form runs other code (a TP enumeration, one distribution)
EXTRA_CASES: dict[str, list[str]] = {
    "solve deployment (TP enumeration)": ["solve", "deployment", "instances/deployment/clusters/llama3-8b-8xv100.yaml"],
    "solve deployment (request classes)": ["solve", "deployment", "instances/deployment/melange-example.yaml"],
    "solve deployment --max-load": ["solve", "deployment", "instances/deployment/cost-overload.yaml", "--max-load"],
    "workload show sharegpt": ["workload", "show", "sharegpt"],
}
NEEDS_SHARED = {"fit", "simulate replay"}


def _json_commands() -> set[str]:
    """Every command of the CLI tree whose options include ``--json``."""
    return {name for name, command in cli_commands().items()
            if any("--json" in getattr(p, "opts", ()) for p in command.params)}


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "120", "PLANNER_DEBUG": ""}
    return subprocess.run([sys.executable, "-m", "planner", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=HANG_GUARD_S, env=env)


def test_every_json_command_has_a_subprocess_case() -> None:
    assert _json_commands() == set(CASES), "add a subprocess case for every command that has --json"


def test_stdout_of_every_json_command_is_one_json_object(tmp_path: Path) -> None:
    jobs: dict[str, list[str]] = {}
    for name, (words, extra) in CASES.items():
        if name in NEEDS_SHARED and not SHARED.is_dir():
            continue
        folder = tmp_path / name.replace(" ", "-")
        folder.mkdir()
        jobs[name] = [*words, *(extra(folder) if callable(extra) else []), "--json"]
    for name, words in EXTRA_CASES.items():
        jobs[name] = [*words, "--json"]
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = dict(zip(jobs, pool.map(lambda a: _run(a, ROOT), jobs.values())))
    problems = []
    for name, proc in results.items():
        try:
            data = json.loads(proc.stdout)  # the whole stdout: one object, nothing before or after it
        except json.JSONDecodeError as error:
            problems.append(f"{name}: stdout is not one JSON object ({error}); starts {proc.stdout[:120]!r}; "
                            f"stderr {proc.stderr[-300:]!r}")
            continue
        if proc.returncode != 0:
            problems.append(f"{name}: exit {proc.returncode}; stderr {proc.stderr[-300:]!r}")
        if not isinstance(data, dict):
            problems.append(f"{name}: JSON is a {type(data).__name__}, not an object")
        if "Running HiGHS" in proc.stderr or "Traceback" in proc.stderr:
            problems.append(f"{name}: stderr carries native noise or a traceback: {proc.stderr[:300]!r}")
    assert not problems, "\n".join(problems)


@pytest.mark.gurobi
def test_gurobi_json_is_clean(require_gurobi) -> None:
    proc = _run(["solve", "placement", "instances/placement/sharegpt-70b-a100-n40.yaml", "--solver", "gurobi", "--json"],
                ROOT)
    data = json.loads(proc.stdout)
    assert proc.returncode == 0 and data["solver"] == "gurobi"


def test_native_writes_to_descriptor_1_reach_stderr_not_stdout() -> None:
    """The CLI's guard itself: after `reserve_stdout`, a C-level write to fd 1 (and a child process, which
    inherits fd 1) lands on stderr; Python's print still reaches the real stdout."""
    code = ("import os, subprocess, sys\n"
            "from planner.core.stdio import reserve_stdout\n"
            "reserve_stdout()\n"
            "os.write(1, b'native noise\\n')\n"
            "subprocess.run(['echo', 'child noise'])\n"
            "print('{\"ok\": true}')\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"ok": True}
    assert "native noise" in proc.stderr and "child noise" in proc.stderr


def test_library_solve_prints_nothing_to_stdout() -> None:
    """Library users (no CLI guard) get no solver banner on stdout either."""
    code = ("from planner.solver.highs_backend import new_highs\n"
            "from planner.solver.outcome import SolveOptions\n"
            "new_highs(SolveOptions())\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "" and "Running HiGHS" not in proc.stderr


def _readme_block(heading: str) -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text.split(heading, 1)[1]
    return [b.strip() for b in re.findall(r"```bash\n(.*?)```", section, flags=re.S)]


def test_ci_runs_the_readme_install_and_test_commands_as_written() -> None:
    """`.ci/run` runs the README's quick-start and test commands verbatim (so CI is what a new user types)."""
    ci = (ROOT / ".ci/run").read_text()
    quick, tests = _readme_block("## Quick start")[:2]
    assert quick in ci and tests in ci


def test_readme_quick_start_planner_command_runs(tmp_path: Path) -> None:
    """The planner part of the README's quick-start line runs as written (the install part is run by `.ci/run`)."""
    quick = _readme_block("## Quick start")[0]
    planner_part = quick.split("&&")[-1].strip()
    assert planner_part.startswith("planner ")
    proc = subprocess.run([sys.executable, "-m", "planner", *planner_part.split()[1:]], cwd=ROOT, capture_output=True,
                          text=True, timeout=HANG_GUARD_S)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip(), "the quick start prints its answer"
