"""Reading a plan back from its JSON mapping, with one-line errors: ``plan: <field>: <problem>``.

Every family's ``from_dict(problem, data)`` (the Solution contract, `planner.harness.FamilyHarness`)
reads the mapping its solution's ``to_dict`` wrote, or one an operator wrote by hand.  These helpers
check one field each and raise `planner.errors.InputError` with source `PLAN` and the field's path
(``batches[3].tokens.r7``); a caller that knows the file re-raises it with the file's name
(`planner.cli.validate`).

Reading rules shared by every family:

* a whole number is a JSON integer (``3``); ``3.0``, ``"3"`` and ``true`` are refused, not converted;
* a name is non-empty text;
* keys a family does not know are refused (a misspelt key is not silently ignored); the summary
  fields ``to_dict`` writes next to the decisions (worker counts, metrics, times) are accepted and
  ignored: the validator recomputes them from the decisions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NoReturn

from planner.core.io import shown
from planner.errors import InputError

#: The source an error names until a caller that knows the file replaces it.
PLAN = "plan"


def refuse(field: str, problem: str) -> NoReturn:
    raise InputError(PLAN, field, problem)


def join(prefix: str, part: str | int) -> str:
    """``prefix.part`` or ``prefix[part]`` (a list index)."""
    if isinstance(part, int):
        return f"{prefix}[{part}]"
    return f"{prefix}.{part}" if prefix else part


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if value is None:
        return "null"
    if isinstance(value, str):
        return f"text {shown(value)}"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        return "a list"
    return shown(value)


def mapping(value: Any, field: str, *, allowed: Iterable[str] | None = None,
            required: Iterable[str] = ()) -> Mapping[str, Any]:
    """``value`` as a JSON object with every ``required`` key and no key outside ``allowed`` (when given)."""
    if not isinstance(value, Mapping):
        refuse(field, f"expected a mapping (JSON object), got {_kind(value)}")
    for key in required:
        if key not in value:
            refuse(join(field, key), "required key is missing")
    if allowed is not None:
        known = set(allowed)
        for key in value:
            if key not in known:
                name = str(key) if len(str(key)) <= 60 else str(key)[:60] + "…"
                refuse(join(field, name), f"unknown key (expected some of: {', '.join(sorted(known))})")
    return value


def items(value: Any, field: str) -> list[Any]:
    """``value`` as a JSON list."""
    if not isinstance(value, (list, tuple)):
        refuse(field, f"expected a list, got {_kind(value)}")
    return list(value)


def whole(value: Any, field: str, *, minimum: int = 0, maximum: int | None = None) -> int:
    """``value`` as a whole number in ``minimum..maximum``."""
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and abs(value) < 1e15 and value.is_integer():
            refuse(field, f"expected a whole number, got {value!r}: write {int(value)}")
        refuse(field, f"expected a whole number, got {_kind(value)}")
    if value < minimum:
        refuse(field, f"must be at least {minimum}, got {value}")
    if maximum is not None and value > maximum:
        refuse(field, f"must be at most {maximum:,}, got {shown(value)}")
    return int(value)


def name(value: Any, field: str) -> str:
    """``value`` as non-empty text (a request id, a job name, a method label)."""
    if not isinstance(value, str) or not value:
        refuse(field, f"expected a name (non-empty text), got {_kind(value)}")
    return value


def lookup(value: Any, index: Mapping[str, int], field: str, what: str) -> int:
    """The position of the name ``value`` in ``index`` (the problem's ids); an unknown name is one line."""
    key = name(value, field)
    if key not in index:
        refuse(field, f"unknown {what} {shown(key)} (not in the instance)")
    return index[key]


def number(value: Any, field: str, *, minimum: float = 0.0) -> float:
    """``value`` as a finite number ≥ ``minimum`` (a rate, a share, a load scale); text, a boolean, NaN or
    infinity is refused."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        refuse(field, f"expected a number, got {_kind(value)}")
    try:
        result = float(value)
    except OverflowError:  # an integer beyond the float range
        refuse(field, "must be a finite number, got an integer beyond the float range")
    if result != result or result in (float("inf"), float("-inf")):
        refuse(field, f"expected a finite number, got {value!r}")
    if result < minimum:
        refuse(field, f"must be at least {minimum:g}, got {result:g}")
    return result


def kind(data: Mapping[str, Any], kinds: Iterable[str], default: str) -> str:
    """The plan's ``kind`` key (one of ``kinds``; ``default`` when absent), for families with several plan kinds."""
    known = tuple(kinds)
    found = data.get("kind", default)
    if found not in known:
        refuse("kind", f"expected one of: {', '.join(known)}, got {shown(found)}")
    return found
