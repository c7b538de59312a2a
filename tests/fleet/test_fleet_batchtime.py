"""The fleet simulator under a batch-time model (planner/fleet/costs.py `BatchTimeCost`, the kernel's
`batch_seconds`): the kernel's batch time is the model's, the engine charges it batch by batch, and on the
measured Splitwise rows the simulator's per-batch times have the model's own error (decode ≤ 5 % MAPE;
prefill the file's in-sample figure)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from support import REPO, assert_one_line, run_cli

from planner.costmodels.batchtime import AllReduceTable, BatchTimeModel
from planner.costmodels.files import find_cost_model_path, load_cost_model
from planner.errors import PlannerError
from planner.fleet import BatchTimeCost, FleetRequests, LinearBatchCost, WorkerSpec, simulate_fleet
from planner.fleet.costs import kernel_batch_seconds

#: A model with every term the linear form lacks: floor, Σc·k, all-reduce table, two phase constants.
TOY = BatchTimeModel(
    model="toy", gpu="toy", tensor_parallel=2, source_kind="measured end-to-end", overhead_s=0.004,
    prefill_base_s=0.002, prefill_s_per_token=3e-5, prefill_floor_tokens=256.0, prefill_s_per_token_sq=2e-9,
    prefill_s_per_token_context=1.5e-9, prefill_s_per_request=5e-4, decode_base_s=0.001,
    decode_s_per_request=2e-4, decode_s_per_kv_token=4e-8,
    allreduce=AllReduceTable(tokens=[1.0, 64.0, 1024.0, 65536.0], seconds=[1e-4, 2e-4, 9e-4, 0.03]))

SHAPES = [  # (prefill chunks (c, k), decode contexts)
    ([(512, 0), (100, 300)], [100, 2000, 5]),
    ([(30, 0)], []),           # under the floor
    ([], [700] * 8),
    ([(4096, 1024)], []),
    ([], [1]),
    ([(70_000, 0)], [3]),      # beyond the all-reduce table's last point
]


@pytest.mark.parametrize("chunks, decodes", SHAPES)
def test_the_kernels_batch_time_is_the_models(chunks, decodes):
    cost = BatchTimeCost.from_batchtime(TOY)
    want = TOY.batch_time(chunks, decodes)
    assert kernel_batch_seconds(cost, chunks, decodes) == pytest.approx(want, rel=1e-12)
    c = [x for x, _ in chunks]
    assert cost.batch_seconds(sum(c), sum(x * x for x in c), len(c), sum(decodes), len(decodes),
                              sum(x * k for x, k in chunks)) == pytest.approx(want, rel=1e-12)


def test_a_linear_cost_runs_the_same_arithmetic_in_the_kernel():
    lin = LinearBatchCost(base=0.003, tok=1e-6, pb=0.01, pt=2e-4, pq=1e-9, pn=1e-3, db=0.04, dn=2e-4, dk=3e-7)
    for chunks, decodes in SHAPES:
        c = [x for x, _ in chunks]
        want = lin.batch_seconds(sum(c), sum(x * x for x in c), len(c), sum(decodes), len(decodes))
        assert kernel_batch_seconds(lin, chunks, decodes) == pytest.approx(want, rel=1e-13)


def test_the_engine_charges_each_batch_the_models_time():
    """Two prompts, one chunked over its own cached tokens (sarathi, P = 512): prompt A (1,300 tokens) runs as
    chunks 511@0, 511@511, 278@1022 (the first two beside one decode of B); every batch time is the model's,
    with the chunk's cached context k = tokens A already holds."""
    spec = WorkerSpec(cost=BatchTimeCost.from_batchtime(TOY), M=100_000, scheduler="sarathi", C=4096)
    # B (100 tokens, 3 outputs) arrives first and is prefilled alone; A arrives during that batch.
    res = simulate_fleet(FleetRequests([0.0, 1e-6], [100, 1300], [3, 2]), spec)
    t1 = TOY.batch_time([(100, 0)])                           # B's prefill
    # decode priority: B's decode (ctx 100) first, then A's chunk min(1300, P − 1) = 511 tokens
    t2 = TOY.batch_time([(511, 0)], [100])
    t3 = TOY.batch_time([(511, 511)], [101])                  # B's last decode beside A's second chunk
    t4 = TOY.batch_time([(278, 1022)])                        # A's last chunk over 1,022 cached tokens
    t5 = TOY.batch_time([], [1300])                           # A's one decode
    assert res.first_token_s[0] == pytest.approx(t1, rel=1e-12)
    assert res.finish_s[0] == pytest.approx(t1 + t2 + t3, rel=1e-12)
    assert res.first_token_s[1] == pytest.approx(t1 + t2 + t3 + t4, rel=1e-12)
    assert res.finish_s[1] == pytest.approx(t1 + t2 + t3 + t4 + t5, rel=1e-12)
    assert int(res.iterations.sum()) == 5


def _stream(n: int, seed: int) -> FleetRequests:
    rng = np.random.default_rng(seed)
    return FleetRequests(np.sort(rng.uniform(0, 20, n)), rng.integers(1, 1500, n), rng.integers(1, 300, n))


@pytest.mark.parametrize("scheduler", ["sarathi", "vllm"])
def test_fused_decode_stretches_are_bit_identical_under_a_batchtime_cost(scheduler):
    spec = WorkerSpec(cost=BatchTimeCost.from_batchtime(TOY), M=30_000, scheduler=scheduler, C=2048)
    requests = _stream(300, 1)
    fused = simulate_fleet(requests, spec, n_workers=3, fuse_decodes=True)
    plain = simulate_fleet(requests, spec, n_workers=3, fuse_decodes=False)
    for name in ("first_token_s", "finish_s", "busy_s", "iterations"):
        assert np.array_equal(getattr(fused, name), getattr(plain, name)), name


def test_a_mixed_fleet_runs_each_worker_under_its_own_cost_row():
    """A linear worker and a batch-time worker (whose cost row is longer: its all-reduce table) in one fleet,
    each request pinned to one of them by group: each worker's schedule is that of a fleet of it alone."""
    lin = WorkerSpec(cost=LinearBatchCost(pb=0.01, pt=2e-5, db=0.01, dn=2e-4, dk=1e-8), M=30_000, label="lin")
    bt = WorkerSpec(cost=BatchTimeCost.from_batchtime(TOY), M=30_000, label="bt")
    requests = _stream(200, 2)
    groups = np.arange(requests.n) % 2
    mixed = simulate_fleet(requests, [lin, bt], request_groups=groups, worker_groups=[0, 1])
    for g, spec in enumerate((lin, bt)):
        mine = groups == g
        alone = simulate_fleet(FleetRequests(requests.arrival_s[mine], requests.input_tokens[mine],
                                             requests.output_tokens[mine]), spec)
        assert np.array_equal(mixed.finish_s[mine], alone.finish_s)
        assert mixed.busy_s[g] == alone.busy_s[0]


def test_a_bad_all_reduce_table_is_one_clear_error():
    with pytest.raises(PlannerError, match="all-reduce table"):
        BatchTimeCost(db=0.01, allreduce_tokens=(1.0, 1.0), allreduce_seconds=(0.0, 1.0))
    with pytest.raises(PlannerError, match="all-reduce table"):
        BatchTimeCost(db=0.01, allreduce_tokens=(1.0, 2.0), allreduce_seconds=(0.0,))


# ---------------------------------------------------------------- measured Splitwise rows (../shared/data)


def _simulated_row_time(cost: BatchTimeCost, phase: str, b: int, c: int, d: int) -> float:
    """One measured row replayed through `simulate_fleet`: b requests arrive at 0 on one worker (sarathi-pc,
    C = b·prompt, so all prompts form one prefill batch).  Prefill row: b prompts of c tokens, one output
    token each → the first-token time.  Decode row: b prompts of d tokens, two output tokens → the second
    batch is b decodes reading d KV tokens each; its time is finish − first token."""
    prompt, out = (c, 1) if phase == "prefill" else (d, 2)
    spec = WorkerSpec(cost=cost, M=10**9, scheduler="sarathi-pc", C=b * prompt, R_max=b)
    res = simulate_fleet(FleetRequests(np.zeros(b), np.full(b, prompt), np.full(b, out)), spec)
    assert int(res.iterations.sum()) == out
    return float(res.first_token_s[0] if phase == "prefill" else res.finish_s[0] - res.first_token_s[0])


def test_splitwise_rows_through_the_simulator_have_the_models_error(shared_data):
    """Every Splitwise (model, GPU, TP) group, every measured row through the simulator: decode MAPE ≤ 5 %;
    prefill and decode MAPE equal the batch-time file's in-sample ``train_mape`` (stated to 4 decimals),
    so the simulator's cost path cannot drift from the model files."""
    from planner.costmodels.batchtime_sources import splitwise_groups
    from planner.costmodels.profiles import read_splitwise

    profile, _ = read_splitwise(shared_data / "profiling/splitwise_sim/perf_model.csv")
    groups = splitwise_groups(profile)
    assert len(groups) >= 10
    for g in groups:
        path = find_cost_model_path("batchtime", g.model, g.gpu, g.tensor_parallel, REPO / "models")
        assert path is not None, (g.model, g.gpu, g.tensor_parallel)
        bt = load_cost_model(path)
        cost = BatchTimeCost.from_batchtime(bt)
        rows = g.rows
        sim = np.array([_simulated_row_time(cost, ph, int(b), int(c), int(k)) for ph, b, c, k in
                        zip(rows.phase, rows.batch_size, rows.chunk_tokens, rows.context_tokens)])
        y = rows.time_s.to_numpy(float)
        assert np.allclose(sim, bt.predict_rows(rows), rtol=1e-12, atol=0)
        for phase in ("prefill", "decode"):
            part = (rows.phase == phase).to_numpy()
            mape = float(np.mean(np.abs(sim[part] - y[part]) / y[part]) * 100)
            assert round(mape, 4) == pytest.approx(bt.fit.phases[phase].train_mape, abs=1e-6), (path.name, phase)
            if phase == "decode":
                assert mape <= 5.0, (path.name, mape)


# ---------------------------------------------------------------- WorkerSpec and CLI


def test_from_batchtime_takes_the_kv_limit_like_from_aladdin():
    from planner.catalog import find_gpu, find_model
    from planner.core.types import WorkerConfig

    llm, gpu = find_model("Llama-2-70B"), find_gpu("A100-80GB-SXM")
    worker = WorkerConfig(gpu=gpu, tensor_parallel=4)
    bt = load_cost_model(REPO / "models/batchtime/llama-2-70b__a100-80gb-sxm__tp4.yaml")
    aladdin = load_cost_model(REPO / "models/aladdin/llama-2-70b__a100-80gb-sxm__tp4.yaml")
    spec = WorkerSpec.from_batchtime(llm, worker, bt, scheduler="sarathi")
    assert spec.M == WorkerSpec.from_aladdin(llm, worker, aladdin).M
    assert isinstance(spec.cost, BatchTimeCost) and spec.cost.pq == bt.prefill_s_per_token_sq > 0
    with pytest.raises(PlannerError, match="TP 4"):
        WorkerSpec.from_batchtime(llm, WorkerConfig(gpu=gpu, tensor_parallel=2), bt)


def test_cli_simulates_a_fleet_under_a_batchtime_file(monkeypatch, capsys):
    path = REPO / "models/batchtime/llama-2-70b__a100-80gb-sxm__tp4.yaml"
    base = ["simulate", "fleet", "--model", "Llama-2-70B", "--gpu", "A100-80GB-SXM", "--rate", "1",
            "--duration", "20", "--workers", "1", "--cost-model", str(path)]
    code, out, err = run_cli(monkeypatch, capsys, *base, "--tp", "4", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["cost_model_kind"] == "batchtime" and data["cost_model_file"] == str(path)
    assert any(c.startswith("above_target") for c in data["cost_model_caveats"])
    assert data["p50_ttft_s"] > 0
    code, _, err = run_cli(monkeypatch, capsys, *base, "--tp", "2")
    assert_one_line(code, err, "fitted for TP 4")
    code, _, err = run_cli(monkeypatch, capsys, *[a if a != "Llama-2-70B" else "Llama-2-7B" for a in base],
                           "--tp", "4")
    assert_one_line(code, err, "fitted for model Llama-2-70B")
