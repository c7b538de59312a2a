"""Write the InferMax (§3.2) cost-model files: the two published sets and one derived from a batch-time model.

Run from the repo root: ``python models/infermax/make_models.py``.  The Llama-2-7B A100 TP 1 file is the
InferMax form projected from ``models/batchtime/llama-2-7b__a100-80gb-sxm__tp1.yaml`` (its ``derived.infermax``
coefficients, `planner.batching.costmodel.infermax_from_batchtime`; the same as
``planner cost derive ... --kind infermax``); the files are written without their ``measured_rows`` and
``caveats`` sections: run ``python models/annotate_measured.py --kind infermax`` next to write each file's
error against the measured rows (here: against the batch-time model, whose rows hold no attention) and its
caveats.
"""

from pathlib import Path

from planner.batching.costmodel import PUBLISHED, infermax_from_batchtime, save_infermax_model
from planner.costmodels.files import load_cost_model

here = Path(__file__).resolve().parent
for key, model in PUBLISHED.items():
    save_infermax_model(model, here / f"published-{key}.yaml")
source = "models/batchtime/llama-2-7b__a100-80gb-sxm__tp1.yaml"
derived = infermax_from_batchtime(load_cost_model(here.parent.parent / source), source)
derived = derived.model_copy(update={"name": "llama-2-7b-a100-derived", "measured_rows": None, "caveats": []})
save_infermax_model(derived, here / "llama-2-7b__a100-80gb-sxm__tp1.yaml")
print(derived.provenance)
