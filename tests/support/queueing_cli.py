"""The shipped queueing instance and the CLI runner the queueing CLI tests share."""

from __future__ import annotations

from pathlib import Path

from support import REPO

INSTANCE = REPO / "instances" / "queueing" / "two-models-one-a100.yaml"


def run(monkeypatch, capsys, *args):
    from support import run_cli

    return run_cli(monkeypatch, capsys, *args)


def instance_file(tmp_path: Path, mutate) -> Path:
    """A small valid instance (two groups, one type) with ``mutate(data)`` applied, as YAML."""
    import yaml

    data = {"family": "queueing", "slo_classes": {"interactive": 20.0},
            "instance_types": [{"name": "a", "gpu": "A100-80GB-SXM", "tensor_parallel": 1, "swap_time_s": 5, "count": 1}],
            "groups": [{"name": f"g{k}", "model": "Llama-2-7B", "slo_class": "interactive", "num_requests": 4,
                        "mean_input_tokens": 100, "mean_output_tokens": 100, "max_output_tokens": 200} for k in range(2)]}
    mutate(data)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    return path
