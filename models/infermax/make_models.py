"""Write the InferMax (§3.2) cost-model files: the two published sets and one fitted from Vidur.

Run from the repo root: ``python models/infermax/make_models.py [SHARED_DATA_DIR]``
(default ../shared/data).  Only derived coefficients are written, with a provenance line; then run
``python models/annotate_measured.py --kind infermax`` to write each file's error against measured rows and its
caveats (these files are written without them).
"""

import sys
from pathlib import Path

from planner.batching.costmodel import PUBLISHED, fit_from_vidur, save_infermax_model

here = Path(__file__).resolve().parent
data = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("../shared/data")
for key, model in PUBLISHED.items():
    save_infermax_model(model, here / f"published-{key}.yaml")
vidur = data / "profiling" / "vidur"
fitted = fit_from_vidur(vidur / "compute/a100/meta-llama/Llama-2-7b-hf/mlp.csv",
                        vidur / "legacy/a100_attention_n_embd8192_q64_kv8_tp2.csv",
                        n_layers=32, n_heads=32, n_kv_heads=32, head_dim=128, name="llama-2-7b-a100-fitted")
save_infermax_model(fitted, here / "llama-2-7b__a100-80gb-sxm__tp1.yaml")
print(fitted.fit_report)
