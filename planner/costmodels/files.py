"""Cost-model files: YAML under ``models/<kind>/<model>__<gpu>__tp<g>.yaml``."""

from __future__ import annotations

import os
import re
from pathlib import Path

import yaml
from pydantic import TypeAdapter

from planner.catalog import canonical_gpu_name, canonical_model_name
from planner.core.io import read_yaml_mapping, validate_model
from planner.core.outputs import replace_atomically
from planner.costmodels.models import AladdinCostModel, BilinearCostModel, CostModel
from planner.errors import InputError

_ADAPTER: TypeAdapter = TypeAdapter(CostModel)


def default_models_dir() -> Path:
    """``$PLANNER_MODELS_DIR``, else ``./models``, else the ``models/`` beside the package source."""
    env = os.environ.get("PLANNER_MODELS_DIR")
    if env:
        return Path(env)
    here = Path.cwd() / "models"
    if here.is_dir():
        return here
    return Path(__file__).resolve().parents[2] / "models"


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9.]+", "-", text.lower()).strip("-")


def cost_model_filename(kind: str, model: str, gpu: str, tensor_parallel: int) -> str:
    return f"{kind}/{slug(model)}__{slug(gpu)}__tp{tensor_parallel}.yaml"


def load_cost_model(path: Path | str) -> AladdinCostModel | BilinearCostModel:
    data = read_yaml_mapping(path)
    if data.get("kind") == "hetero":  # p1..p8 static-batching model (deployment family, §5.2)
        from planner.costmodels.models import HeteroCostModel

        return validate_model(HeteroCostModel, data, path)
    if data.get("kind") == "batchtime":  # one batch-time model per configuration (planner.costmodels.batchtime)
        from planner.costmodels.batchtime import BatchTimeModel

        return validate_model(BatchTimeModel, data, path)
    if "kind" not in data:
        raise InputError(path, "kind", "required field is missing (aladdin or bilinear)")
    if data["kind"] not in ("aladdin", "bilinear"):
        raise InputError(path, "kind", f"unknown cost-model kind {data['kind']!r} (expected aladdin or bilinear)")
    cls = AladdinCostModel if data["kind"] == "aladdin" else BilinearCostModel
    return validate_model(cls, data, path)


def save_cost_model(model: AladdinCostModel | BilinearCostModel, path: Path | str) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = model.model_dump(mode="json", exclude_none=True)
    # atomic, through a private temporary file: a crash never leaves a half-written model file
    return replace_atomically(path, yaml.safe_dump(data, sort_keys=False, width=200, allow_unicode=True))


def find_cost_model(
    kind: str, model: str, gpu: str, tensor_parallel: int, models_dir: Path | str | None = None
) -> AladdinCostModel | BilinearCostModel | None:
    """The shipped/fitted model file for this (model, GPU, TP), or None."""
    path = find_cost_model_path(kind, model, gpu, tensor_parallel, models_dir)
    return None if path is None else load_cost_model(path)


def find_cost_model_path(
    kind: str, model: str, gpu: str, tensor_parallel: int, models_dir: Path | str | None = None
) -> Path | None:
    """The path of the file `find_cost_model` reads for this (model, GPU, TP), or None."""
    root = Path(models_dir) if models_dir else default_models_dir()
    names = {model, canonical_model_name(model) or model}
    gpus = {gpu, canonical_gpu_name(gpu) or gpu}
    for m in sorted(names):
        for g in sorted(gpus):
            path = root / cost_model_filename(kind, m, g, tensor_parallel)
            if path.exists():
                return path
    return None


def list_cost_models(kind: str, models_dir: Path | str | None = None) -> list[Path]:
    root = Path(models_dir) if models_dir else default_models_dir()
    return sorted((root / kind).glob("*.yaml"))
