"""The registry of formulation families: which exist in this install and which family an instance file
belongs to.  The contract each family implements (`FamilyHarness`, `RunOptions`) is `planner.core.contract`.

Each family package ``planner/<family>/harness.py`` defines ``HARNESS = FamilyHarness(...)``.
`available_families` imports the modules listed in `FAMILY_MODULES` that exist in this install.

Instance discovery (`family_of`): a YAML instance file belongs to family F when its top-level
``family:`` key is F, or, lacking that key, when it sits in a directory named F (the layout of
``instances/<family>/``).  Other files (CSV sidecars, READMEs, scripts) are not instances.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from planner.core.contract import FamilyHarness, RunOptions  # noqa: F401 (the contract, re-exported)

FAMILY_MODULES: dict[str, str] = {
    "placement": "planner.placement.harness",
    "batching": "planner.batching.harness",
    "priority": "planner.priority.harness",
    "queueing": "planner.queueing.harness",
    "deployment": "planner.deployment.harness",
    "deployment-tp": "planner.deployment.tp_harness",
    "routing": "planner.deployment.routing_harness",
}


def available_families() -> dict[str, FamilyHarness]:
    """The families present in this install, by name, in `FAMILY_MODULES` order."""
    found: dict[str, FamilyHarness] = {}
    for name, module in FAMILY_MODULES.items():
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name and module.startswith(exc.name):  # the family is absent, not broken
                continue
            raise
        found[name] = mod.HARNESS
    return found


def family_of(path: Path, families: dict[str, FamilyHarness] | None = None) -> str | None:
    """The family an instance file belongs to, or None (see the module docstring)."""
    from planner.core.io import read_yaml_mapping
    from planner.errors import PlannerError

    families = families if families is not None else available_families()
    if path.suffix.lower() not in (".yaml", ".yml"):
        return None
    try:  # the loaders' reading rules: a regular UTF-8 file under the size cap, aliases bounded
        data = read_yaml_mapping(path)
    except PlannerError:
        return None
    if not isinstance(data, dict):
        return None
    declared = data.get("family")
    if isinstance(declared, str):
        return declared if declared in families else None
    for parent in path.resolve().parents:
        if parent.name in families:
            return parent.name
    return None
