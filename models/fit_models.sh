#!/usr/bin/env bash
# Re-fits every cost-model file shipped under models/ from ../shared/data (deterministic, seed 0).
# Order matters: Splitwise (end-to-end batch measurements) first; Vidur per-layer compositions
# (kernel-only, extrapolated attention: see planner/costmodels/vidur.py) then fill in only the
# (model, GPU, TP) combinations Splitwise does not cover (existing files are kept).
# Batch-time models (models/batchtime/): the same order; their cross-validated error is against measured rows
# only (Vidur: compositions of measured kernel rows, planner/costmodels/batchtime_sources.py), and each file
# carries the Aladdin / bilinear / InferMax coefficients projected from it with their error.
set -euo pipefail
cd "$(dirname "$0")/.."
DATA=${PLANNER_SHARED_DATA:-../shared/data}
planner fit "$DATA/profiling/splitwise_sim/perf_model.csv" --format splitwise --kind both --out-dir models "$@"
planner fit "$DATA/profiling/vidur" --format vidur --kind both --out-dir models "$@"
planner fit "$DATA/profiling/splitwise_sim/perf_model.csv" --format splitwise --kind batchtime --out-dir models "$@"
planner fit "$DATA/profiling/vidur" --format vidur --kind batchtime --out-dir models "$@"
# Each Aladdin / bilinear / hetero file's own error against the measured rows of its configuration (the rows
# and folds of its batch-time file) and its caveats (attention extrapolated, above the 5 % target, ...);
# coefficients unchanged. Needs the batch-time files above. DERIVED files get theirs from their scripts below.
python models/annotate_measured.py --data "$DATA" --kind aladdin --kind bilinear
# Llama-2-13B has no profiles: its files are derived from the 7B ones (labelled DERIVED, with caveats; see the script).
python models/derive_llama2_13b.py
python models/annotate_measured.py --data "$DATA" --kind infermax
