"""Regenerate the generated batching instances (run from the repo root):

    python instances/batching/make_instances.py

tiny3.yaml and evict_small.yaml are hand-written; this writes hetero8.yaml (B = 8, I, O uniform in
[1, 64], seed 0, M = 0.6 × Σ(I+O−1)).  Simulator scale (1,024 requests × 1,024 output tokens) is
measured by benchmarks/batching_scaling.py, which generates that workload itself.
"""

from pathlib import Path

import numpy as np

from planner.batching.instance import save_batching_instance
from planner.batching.problem import make_problem

here = Path(__file__).resolve().parent
rng = np.random.default_rng(0)
I, O = rng.integers(1, 65, 8), rng.integers(1, 65, 8)
M = max(int((I + O - 1).max()), int(0.6 * (I + O - 1).sum()))
save_batching_instance(make_problem(I, O, M=M, name="hetero8"), here / "hetero8.yaml", cost_model="infermax-7b")
