"""Write DERIVED (not measured) Aladdin cost models for Llama-2-13B: models/aladdin/llama-2-13b__*.yaml.

../shared/data has no Llama-2-13B profile (Vidur and Splitwise profile 7B and 70B only), and the
Aladdin paper's Table 3 needs one.  Each 13B file is derived from the Llama-2-7B file of the same
(GPU, TP) — same architecture family (multi-head attention, gated MLP, same vocabulary), same data
source (Vidur composition) and same valid range — by scaling each coefficient with the
architecture quantity that drives it (catalog sizes, planner/catalog/models.yaml):

* prefill per token k1 (compute-bound matrix multiplies): x P = params(13B)/params(7B)
  = 13,015,864,320 / 6,738,415,616 = 1.9316;
* decode base c2 = the weight read of one pass, weight_bytes / (TP · memory bandwidth), scaled by P,
  plus the rest of the 7B c2 (per-layer launches, all-reduce latency, CPU overhead) x L = layers
  40/32 = 1.25;
* prefill base c1 and decode per request k2 (per-layer fixed and small-tensor work): x L = 1.25;
* decode per context token k3 (the KV read): x K = KV bytes/token 819,200 / 524,288 = 1.5625;
* KV bytes per token a_kv: the 13B architecture's 2·layers·kv_heads·head_dim·2 B = 819,200 B.

Each file states it has no measured rows (``measured_rows.basis: none``) and carries the caveats
``derived_from_other_model``, ``no_measured_rows`` and the 7B file's data caveats (attention
extrapolated, ...), quoting the 7B file's own measured-rows error in the note
(planner/costmodels/measured_error.py `derived_annotation`).

Evidence for the rule (docs/papers.md): the same rule applied 7B -> 70B (a 10x extrapolation, where
its errors are largest) against a Vidur fit of Llama-2-70B (same source and method as the 7B file)
gives coefficient ratios within the spread measured across TP degrees; for 13B the scalings are
only 1.25-1.93x.  Not modelled: different per-GPU shard shapes (matrix-multiply efficiency).
Re-run after refitting the 7B files (models/fit_models.sh); tests/docs/test_papers_inputs.py checks
that the shipped 13B files equal what this script derives from the shipped 7B files.

Run from the repository root:  python models/derive_llama2_13b.py [--check]
(--check writes nothing and exits 1 when a shipped file differs from the derivation).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from planner.catalog import find_gpu, find_model
from planner.costmodels.files import cost_model_filename, load_cost_model, save_cost_model
from planner.costmodels.measured_error import derived_annotation
from planner.costmodels.models import AladdinCostModel
from planner.errors import PlannerError

ROOT = Path(__file__).resolve().parent
SOURCE, TARGET = "Llama-2-7B", "Llama-2-13B"
GPUS = ("A100-80GB-SXM", "H100-80GB-SXM")
DEGREES = (1, 2, 4, 8)
#: coefficient -> which architecture ratio scales it (decode_base_s is split: see `derive`)
SCALED_BY = {
    "prefill_s_per_token": "weights",
    "prefill_base_s": "layers",
    "decode_s_per_request": "layers",
    "decode_s_per_context_token": "kv",
}


def ratios(source_name: str = SOURCE, target_name: str = TARGET) -> dict[str, float]:
    src, dst = find_model(source_name), find_model(target_name)
    if src is None or dst is None:
        raise PlannerError(f"unknown model {source_name if src is None else target_name} in the catalog")
    return {"weights": dst.num_parameters / src.num_parameters, "layers": dst.num_layers / src.num_layers,
            "kv": dst.kv_bytes_per_token / src.kv_bytes_per_token}


def weight_read_s(model_name: str, gpu_name: str, tensor_parallel: int) -> float:
    """Seconds to read one GPU's shard of the weights once at the GPU's peak memory bandwidth."""
    spec, gpu = find_model(model_name), find_gpu(gpu_name)
    if gpu is None or gpu.memory_bandwidth_gb_s is None:
        raise PlannerError(f"GPU {gpu_name!r}: no memory bandwidth in the catalog")
    return spec.weight_bytes / tensor_parallel / (gpu.memory_bandwidth_gb_s * 1e9)


def derive(base: AladdinCostModel, source_file: str = "", target: str = TARGET) -> AladdinCostModel:
    """The ``target`` (default Llama-2-13B) model of ``base``'s (GPU, TP), from ``base`` (a Llama-2-7B
    Aladdin model).  Another target is only for the cross-check (`cross_check`)."""
    if not isinstance(base, AladdinCostModel):
        raise PlannerError(f"{source_file or 'source'}: expected an aladdin cost model, "
                           f"got kind {getattr(base, 'kind', '?')!r}")
    if base.model != SOURCE:
        raise PlannerError(f"{source_file or 'source'}: model: expected {SOURCE}, got {base.model!r}")
    r = ratios(SOURCE, target)
    dst = find_model(target)
    update = {name: getattr(base, name) * r[kind] for name, kind in SCALED_BY.items()}
    read_src = weight_read_s(SOURCE, base.gpu, base.tensor_parallel)
    read_dst = weight_read_s(target, base.gpu, base.tensor_parallel)
    rest = max(base.decode_base_s - read_src, 0.0)
    update["decode_base_s"] = read_dst + rest * r["layers"]
    measured, caveats = derived_annotation(base, source_file or SOURCE, "derived_from_other_model", (
        f"derived from {SOURCE} by architecture ratios (parameters x{r['weights']:.4f}, layers x{r['layers']:.4f}, "
        f"KV bytes x{r['kv']:.4f}), not measured: no {target} profile exists; shard-shape efficiency not modelled"))
    update |= {
        "measured_rows": measured,
        "caveats": caveats,
        "model": target,
        "kv_bytes_per_token": dst.kv_bytes_per_token,
        "kv_bytes_base": base.kv_bytes_base * r["kv"],
        "fit": None,
        "provenance": (
            f"DERIVED, NOT MEASURED: from {source_file or SOURCE} ({base.provenance.split(';')[0]}); "
            f"k1 x {r['weights']:.4f} (parameters); c1, k2 x {r['layers']:.4f} (layers); "
            f"c2 = weight read {1e3 * read_dst:.3f} ms + (7B c2 - 7B weight read {1e3 * read_src:.3f} ms) "
            f"x {r['layers']:.4f}; k3 x {r['kv']:.4f} "
            f"(KV bytes/token {dst.kv_bytes_per_token:.0f}/{find_model(SOURCE).kv_bytes_per_token:.0f}); "
            f"no {target} profile is used; "
            "written by models/derive_llama2_13b.py"
        ),
    }
    return base.model_copy(update=update)


def planned(root: Path = ROOT) -> list[tuple[Path, AladdinCostModel]]:
    """(target path, derived model) for every shipped 7B file of GPUS x DEGREES."""
    out = []
    for gpu in GPUS:
        for t in DEGREES:
            src = root / cost_model_filename("aladdin", SOURCE, gpu, t)
            if not src.exists():
                continue
            base = load_cost_model(src)
            target = root / cost_model_filename("aladdin", TARGET, gpu, t)
            out.append((target, derive(base, src.relative_to(root).as_posix())))
    return out


def same(a: AladdinCostModel, b: AladdinCostModel) -> bool:
    da, db = a.model_dump(mode="json", exclude_none=True), b.model_dump(mode="json", exclude_none=True)
    if da.keys() != db.keys():
        return False
    return all(math.isclose(da[k], db[k], rel_tol=1e-12, abs_tol=0.0) if isinstance(da[k], float) else da[k] == db[k]
               for k in da)


def cross_check(fitted_dir: Path, target: str = "Llama-2-70B", root: Path = ROOT) -> list[str]:
    """Markdown rows: the rule applied 7B -> ``target`` against ``target`` files fitted from the same
    source as the 7B files (a directory written by `planner fit ... --out-dir`), per (GPU, TP):
    each coefficient's derived/fitted ratio, and the decode iteration (batch 16, 2,561 tokens of
    context each) and prefill (2,342 tokens) times, derived vs fitted."""
    rows = ["| GPU | TP | k1 | c1 | k2 | k3 | c2 | decode b=16 derived / fitted (s) "
            "| prefill 2342 tok derived / fitted (s) |",
            "|---|---|---|---|---|---|---|---|---|"]
    names = ("prefill_s_per_token", "prefill_base_s", "decode_s_per_request", "decode_s_per_context_token",
             "decode_base_s")
    for gpu in GPUS:
        for t in DEGREES:
            src = root / cost_model_filename("aladdin", SOURCE, gpu, t)
            fitted_path = Path(fitted_dir) / cost_model_filename("aladdin", target, gpu, t)
            if not src.exists() or not fitted_path.exists():
                continue
            d, f = derive(load_cost_model(src), src.name, target), load_cost_model(fitted_path)
            ratio = " | ".join(f"{getattr(d, n) / getattr(f, n):.2f}" if getattr(f, n) > 0 else "-" for n in names)
            rows.append(f"| {gpu} | {t} | {ratio} | "
                        f"{d.decode_time(16, 16 * 2561):.4f} / {f.decode_time(16, 16 * 2561):.4f} | "
                        f"{d.prefill_time(2342):.4f} / {f.prefill_time(2342):.4f} |")
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a shipped file differs")
    parser.add_argument("--cross-check", type=Path, metavar="DIR",
                        help="write nothing; compare the rule applied 7B -> 70B with the Llama-2-70B files "
                             "fitted into DIR (planner fit ../shared/data/profiling/vidur --format vidur "
                             "--model Llama-2-70B --out-dir DIR)")
    args = parser.parse_args()
    if args.cross_check is not None:
        rows = cross_check(args.cross_check)
        if len(rows) == 2:
            print(f"--cross-check: no Llama-2-70B aladdin files under {args.cross_check}/aladdin", file=sys.stderr)
            return 1
        print("\n".join(rows))
        return 0
    stale = []
    for target, model in planned():
        if args.check:
            if not target.exists() or not same(load_cost_model(target), model):
                stale.append(target.name)
            continue
        save_cost_model(model, target)
        print(f"wrote {target}")
    if stale:
        print(f"differs from the derivation (run python models/derive_llama2_13b.py): {', '.join(stale)}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
