"""CLI of the batching family (placeholder until the family lands)."""

from __future__ import annotations

from planner.cli.common import CommandGroups


def register(groups: CommandGroups) -> None:
    """Add this family's commands to the shared command groups."""
