"""Writes the generated queueing instances of this directory (deterministic; run from the repo root).

    python instances/queueing/make_instances.py

Group sizes and token lengths are synthetic (uniform ranges below); Θ, P and d are derived at load
time from the shipped Aladdin cost models (models/aladdin/, fitted to Vidur profiles).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import yaml

HERE = Path(__file__).resolve().parent
MODELS = ("Llama-2-7B", "CodeLlama-34B", "Llama-2-70B")
SLO_CLASSES = {"interactive": 20.0, "batch-1": 60.0, "batch-2": 3600.0}


def groups(n: int, seed: int, spacing: float, mix=(0.2, 0.3, 0.5), sizes=(2, 17)) -> list[dict]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        cls = list(SLO_CLASSES)[int(rng.choice(3, p=mix))]
        mean_out = int(rng.integers(100, 400))
        out.append({
            "name": f"g{i:02d}-{cls}", "model": MODELS[int(rng.integers(len(MODELS)))], "slo_class": cls,
            "num_requests": int(rng.integers(*sizes)), "mean_input_tokens": int(rng.integers(100, 800)),
            "mean_output_tokens": mean_out, "std_output_tokens": round(mean_out / 3, 1),
            "max_output_tokens": 2 * mean_out, "arrival_s": round(spacing * i, 3),
        })
    return out


def fleet(a100: int, h100: int, extra: int = 0) -> list[dict]:
    return [
        {"name": "a100x4", "gpu": "A100-80GB-SXM", "tensor_parallel": 4, "swap_time_s": 12.0, "count": a100,
         "extra_available": extra, "loaded_models": [MODELS[k % 3] for k in range(a100)]},
        {"name": "h100x4", "gpu": "H100-80GB-SXM", "tensor_parallel": 4, "swap_time_s": 8.0, "count": h100,
         "extra_available": extra, "cost_per_instance": 2.0, "loaded_models": [MODELS[(k + 1) % 3] for k in range(h100)]},
    ]


def write(name: str, description: str, body: dict) -> None:
    data = {"family": "queueing", "name": name, "description": description, "slo_classes": SLO_CLASSES, **body}
    (HERE / f"{name}.yaml").write_text(yaml.safe_dump(data, sort_keys=False, width=140))
    print(f"wrote {name}.yaml")


def main() -> None:
    g = groups(16, seed=11, spacing=0.0)
    write("hetero-fleet-n16", "16 groups of three models on 2 A100x4 + 1 H100x4 instances (heterogeneous Θ); "
          "the exact slots MILP proves the optimum.",
          {"objective": "penalty", "deadline": "start", "now_s": 0.0, "instance_types": fleet(2, 1), "groups": g})
    g = groups(8, seed=5, spacing=0.0, mix=(1.0, 0.0, 0.0), sizes=(24, 65))
    write("overloaded-scale-up", "8 large interactive groups on one A100x4: SLOs cannot all be met; "
          "solve reports the soft version and the scale-up MILP's recommendation (H100 costs 2, A100 1).",
          {"objective": "penalty", "deadline": "start", "now_s": 0.0, "instance_types": fleet(1, 0, extra=3), "groups": g})
    g = groups(60, seed=3, spacing=0.5)
    write("trace-n60", "60 groups arriving every 0.5 s on 1 A100x4 + 1 H100x4 for `planner simulate queueing` "
          "(deadlines count from time 0: arrival + class SLO).",
          {"objective": "penalty", "deadline": "start", "now_s": 0.0, "instance_types": fleet(1, 1), "groups": g})


if __name__ == "__main__":
    main()
