"""Errors that reach the user as one clear line.

`PlannerError` subclasses are caught by the CLI and printed as a single line
(no traceback).  Input errors always name the file, the field and the problem.
"""

from __future__ import annotations


class PlannerError(Exception):
    """Base class: an error the user can act on, printed as one line."""


class InputError(PlannerError):
    """A malformed input file or value: `<file>: <field>: <problem>`."""

    def __init__(self, source: str, field: str, problem: str) -> None:
        self.source = str(source)
        self.field = field
        self.problem = problem
        where = f"{self.source}: {field}" if field else self.source
        super().__init__(f"{where}: {problem}")


class SolverUnavailableError(PlannerError):
    """The requested solver cannot be used here (not installed, no license)."""


class InfeasibleError(PlannerError):
    """The problem has no feasible solution; the message names the culprit."""
