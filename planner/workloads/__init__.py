"""Workloads: length distributions derived from real traces, Poisson streams, trace replay."""

from planner.workloads.lengths import LengthDistribution, derive_length_distribution, load_length_distribution
from planner.workloads.streams import find_distribution, poisson_workload

__all__ = [
    "LengthDistribution",
    "derive_length_distribution",
    "find_distribution",
    "load_length_distribution",
    "poisson_workload",
]
