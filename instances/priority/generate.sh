#!/usr/bin/env bash
# Regenerates the generated priority instances (the fig*_toy.yaml files are hand-written).
# Run from the repository root:  bash instances/priority/generate.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
D=instances/priority
planner generate priority $D/paper_mix_n10_b1.yaml --jobs 10 --b-max 1 --seed 1 --force
planner generate priority $D/hetero_n10_b2.yaml --jobs 10 --b-max 2 --seed 2 --slo-spread 0.5 --force
planner generate priority $D/hetero_n20_b1.yaml --jobs 20 --b-max 1 --seed 0 --slo-spread 0.5 --force
planner generate priority $D/hetero_n12_b4_mem.yaml --jobs 12 --b-max 4 --seed 4 --slo-spread 0.5 --token-capacity 3000 --force
