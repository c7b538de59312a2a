"""Workload distributions (derived from real traces) and worker configuration (Eq. 5–6)."""

from __future__ import annotations

import numpy as np
import pytest

from support import REPO
from planner.catalog import find_gpu, find_model
from planner.costmodels.files import find_cost_model
from planner.placement.worker_config import worker_configurations
from planner.workloads.lengths import derive_length_distribution, read_trace_lengths
from planner.workloads.streams import find_distribution, poisson_workload

TRACES = {
    "sharegpt": ("traces/vidur_processed/sharegpt_8k_filtered_stats_llama2_tokenizer.csv", "sharegpt"),
    "azure_conv": ("traces/azure_llm_inference_2023/AzureLLMInferenceTrace_conv.csv", "azure"),
    "azure_code": ("traces/azure_llm_inference_2023/AzureLLMInferenceTrace_code.csv", "azure"),
}


@pytest.mark.parametrize("name", sorted(TRACES))
def test_shipped_distribution_reproduces_the_trace(shared_data, name):
    rel, fmt = TRACES[name]
    inputs, outputs, _ = read_trace_lengths(shared_data / rel, fmt)
    dist = find_distribution(name, REPO / "models")
    assert dist.num_samples == len(inputs)
    assert dist.mean_input == pytest.approx(inputs.mean(), rel=0.01)
    assert dist.mean_output == pytest.approx(outputs.mean(), rel=0.01)
    # samples reproduce the medians within a few percent
    s_in, s_out = dist.sample(20000, np.random.default_rng(0))
    assert np.median(s_in) == pytest.approx(np.median(inputs), rel=0.05)
    assert np.median(s_out) == pytest.approx(np.median(outputs), rel=0.08)


def test_derive_is_deterministic_and_respects_a_context_cap():
    rng = np.random.default_rng(3)
    inp = rng.integers(10, 4000, 5000)
    out = rng.integers(1, 800, 5000)
    a = derive_length_distribution(inp, out, name="x", source="synthetic")
    b = derive_length_distribution(inp, out, name="x", source="synthetic")
    assert a == b
    i, o = a.sample(3000, np.random.default_rng(1), max_total_tokens=2048)
    assert (i + o <= 2048).all() and (i >= 1).all() and (o >= 1).all()


def test_poisson_stream_is_seeded_and_has_the_right_rate():
    dist = find_distribution("sharegpt", REPO / "models")
    w1 = poisson_workload(dist, rate=5.0, duration_s=400, seed=7, max_total_tokens=4096)
    w2 = poisson_workload(dist, rate=5.0, duration_s=400, seed=7, max_total_tokens=4096)
    assert w1 == w2
    assert len(w1) == pytest.approx(2000, rel=0.1)  # 5 req/s × 400 s
    assert (w1.input_tokens + w1.predicted_output_tokens <= 4096).all()


def test_predictor_and_conditional_mean():
    dist = find_distribution("azure_conv", REPO / "models")
    pred = dist.predict_output(np.array([100, 1000, 4000]))
    assert (pred >= 1).all()
    # E[o | o > g] exceeds g and grows with g
    c1, c2 = dist.conditional_mean_output(1000, 50), dist.conditional_mean_output(1000, 400)
    assert 50 < c1 < c2 and c2 > 400


def test_worker_config_reproduces_aladdin_table3_for_profiled_models():
    # Aladdin Table 3 (A100): Llama-2-70B → 2 GPUs/worker, Llama-2-7B → 1 (Table 2 SLOs 75 / 15 ms).
    dist = find_distribution("sharegpt", REPO / "models")
    for model, atgt, expected in (("Llama-2-70B", 0.075, 2), ("Llama-2-7B", 0.015, 1)):
        report = worker_configurations(
            find_model(model), find_gpu("A100"), atgt_s=atgt, mean_input=dist.mean_input,
            mean_output=dist.mean_output, models_dir=str(REPO / "models"),
        )
        assert report.best is not None and report.best.tensor_parallel == expected, report.to_dict()


def test_worker_config_memory_infeasibility_is_reported_not_raised():
    # 70B weights are 138 GB: one 80 GB A100 cannot hold them; a V100 box of 4 (128 GB) neither.
    report = worker_configurations(
        find_model("Llama-2-70B"), find_gpu("V100"), atgt_s=0.075, mean_input=1000, mean_output=200,
        degrees=(1, 2, 4), models_dir=str(REPO / "models"),
    )
    assert report.best is None
    assert all(not o.feasible and "do not fit" in o.reason for o in report.options)


def test_worker_config_eq6_arithmetic_by_hand():
    # Llama-2-70B on A100, TP2: M_kv = 2·80 GB − 137.95 GB = 22.05 GB; k̄v = 327680·(Ī + Ō/2).
    # b_slo = (t_atgt − c2)/(k2 + k3·l̄); b* = min(B_kv, b_slo); thr = b*/t(b*)/2.
    cost = find_cost_model("aladdin", "Llama-2-70B", "A100-80GB-SXM", 2, REPO / "models")
    I, O, atgt = 1000.0, 200.0, 0.075
    ctx = I + O / 2
    b_kv = (2 * 80e9 - 68976648192 * 2) / (327680 * ctx)
    b_slo = (atgt - cost.decode_base_s) / (cost.decode_s_per_request + cost.decode_s_per_context_token * ctx)
    b = min(b_kv, b_slo)
    thr = b / (cost.decode_base_s + b * (cost.decode_s_per_request + cost.decode_s_per_context_token * ctx)) / 2
    report = worker_configurations(find_model("Llama-2-70B"), find_gpu("A100"), atgt_s=atgt, mean_input=I,
                                   mean_output=O, degrees=(2,), cost_models={2: cost})
    opt = report.options[0]
    assert opt.batch_kv == pytest.approx(b_kv) and opt.batch_slo == pytest.approx(b_slo)
    assert opt.tokens_per_s_per_gpu == pytest.approx(thr)
