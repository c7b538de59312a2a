"""A GPU outside the catalog in a capacity scenario: given as a mapping of its specs plus a price, planned
under the cost model fitted for its name, never allowed to shadow a catalog GPU, and bad mappings refused
with one line naming the file, the field and the problem.

The central check: a custom GPU with the A100-80GB-SXM catalog specs and a copy of the shipped A100 TP 4
cost model (renamed) must get exactly the catalog A100's capacity answer (same specs and cost model →
same simulation), priced at its own $/GPU-hour."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from support import REPO, assert_one_line, run_cli

from planner.capacity.run import configurations, run_capacity
from planner.capacity.scenario import load_scenario, read_capacity_file
from planner.catalog import find_gpu
from planner.costmodels.files import cost_model_filename
from planner.errors import InputError

MODELS = REPO / "models"
CATALOG = "A100-80GB-SXM"
CUSTOM = "A100-custom"


def _custom_copy(models_dir: Path, model: str, tensor_parallel: int, name: str = CUSTOM) -> Path:
    """The shipped Aladdin file of (model, A100-80GB-SXM, TP) copied under the custom GPU's name (same
    coefficients; the ``gpu`` field renamed), as `planner fit --gpu NAME --out-dir` would write it."""
    shipped = MODELS / cost_model_filename("aladdin", model, CATALOG, tensor_parallel)
    data = yaml.safe_load(shipped.read_text())
    data["gpu"] = name
    target = models_dir / cost_model_filename("aladdin", model, name, tensor_parallel)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(yaml.safe_dump(data, sort_keys=False))
    if not (models_dir / cost_model_filename("aladdin", model, CATALOG, tensor_parallel)).exists():
        (models_dir / cost_model_filename("aladdin", model, CATALOG, tensor_parallel)).write_text(shipped.read_text())
    return target


def _catalog_specs() -> dict:
    spec = find_gpu(CATALOG, aliases=False)
    assert spec is not None
    return {"name": CUSTOM, "memory_gb": spec.memory_gb, "memory_bandwidth_gb_s": spec.memory_bandwidth_gb_s,
            "fp16_tflops": spec.fp16_tflops}


def _scenario(tmp: Path, gpus: list[dict], *, rate: float = 4.0, models_dir: str | None = "models") -> Path:
    """A quick single-model scenario: fixed lengths, one rate, a 30 s window, no snapshot MIP."""
    raw = {"model": "Llama-2-70B", "slos": {"ttft_s": 2, "tpot_s": 0.1}, "workload": {"isl": 500, "osl": 100},
           "rates": [rate], "simulation": {"duration_s": 30, "snapshot": False}, "solve": {"time_limit_s": 2},
           "gpus": gpus}
    if models_dir is not None:
        raw["cost_models_dir"] = models_dir
    path = tmp / "scenario.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def test_custom_gpu_with_catalog_specs_and_cost_model_gets_the_catalog_answer_at_its_own_price(tmp_path):
    _custom_copy(tmp_path / "models", "Llama-2-70B", 4)
    path = _scenario(tmp_path, [{"type": CATALOG, "price_per_hour": 1.9, "tensor_parallel": [4]},
                                {"type": _catalog_specs(), "price_per_hour": 2.5, "tensor_parallel": [4]}])
    scenario = load_scenario(path)
    custom = scenario.gpus[1].spec
    assert (custom.name, custom.memory_gb, custom.price_per_hour) == (CUSTOM, 80.0, 2.5)
    assert Path(scenario.cost_model_source(CUSTOM, 4).path).name == "llama-2-70b__a100-custom__tp4.yaml"

    result = run_capacity(scenario, tmp_path / "out", executor="serial", progress=False)
    rows = {row.gpu: row for row in result.points.itertuples()}
    assert set(rows) == {CATALOG, CUSTOM}, result.failures
    ours, theirs = rows[CUSTOM], rows[CATALOG]
    # the comparison means something only if the search had to go past one worker
    assert theirs.workers >= 2
    for column in ("workers", "gpus", "bound_workers", "requests", "p_ttft_s", "p_tpot_s", "attainment"):
        assert getattr(ours, column) == getattr(theirs, column), column
    assert result.curves[(CUSTOM, 4, 4.0)] == result.curves[(CATALOG, 4, 4.0)]
    assert ours.usd_per_hour == pytest.approx(ours.gpus * 2.5)
    assert theirs.usd_per_hour == pytest.approx(theirs.gpus * 1.9)
    assert Path(ours.cost_model_path).name == "llama-2-70b__a100-custom__tp4.yaml"


def test_custom_gpu_memory_decides_which_degrees_fit(tmp_path):
    """The mapping's memory is the one used: 4 × 24 GB cannot hold Llama-2-70B's weights (~138 GB)."""
    _custom_copy(tmp_path / "models", "Llama-2-70B", 4, name="A100-small")
    small = {"name": "A100-small", "memory_gb": 24}
    scenario = load_scenario(_scenario(tmp_path, [
        {"type": CATALOG, "price_per_hour": 1.9, "tensor_parallel": [4]},
        {"type": small, "price_per_hour": 1.0, "tensor_parallel": [4]}]))
    chosen, excluded, _ = configurations(scenario)
    assert [(c.gpu, c.tensor_parallel) for c in chosen] == [(CATALOG, 4)]
    assert [(e.gpu, e.tensor_parallel) for e in excluded] == [("A100-small", 4)]


def test_a_multi_model_file_shares_a_custom_gpu(tmp_path):
    _custom_copy(tmp_path / "models", "Llama-2-70B", 4)
    _custom_copy(tmp_path / "models", "Llama-2-7B", 1)
    raw = {"models": [{"model": "Llama-2-70B", "slos": {"ttft_s": 2, "tpot_s": 0.1}, "rates": [1, 2]},
                      {"model": "Llama-2-7B", "slos": {"ttft_s": 1, "tpot_s": 0.05}, "rates": [5, 10]}],
           "gpus": [{"type": {"name": CUSTOM, "memory_gb": 80}, "price_per_hour": 2.5, "tensor_parallel": "all",
                     "available": 8}],
           "cost_models_dir": "models", "simulation": {"duration_s": 30, "snapshot": False}}
    path = tmp_path / "two.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    multi = read_capacity_file(path)
    assert [g.spec.name for g in multi.gpus] == [CUSTOM]
    assert (multi.gpus[0].spec.price_per_hour, multi.gpus[0].available) == (2.5, 8)
    assert [s.gpus[0].degrees for s in multi.models] == [(4,), (1,)]
    for s in multi.models:
        assert Path(s.cost_model_source(CUSTOM, s.gpus[0].degrees[0]).path).parent == tmp_path / "models" / "aladdin"

    raw["gpus"][0]["type"] = {"name": CUSTOM}
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    with pytest.raises(InputError) as err:
        read_capacity_file(path)
    assert str(err.value) == (f"{path}: gpus[0].type.memory_gb: required field is missing "
                              "(for models[0], Llama-2-70B)")


BAD = {
    "catalog name": ({"type": {"name": "A100-80GB-SXM", "memory_gb": 80}, "price_per_hour": 2},
                     "gpus[0].type.name: 'A100-80GB-SXM' is the catalog GPU; write the catalog name as text"),
    "catalog name, other case": ({"type": {"name": "a100-80gb-sxm", "memory_gb": 80}, "price_per_hour": 2},
                                 "gpus[0].type.name: 'a100-80gb-sxm' is the catalog GPU"),
    "alias": ({"type": {"name": "A100-80GB", "memory_gb": 80}, "price_per_hour": 2},
              "gpus[0].type.name: 'A100-80GB' is an alias in the GPU catalog (A100-80GB-PCIe, A100-80GB-SXM); "
              "write the catalog name as text (type: one of A100-80GB-PCIe, A100-80GB-SXM)"),
    "same cost-model file name": ({"type": {"name": "H100_80GB_SXM", "memory_gb": 80}, "price_per_hour": 2},
                                  "gpus[0].type.name: 'H100_80GB_SXM' shares its cost-model file name (h100-80gb-sxm) "
                                  "with the catalog GPU H100-80GB-SXM"),
    "missing memory": ({"type": {"name": "L40S-custom"}, "price_per_hour": 2},
                       "gpus[0].type.memory_gb: required field is missing"),
    "memory as text": ({"type": {"name": "L40S-custom", "memory_gb": "48"}, "price_per_hour": 2},
                       "gpus[0].type.memory_gb: expected a number"),
    "zero memory": ({"type": {"name": "L40S-custom", "memory_gb": 0}, "price_per_hour": 2},
                    "gpus[0].type.memory_gb: Input should be greater than 0"),
    "negative price": ({"type": {"name": "L40S-custom", "memory_gb": 48}, "price_per_hour": -1},
                       "gpus[0].price_per_hour: Input should be greater than 0"),
    "no price": ({"type": {"name": "L40S-custom", "memory_gb": 48}},
                 "gpus[0].price_per_hour: required: a GPU defined by its specs has no catalog price"),
    "price inside the specs": ({"type": {"name": "L40S-custom", "memory_gb": 48, "price_per_hour": 2}},
                               "gpus[0].type.price_per_hour: unknown field"),
    "unusable name": ({"type": {"name": "L40S/x", "memory_gb": 48}, "price_per_hour": 2},
                      "gpus[0].type.name: 'L40S/x' is not a usable GPU name"),
    "neither name nor mapping": ({"type": 5, "price_per_hour": 2},
                                 "gpus[0].type: must be a catalog GPU name or a mapping of its specs"),
    "unknown catalog name": ({"type": "L4-24GB", "price_per_hour": 2},
                             "gpus[0].type: unknown GPU type 'L4-24GB'",
                             "a GPU outside the catalog is defined in a scenario file by its specs"),
    "no cost model": ({"type": {"name": "L40S-custom", "memory_gb": 48}, "price_per_hour": 2},
                      "gpus[0].type: no Aladdin cost model for Llama-2-70B on L40S-custom at TP 1, 2, 4, 8",
                      "fit one with `planner fit PROFILE --model Llama-2-70B --gpu L40S-custom --out-dir DIR`"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_custom_gpus_are_one_line(tmp_path, case):
    entry, *needles = BAD[case]
    path = _scenario(tmp_path, [entry], models_dir=None)  # the shipped models: no file for a custom GPU
    with pytest.raises(InputError) as err:
        load_scenario(path)
    line = str(err.value)
    assert "\n" not in line and line.startswith(f"{path}: ")
    for needle in needles:
        assert needle in line, (needle, line)


def test_a_custom_gpu_twice_is_refused(tmp_path):
    _custom_copy(tmp_path / "models", "Llama-2-70B", 4)
    twice = [{"type": {"name": CUSTOM, "memory_gb": 80}, "price_per_hour": 2, "tensor_parallel": [4]},
             {"type": {"name": CUSTOM.lower(), "memory_gb": 40}, "price_per_hour": 1, "tensor_parallel": [4]}]
    with pytest.raises(InputError, match="gpus: each GPU type may appear once"):
        load_scenario(_scenario(tmp_path, twice))


def test_catalog_name_as_mapping_is_one_line_from_the_cli(tmp_path, monkeypatch, capsys):
    path = _scenario(tmp_path, [{"type": {"name": "H100-80GB-SXM", "memory_gb": 80}, "price_per_hour": 3}],
                     models_dir=None)
    code, out, err = run_cli(monkeypatch, capsys, "capacity", str(path), "--no-progress")
    assert out == ""
    assert_one_line(code, err, "gpus[0].type.name", "'H100-80GB-SXM' is the catalog GPU")
