"""The machine line every benchmark script prints above its tables (one definition, shared).

Benchmarks run as scripts (``python benchmarks/<family>_scaling.py``), so this module is imported
from the scripts' own folder: ``from machine_info import machine_line``.
"""

from __future__ import annotations

import os
import platform
from importlib.metadata import PackageNotFoundError, version


def _version(package: str) -> str:
    try:
        return version(package)
    except PackageNotFoundError:
        return "not installed"


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            return next(line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or "unknown CPU"


def load_average() -> str:
    try:
        return "load average %.2f %.2f %.2f" % os.getloadavg()
    except OSError:
        return "load average unknown"


def machine_line(packages: tuple[str, ...] = ("highspy", "gurobipy", "numpy")) -> str:
    """CPU, visible cores, the load average now (other processes inflate wall times), Python and versions."""
    versions = ", ".join(f"{p} {_version(p)}" for p in (*packages, "planner"))
    return (f"{cpu_name()}, {os.cpu_count()} cores visible ({load_average()} at the start), "
            f"Python {platform.python_version()}, {platform.system()}, {versions}")
