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


def find_gpu(name: str, *, aliases: bool = True) -> GPUSpec | None:
    """The catalog GPU called ``name`` (or an alias), or None.

    With ``aliases=False`` only the catalog name itself (any letter case) is accepted: a family alias
    such as ``A100-80GB`` or ``H100`` names several SKUs (SXM, PCIe, NVL) and is not read as one of them
    (`gpu_alias_problem` gives the one-line reason to show)."""
    canonical = _index("gpus").get(name.lower())
    if canonical is None or (not aliases and canonical.lower() != name.lower()):
        return None
    entry = {k: v for k, v in _load("gpus")[canonical].items() if k not in ("aliases", "source")}
    return GPUSpec(name=canonical, **entry)


def gpu_alias_problem(name: str) -> str | None:
    """Why ``name`` is refused where only catalog names count (None when it is a catalog name or unknown):
    it is an alias, and the catalog GPUs it could mean are listed instead of picking one."""
    canonical = _index("gpus").get(name.lower())
    if canonical is None or canonical.lower() == name.lower():
        return None
    stem = name.lower().split("-")[0]
    similar = sorted({g for g in gpu_names() if g.lower().split("-")[0] == stem} | {canonical})
    what = f"several SKUs ({', '.join(similar)})" if len(similar) > 1 else canonical
    return (f"{name!r} is not a catalog GPU name but an alias of {what}; write the exact catalog name, or give "
            "the GPU's specs (memory_gb) and price to define it")


def canonical_gpu_name(name: str) -> str | None:
    return _index("gpus").get(name.lower())


def canonical_model_name(name: str) -> str | None:
    return _index("models").get(name.lower())
