#!/usr/bin/env bash
# Re-fits every cost-model file shipped under models/ from ../shared/data (deterministic, seed 0).
# Order matters: Splitwise (end-to-end batch measurements) first; Vidur per-layer compositions
# (kernel-only, extrapolated attention: see planner/costmodels/vidur.py) then fill in only the
# (model, GPU, TP) combinations Splitwise does not cover (existing files are kept).
set -euo pipefail
cd "$(dirname "$0")/.."
DATA=${PLANNER_SHARED_DATA:-../shared/data}
planner fit "$DATA/profiling/splitwise_sim/perf_model.csv" --format splitwise --kind both --out-dir models "$@"
planner fit "$DATA/profiling/vidur" --format vidur --kind both --out-dir models "$@"
