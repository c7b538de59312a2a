"""Write DERIVED (not measured) p1..p8 models for Llama-3-8B on V100-32GB-SXM2, TP 1/2/4/8.

../shared/data has no V100 profiles.  The paper's config-search experiment (Llama-3-8B on 8x V100,
FORMULATIONS.md §5.5) needs a V100 throughput model, so each V100 file is derived from the fitted
A100 file of the same TP degree (models/hetero/llama-3-8b__a100-80gb-sxm__tp<t>.yaml, Vidur
composition) by the published peak ratios (catalog, ../shared/data/specs/gpu_specs.csv):

* prefill p1..p4 (compute bound) x A100/V100 dense fp16 TFLOPS = 312/125 = 2.496
* decode  p5..p8 (memory bound)  x A100/V100 memory bandwidth   = 2039/900 = 2.266

Not modelled: the V100 box's interconnect (the paper's machine talks over PCIe 3.0; the A100 fit
includes NVSwitch all-reduces), so TP > 1 is optimistic here.  No tuning towards the paper's ranking.
Each file says so in its caveats (``derived_from_other_gpu``, ``no_measured_rows`` and the A100 file's
data caveats; ``measured_rows.basis: none``; planner/costmodels/measured_error.py `derived_annotation`).
Run from the repository root:  python models/hetero/derive_v100.py
"""

from __future__ import annotations

from pathlib import Path

from planner.catalog import find_gpu
from planner.costmodels.files import load_cost_model, save_cost_model
from planner.costmodels.measured_error import derived_annotation

ROOT = Path(__file__).resolve().parent


def main() -> None:
    a100, v100 = find_gpu("A100-80GB-SXM"), find_gpu("V100-32GB-SXM2")
    compute = a100.fp16_tflops / v100.fp16_tflops
    memory = a100.memory_bandwidth_gb_s / v100.memory_bandwidth_gb_s
    for t in (1, 2, 4, 8):
        src = ROOT / f"llama-3-8b__a100-80gb-sxm__tp{t}.yaml"
        base = load_cost_model(src)
        update = {f"p{k}": getattr(base, f"p{k}") * compute for k in (1, 2, 3, 4)}
        update |= {f"p{k}": getattr(base, f"p{k}") * memory for k in (5, 6, 7, 8)}
        measured, caveats = derived_annotation(base, src.name, "derived_from_other_gpu", (
            f"no V100 data: the A100 fit scaled by constants (prefill x{compute:.3f}, decode x{memory:.3f}), not "
            "measured; each phase keeps the A100 fit's relative cost across TP degrees, so V100-specific effects "
            "cannot show (the V100 PCIe interconnect is not modelled: TP > 1 optimistic)"))
        update |= {
            "measured_rows": measured, "caveats": caveats,
            "gpu": v100.name, "fit": None,
            "provenance": (f"DERIVED, NOT MEASURED: {src.name} (Vidur composition, A100) with prefill p1..p4 x "
                           f"{compute:.3f} (fp16 TFLOPS 312/125) and decode p5..p8 x {memory:.3f} (bandwidth 2039/900); "
                           "V100 interconnect not modelled; written by models/hetero/derive_v100.py"),
        }
        out = ROOT / f"llama-3-8b__v100-32gb-sxm2__tp{t}.yaml"
        save_cost_model(base.model_copy(update=update), out)
        print(f"wrote {out}")


if __name__ == "__main__":
    main()
