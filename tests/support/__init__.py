"""Helpers shared by the test modules (importable as ``support``: pytest puts ``tests/`` on the path):
the repository paths, tiny hand-made placement problems, and the CLI runner and one-line-error check."""

from __future__ import annotations

from pathlib import Path

import pytest

from planner.core.types import GPUSpec, LLMSpec, PlannedRequest, SLOClass, SLOSet, WorkerConfig
from planner.costmodels.models import AladdinCostModel
from planner.placement.problem import OngoingState, PlacementOptions, PlacementProblem

REPO = Path(__file__).resolve().parents[2]
SHARED_DATA = REPO.parent / "shared" / "data"


# ---- tiny hand-made placement problems -------------------------------------------------------

#: A model whose numbers make hand arithmetic easy: 1 GB of weights, KV of 1e6 bytes per token.
TOY_MODEL = LLMSpec(
    name="toy", num_layers=1, hidden_size=8, num_attention_heads=1, num_kv_heads=1, head_dim=8,
    num_parameters=500_000_000, dtype_bytes=2.0, max_context_tokens=100_000,
)
TOY_GPU = GPUSpec(name="toy-gpu", memory_gb=2.0)  # 2 GB − 1 GB of weights = 1e9 bytes of KV = 1000 tokens


def toy_cost(**overrides: float) -> AladdinCostModel:
    base = dict(
        model="toy", gpu="toy-gpu", tensor_parallel=1,
        prefill_s_per_token=0.001, prefill_base_s=0.1,
        decode_s_per_request=0.01, decode_s_per_context_token=0.0, decode_base_s=0.05,
        kv_bytes_per_token=1e6, kv_bytes_base=0.0,
    )
    base.update(overrides)
    return AladdinCostModel(**base)


def toy_problem(
    requests: list[tuple[int, int]],
    *,
    ttft: float | None = 10.0,
    atgt: float = 1.0,
    mode: str = "decode_only",
    kv_headroom: float = 1.0,
    strictness: float = 0.5,
    gpu_memory_gb: float = 2.0,
    cost: AladdinCostModel | None = None,
    ongoing: dict[str, OngoingState] | None = None,
    classes: list[str] | None = None,
    slos: dict[str, SLOClass] | None = None,
    max_workers: int | None = None,
) -> PlacementProblem:
    """Requests as (input tokens, predicted output tokens); real output = predicted."""
    reqs = tuple(
        PlannedRequest(
            request_id=f"r{k}", arrival_s=float(k), input_tokens=i, output_tokens=o, predicted_output_tokens=o,
            slo_class=(classes[k] if classes else "default"),
        )
        for k, (i, o) in enumerate(requests)
    )
    return PlacementProblem(
        name="toy",
        model=TOY_MODEL,
        worker=WorkerConfig(gpu=GPUSpec(name="toy-gpu", memory_gb=gpu_memory_gb), tensor_parallel=1),
        cost=cost or toy_cost(),
        slos=SLOSet(classes=slos or {"default": SLOClass(ttft_s=ttft, atgt_s=atgt)}),
        requests=reqs,
        ongoing=ongoing or {},
        options=PlacementOptions(mode=mode, kv_headroom=kv_headroom, strictness=strictness, max_workers=max_workers),
    )


def run_cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture, *args: str) -> tuple[int, str, str]:
    """Run `planner <args>` in-process through its real entry point; (exit code, stdout, stderr)."""
    import sys

    from planner.cli.main import main

    monkeypatch.setattr(sys, "argv", ["planner", *args])
    code = 0
    try:
        main()
    except SystemExit as exc:
        code = int(exc.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def assert_one_line(code: int, err: str, *needles: str) -> str:
    """Bad input: exit code 2 and exactly one non-empty stderr line, no traceback or internal error,
    containing every needle; returns that line."""
    lines = [line for line in err.strip().splitlines() if line.strip()]
    assert code == 2, err
    assert len(lines) == 1 and "Traceback" not in err and "internal error" not in err, err
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


def cli_commands() -> dict[str, object]:
    """Every leaf command of the planner CLI tree (click objects) by its full name ("solve placement")."""
    import typer.main
    from typer.core import TyperGroup

    from planner.cli.main import app

    found: dict[str, object] = {}

    def walk(command: object, path: list[str]) -> None:
        if isinstance(command, TyperGroup):
            for name, sub in command.commands.items():
                walk(sub, [*path, name])
        else:
            found[" ".join(path)] = command

    walk(typer.main.get_command(app), [])
    return found
