#!/usr/bin/env bash
# Re-fits the p1..p8 files (kind hetero, FORMULATIONS.md §5.2 Eq. 3-4) from ../shared/data (seed 0):
# Splitwise end-to-end batch measurements first, then Vidur per-layer compositions for the
# (model, GPU, TP) combinations Splitwise does not cover; then each file's measured-rows error and caveats;
# then the DERIVED V100 files (caveats: derived_from_other_gpu, no_measured_rows).
set -euo pipefail
cd "$(dirname "$0")/../.."
DATA=${PLANNER_SHARED_DATA:-../shared/data}
planner fit "$DATA/profiling/splitwise_sim/perf_model.csv" --format splitwise --kind hetero --out-dir models "$@"
planner fit "$DATA/profiling/vidur" --format vidur --kind hetero --out-dir models "$@"
# each file's error against the measured rows of its configuration and its caveats (needs models/batchtime/)
python models/annotate_measured.py --data "$DATA" --kind hetero
python models/hetero/derive_v100.py
