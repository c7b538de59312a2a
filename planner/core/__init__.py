"""Shared problem data: models, GPUs, worker configurations, SLOs, workloads, results."""

from planner.core.types import (
    GPUSpec,
    LLMSpec,
    Request,
    SLOClass,
    SLOSet,
    Workload,
    WorkerConfig,
)

__all__ = [
    "GPUSpec",
    "LLMSpec",
    "Request",
    "SLOClass",
    "SLOSet",
    "Workload",
    "WorkerConfig",
]
