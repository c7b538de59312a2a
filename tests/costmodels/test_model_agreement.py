"""The fleet simulator, the placement MIP and the capacity bound on one batch, and the error between them.

Configuration: Llama-2-70B on A100-80GB-SXM, TP 4 (Splitwise measures it end to end).  Four batch times
of one batch (b prompts of c tokens; or decodes reading contexts d_j):

* ``T_sim``    — the fleet simulator under the batch-time file (`BatchTimeCost`, computed by the kernel's
  own `batch_seconds`);
* ``T_mip``    — the placement MIP's rows built from the Aladdin file (`formulation.build_model`): the
  (M2) decode row ``c2 + Σ_j (k3·ℓ_j + k2)`` and the (M3) TTFT row ``c1 + Σ k1·I`` read from the
  built matrix (coefficient × the row's scale L − base, for requests with ℓ = I: strictness 0, g = 0);
* ``T_bound``  — the capacity bound's per-batch charges under the same file (`capacity.bound._terms`:
  prefill k1·I and decode entry k2 + k3·L per request, plus c1 / c2 per batch);
* ``T_lin``    — the simulator under the same Aladdin file (`LinearBatchCost.from_aladdin`).

What is checked (the statement `docs` quote):

1. ``T_mip = T_bound = T_lin`` (relative 1e-9) on every shape: the MIP, the bound and the simulator's
   Aladdin path are one linearisation.
2. Decode: the batch-time decode part has Aladdin's Eq. 3 form (end-to-end rows, no all-reduce table),
   so the Aladdin coefficients the batch-time file derives (``derived.aladdin``) reproduce ``T_sim`` on
   every decode batch, mixed contexts included, within 1e-9 — the linearisation error of decode is 0.
3. The shipped Aladdin file is a separate fit (75 % of the same rows), and Eq. 2 has no Σc² and no
   per-prompt term, so on prefill the two cannot agree.  The disagreement checked, on each measured
   shape s (time y_s), is the triangle bound from the figures the files state:
   ``|T_mip(s) − T_sim(s)| / y_s ≤ max_ape(Aladdin file, phase) + ape_sim(s)``, and over all measured
   rows of the phase ``mean |T_mip − T_sim| / y ≤ mape(Aladdin file) + train_mape(batch-time file)``,
   with ape_sim(s) = |T_sim(s) − y_s|/y_s (its mean is the batch-time file's in-sample ``train_mape``,
   tests/fleet/test_fleet_batchtime.py).  The measured disagreement is far inside it (prefill mean 8.3 %,
   worst 29 %; decode mean 0.9 %, worst 4.1 %, relative to T_sim).
"""

from __future__ import annotations

import numpy as np
import pytest
from support import REPO

from planner.capacity.bound import _terms
from planner.catalog import find_gpu, find_model
from planner.core.types import PlannedRequest, SLOClass, SLOSet, WorkerConfig
from planner.costmodels.files import load_cost_model
from planner.costmodels.models import AladdinCostModel
from planner.fleet import BatchTimeCost, LinearBatchCost
from planner.fleet.costs import kernel_batch_seconds
from planner.placement.formulation import build_model
from planner.placement.problem import PlacementOptions, PlacementProblem

KEY = ("Llama-2-70B", "A100-80GB-SXM", 4)
BT = load_cost_model(REPO / "models/batchtime/llama-2-70b__a100-80gb-sxm__tp4.yaml")
ALADDIN = load_cost_model(REPO / "models/aladdin/llama-2-70b__a100-80gb-sxm__tp4.yaml")
LLM, GPU = find_model(KEY[0]), find_gpu(KEY[1])
SLO_S = 1000.0  # loose SLOs: every request is eligible everywhere; the rows are scaled by SLO − base

#: Shapes: ("prefill", b, c) = b prompts of c tokens; ("decode", contexts) = one decode per context.
SHAPES = [("prefill", 1, 128), ("prefill", 1, 8192), ("prefill", 8, 1024), ("prefill", 32, 512),
          ("decode", [512]), ("decode", [1024] * 16), ("decode", [4096] * 64), ("decode", [100, 2000, 7000, 300])]


def _derived_aladdin() -> AladdinCostModel:
    return AladdinCostModel(model=BT.model, gpu=BT.gpu, tensor_parallel=BT.tensor_parallel,
                            kv_bytes_per_token=ALADDIN.kv_bytes_per_token, **BT.derived["aladdin"].coefficients)


def _mip_times(cost: AladdinCostModel, lengths: list[int]) -> tuple[dict[int, float], dict[int, float], float, float]:
    """Per input length I (one new request each, ô = 2, strictness 0 so ℓ = I): its share of the (M3) TTFT
    row and of the (M2) decode row of the built MIP, in seconds (row coefficient × the row's scale), and
    the rows' constants c1, c2 as the MIP's arrays hold them."""
    requests = tuple(PlannedRequest(request_id=f"r{i}", arrival_s=0.0, input_tokens=n, output_tokens=2,
                             predicted_output_tokens=2) for i, n in enumerate(lengths))
    problem = PlacementProblem(
        name="agreement", model=LLM, worker=WorkerConfig(gpu=GPU, tensor_parallel=KEY[2]), cost=cost,
        slos=SLOSet(classes={"default": SLOClass(ttft_s=SLO_S, atgt_s=SLO_S)}), requests=requests,
        options=PlacementOptions(mode="colocated", strictness=0.0))
    pm = build_model(problem, 1)
    a = problem.arrays
    shares = []
    for family, base in (("ttft", a.prefill_base_s), ("decode_slo", a.decode_base_s)):
        block = next(b for b in pm.model.row_blocks if b.name == family)
        assert block.size == 1 and f"slo={SLO_S:g}s" in block.describe(0)  # one worker, one SLO value
        row = pm.model.matrix.getrow(block.start).toarray().ravel()
        cols = pm.assign.start + np.arange(pm.slots.pair_request.size)
        share = {}
        for col, req in zip(cols, pm.slots.pair_request):
            share[lengths[req]] = float(row[col]) * (SLO_S - base)
        assert row[pm.open.start] == -1.0  # Σ share·x ≤ (SLO − base)·y: the row is c + Σ share ≤ SLO
        shares.append(share)
    return shares[0], shares[1], a.prefill_base_s, a.decode_base_s


def _batch(shape) -> tuple[list[tuple[int, int]], list[int]]:
    if shape[0] == "prefill":
        return [(shape[2], 0)] * shape[1], []
    return [], list(shape[1])


def _three_times(shape, cost: AladdinCostModel) -> tuple[float, float, float]:
    """(T_mip, T_bound, T_lin) of one shape under the Aladdin model ``cost``."""
    chunks, decodes = _batch(shape)
    lengths = sorted({c for c, _ in chunks} | set(decodes))
    pre, dec, c1, c2 = _mip_times(cost, lengths)
    t = _terms(np.array(lengths), np.full(len(lengths), 2), cost, 1e12, SLO_S, SLO_S)
    b_pre, b_dec = dict(zip(lengths, t.pre)), dict(zip(lengths, t.dec))
    if chunks:
        mip = c1 + sum(pre[c] for c, _ in chunks)
        bound = cost.prefill_base_s + sum(b_pre[c] for c, _ in chunks)
    else:
        mip = c2 + sum(dec[d] for d in decodes)
        bound = cost.decode_base_s + sum(b_dec[d] for d in decodes)
    lin = kernel_batch_seconds(LinearBatchCost.from_aladdin(cost), chunks, decodes)
    return mip, bound, lin


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_mip_bound_and_simulator_share_one_linearisation(shape):
    for cost in (ALADDIN, _derived_aladdin()):
        mip, bound, lin = _three_times(shape, cost)
        assert mip == pytest.approx(lin, rel=1e-9) and bound == pytest.approx(lin, rel=1e-9), (shape, cost.provenance)


@pytest.mark.parametrize("shape", [s for s in SHAPES if s[0] == "decode"], ids=str)
def test_decode_linearisation_error_is_zero_with_the_derived_coefficients(shape):
    assert BT.allreduce is None and BT.source_kind == "measured end-to-end"
    assert BT.derived["aladdin"].approximation_mape["decode"] == pytest.approx(BT.fit.phases["decode"].train_mape,
                                                                               abs=1e-4)
    sim = kernel_batch_seconds(BatchTimeCost.from_batchtime(BT), *_batch(shape))
    mip, _, _ = _three_times(shape, _derived_aladdin())
    assert mip == pytest.approx(sim, rel=1e-9)


def test_shipped_aladdin_file_and_simulator_disagree_within_the_stated_errors(shared_data):
    """Docstring item 3, on every measured row of the configuration (T_mip per row from the MIP's per-request
    shares: b·share(c) + c1, or b·share(d) + c2)."""
    from planner.costmodels.measured_error import load_groups

    group, _ = next(iter(load_groups(shared_data, only={KEY}).values()))
    rows = group.rows
    sim_cost = BatchTimeCost.from_batchtime(BT)
    lengths = sorted(set(rows.chunk_tokens.astype(int)) | set(rows.context_tokens.astype(int)) - {0})
    pre, dec, c1, c2 = _mip_times(ALADDIN, lengths)
    stated = ALADDIN.measured_rows.phases
    for phase in ("prefill", "decode"):
        part = rows[rows.phase == phase]
        y = part.time_s.to_numpy(float)
        sim, mip = [], []
        for b, c, d in zip(part.batch_size.astype(int), part.chunk_tokens.astype(int), part.context_tokens.astype(int)):
            if phase == "prefill":
                sim.append(kernel_batch_seconds(sim_cost, [(c, 0)] * b, []))
                mip.append(c1 + b * pre[c])
            else:
                sim.append(kernel_batch_seconds(sim_cost, [], [d] * b))
                mip.append(c2 + b * dec[d])
        sim, mip = np.array(sim), np.array(mip)
        ape_sim = np.abs(sim - y) / y * 100
        gap = np.abs(mip - sim) / y * 100
        assert ape_sim.mean() == pytest.approx(BT.fit.phases[phase].train_mape, abs=1e-4)
        assert np.all(gap <= stated[phase].max_ape + ape_sim + 1e-6), phase
        assert gap.mean() <= stated[phase].mape + BT.fit.phases[phase].train_mape + 1e-6, phase
        # the disagreement is real on prefill (Eq. 2 lacks Σc² and the per-prompt term), small on decode
        if phase == "prefill":
            assert gap.max() > 10.0
        else:
            assert gap.mean() < 2.0
