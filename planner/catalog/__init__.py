"""Built-in model architectures and GPU SKUs (facts derived from ../shared/data/specs).

Look-ups accept the canonical name or any alias, case-insensitively.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources

import yaml

from planner.core.types import GPUSpec, LLMSpec


@lru_cache(maxsize=None)
def _load(kind: str) -> dict[str, dict]:
    text = resources.files("planner.catalog").joinpath(f"{kind}.yaml").read_text()
    return yaml.safe_load(text)


def _index(kind: str) -> dict[str, str]:
    table: dict[str, str] = {}
    for name, entry in _load(kind).items():
        table[name.lower()] = name
        for alias in entry.get("aliases", []):
            table[str(alias).lower()] = name
    return table


def model_names() -> list[str]:
    return list(_load("models"))


def gpu_names() -> list[str]:
    return list(_load("gpus"))


def find_model(name: str) -> LLMSpec | None:
    """The catalog model called ``name`` (or an alias), or None."""
    canonical = _index("models").get(name.lower())
    if canonical is None:
        return None
    entry = {k: v for k, v in _load("models")[canonical].items() if k not in ("aliases", "source")}
    return LLMSpec(name=canonical, **entry)


def find_gpu(name: str) -> GPUSpec | None:
    """The catalog GPU called ``name`` (or an alias), or None."""
    canonical = _index("gpus").get(name.lower())
    if canonical is None:
        return None
    entry = {k: v for k, v in _load("gpus")[canonical].items() if k not in ("aliases", "source")}
    return GPUSpec(name=canonical, **entry)


def canonical_gpu_name(name: str) -> str | None:
    return _index("gpus").get(name.lower())


def canonical_model_name(name: str) -> str | None:
    return _index("models").get(name.lower())
