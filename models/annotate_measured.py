"""Write each Aladdin / bilinear / hetero / InferMax file's error against measured rows and its caveats.

For every file under models/aladdin, models/bilinear, models/hetero and models/infermax (or the --kind given),
recompute
the ``measured_rows`` section (the file's own MAPE on the measured rows of its configuration and the
k-fold cross-validated MAPE of its form, on the folds of the batch-time file) and ``caveats``
(planner/costmodels/measured_error.py).  Coefficients are never changed (checked before writing).
Files whose provenance starts with "DERIVED" are left to their derivation scripts
(models/derive_llama2_13b.py, models/hetero/derive_v100.py), which run after this one.
InferMax files name no configuration: `INFERMAX_CONFIGURATIONS` gives the published sets' (from their
provenance: FORMULATIONS.md §3.2), the file name ``<model>__<gpu>__tp<g>.yaml`` the fitted ones'; the published
sets get the ``published_coefficients`` caveat.  Run it after models/infermax/make_models.py (which rewrites
those files without these sections).

Run from the repository root (deterministic; reads ../shared/data or $PLANNER_SHARED_DATA):
    python models/annotate_measured.py [--kind aladdin|bilinear|hetero|infermax] [--data DIR] [--check]
--check writes nothing and exits 1 when a file's sections differ from the recomputation.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from planner.batching.costmodel import load_infermax_model
from planner.catalog import canonical_gpu_name, canonical_model_name
from planner.costmodels.files import cost_model_filename, load_cost_model, save_cost_model
from planner.costmodels.measured_error import annotate, group_key, load_groups
from planner.costmodels.models import Caveat

ROOT = Path(__file__).resolve().parent
FORM_KINDS = ("aladdin", "bilinear", "hetero")
KINDS = (*FORM_KINDS, "infermax")
NEW_FIELDS = ("measured_rows", "caveats")
#: (model, GPU, TP) of the published InferMax sets, from their provenance (FORMULATIONS.md §3.2).
INFERMAX_CONFIGURATIONS = {"published-7b.yaml": ("Llama-2-7B", "A100-80GB-SXM", 1),
                           "published-70b.yaml": ("Llama-3-70B", "A100-80GB-SXM", 4)}
PUBLISHED = Caveat(code="published_coefficients", detail="coefficients copied from the InferMax paper's set "
                   "(FORMULATIONS.md §3.2, named in provenance), not fitted here")


def configuration(path: Path, model) -> tuple[str, str, int] | None:  # noqa: ANN001
    """Catalog (model, GPU, TP) of a cost-model file (InferMax: `INFERMAX_CONFIGURATIONS` or the file name)."""
    if hasattr(model, "tensor_parallel"):
        return model.model, model.gpu, model.tensor_parallel
    if path.name in INFERMAX_CONFIGURATIONS:
        return INFERMAX_CONFIGURATIONS[path.name]
    parts = path.stem.split("__")
    if len(parts) == 3 and parts[2].startswith("tp") and parts[2][2:].isdigit():
        llm, gpu = canonical_model_name(parts[0]), canonical_gpu_name(parts[1])
        if llm and gpu:
            return llm, gpu, int(parts[2][2:])
    return None


def _load(path: Path, kind: str):  # noqa: ANN202
    return load_infermax_model(path) if kind == "infermax" else load_cost_model(path)


def annotated(models_dir: Path, data_dir: Path, kinds=FORM_KINDS, only: set[tuple[str, str, int]] | None = None):
    """(path, current model, annotated model) for every non-derived file of ``kinds`` (``only``: these
    catalog (model, GPU, TP) configurations)."""
    files = []
    for kind in kinds:
        for path in sorted((models_dir / kind).glob("*.yaml")):
            m = _load(path, kind)
            if m.provenance.startswith("DERIVED"):
                continue
            config = configuration(path, m)
            if config is None:
                raise SystemExit(f"{path}: no (model, GPU, TP) known for this file (INFERMAX_CONFIGURATIONS)")
            if only is not None and config not in only:
                continue
            files.append((path, m, config))
    groups = load_groups(data_dir, only=only)
    out = []
    for path, m, config in files:
        found = groups.get(group_key(*config))
        group, label = found if found else (None, "")
        bt = None
        bt_path = models_dir / cost_model_filename("batchtime", *config)
        if group is not None and group.attention_added and bt_path.exists():
            bt = load_cost_model(bt_path)
        new = annotate(m, group, label, batchtime=bt)
        if path.name in INFERMAX_CONFIGURATIONS and PUBLISHED not in new.caveats:
            new = new.model_copy(update={"caveats": [PUBLISHED, *new.caveats]})
        before = m.model_dump(mode="json", exclude=set(NEW_FIELDS))
        after = new.model_dump(mode="json", exclude=set(NEW_FIELDS))
        if before != after:  # the whole suite depends on the coefficients
            raise SystemExit(f"{path}: annotation would change fields other than {NEW_FIELDS}")
        out.append((path, m, new))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kind", choices=KINDS, action="append", help="only these kinds (repeatable)")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a file differs")
    parser.add_argument("--data", type=Path, help="the shared data directory (default: $PLANNER_SHARED_DATA, else "
                                                   "../shared/data beside the repository)")
    args = parser.parse_args()
    data_dir = args.data or Path(os.environ.get("PLANNER_SHARED_DATA", ROOT.parent.parent / "shared" / "data"))
    if not (data_dir / "profiling").is_dir():
        print(f"{data_dir}: no profiling/ directory (the shared data directory; --data)", file=sys.stderr)
        return 1
    stale = []
    for path, current, new in annotated(ROOT, data_dir, tuple(args.kind or KINDS)):
        if args.check:
            if current.model_dump(mode="json", include=set(NEW_FIELDS)) != new.model_dump(
                    mode="json", include=set(NEW_FIELDS)):
                stale.append(path.name)
            continue
        save_cost_model(new, path)
        print(f"wrote {path.relative_to(ROOT.parent)}")
    if stale:
        print(f"measured-rows sections differ (run python models/annotate_measured.py): {', '.join(stale)}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
