#!/usr/bin/env bash
# Regenerates the shipped placement instances (deterministic: fixed seeds).
# Lengths come from the distributions in models/workloads/ (derived from real traces);
# cost models from models/aladdin/ (fitted to the Splitwise profiles).
set -euo pipefail
cd "$(dirname "$0")/../.."
g="planner generate placement --force"
# One colocated heartbeat: 40 new ShareGPT requests on Llama-2-70B, 2xA100 workers (Aladdin Table 2 SLOs).
$g instances/placement/sharegpt-70b-a100-n40.yaml --workload sharegpt --requests 40 --seed 1
# A busy heartbeat: 30 new Azure-conversation requests arriving while 400 are decoding.
$g instances/placement/azure-conv-70b-a100-heartbeat.yaml --workload azure_conv --requests 30 --ongoing 400 --seed 2
# Split-phase decode workers (Aladdin §6.4): 250 ShareGPT requests, no TTFT/prefill constraints.
$g instances/placement/sharegpt-70b-a100-decode-n250.yaml --workload sharegpt --requests 250 --mode decode_only --seed 3
# H100 decode workers with KV headroom θ=0.8 and the strict end of the knob (λ=1): Azure code requests.
$g instances/placement/azure-code-70b-h100-decode-n120.yaml --workload azure_code --gpu H100-80GB-SXM --requests 120 \
   --mode decode_only --kv-headroom 0.8 --strictness 1.0 --tpot 0.05 --seed 4
