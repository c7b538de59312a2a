"""Shared problem data: models, GPUs, worker configurations, SLOs, workloads, results."""

from planner.core.types import (
    GPUSpec,
    LLMSpec,
    PlannedRequest,
    Request,
    SLOClass,
    SLOSet,
    Workload,
    WorkerConfig,
)

__all__ = [
    "GPUSpec",
    "LLMSpec",
    "PlannedRequest",
    "Request",
    "SLOClass",
    "SLOSet",
    "Workload",
    "WorkerConfig",
]
