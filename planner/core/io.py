"""Reading instance files with one-line errors: ``<file>: <field>: <problem>``.

Nothing here lets a traceback reach the user: YAML syntax errors, missing
files, missing columns, unparsable cells and schema violations all become an
`InputError` naming the file, the field (with the row for CSV cells) and what
is wrong.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pandas as pd
import yaml
from pydantic import BaseModel, BeforeValidator, ValidationError

from planner.errors import InputError

M = TypeVar("M", bound=BaseModel)

#: Longest prompt or output (tokens) one request may have in an instance file: the longest context
#: window of current models; the token-level simulators keep one record per generated token.
MAX_REQUEST_TOKENS = 1_000_000

#: Longest input shown after a pydantic message as ``(got …)``; longer values (whole objects) are left out.
_MAX_SHOWN_INPUT = 80


def _reject_bool(value: Any) -> Any:
    if isinstance(value, bool):
        raise ValueError(f"expected a number, got {str(value).lower()}")  # noqa: TRY004 (pydantic needs ValueError)
    return value


#: Annotate a numeric field with this so YAML ``true``/``false`` is not read as 1/0.
NotBool = BeforeValidator(_reject_bool)


def check_unique(names: Sequence[str], kind: str, field: str) -> None:
    """A repeated name is a ``ValueError`` naming both places: ``duplicate {kind} 'x' (field[i] and field[k])``."""
    first: dict[str, int] = {}
    for k, name in enumerate(names):
        if name in first:
            raise ValueError(f"duplicate {kind} {name!r} ({field}[{first[name]}] and {field}[{k}])")
        first[name] = k


def check_family(data: Mapping[str, Any], path: Path | str, family: str) -> None:
    """A file of another family (its ``family:`` key) is one line saying so, before any field is checked."""
    found = data.get("family", family)
    if found != family:
        raise InputError(path, "family", f"this is a {found!r} instance, not a {family} one")


def read_yaml_mapping(path: Path | str) -> dict[str, Any]:
    """Parse a YAML file whose top level must be a mapping."""
    path = Path(path)
    if not path.exists():
        raise InputError(path, "", "file not found")
    if path.is_dir():
        raise InputError(path, "", "is a directory, expected a YAML file")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else "YAML"
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise InputError(path, where, f"not valid YAML ({problem})") from None
    except UnicodeDecodeError:
        raise InputError(path, "", "not a text file") from None
    if data is None:
        raise InputError(path, "", "file is empty")
    if not isinstance(data, Mapping):
        raise InputError(path, "", f"top level must be a mapping of keys, got {type(data).__name__}")
    return dict(data)


def format_validation_error(exc: ValidationError, prefix: str = "") -> tuple[str, str]:
    """The first pydantic error as (field path like ``groups[0].num_requests``, message)."""
    err = exc.errors()[0]
    loc = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err.get("loc", ()) if p != "__root__")
    field = f"{prefix}{loc}" if prefix else loc.removeprefix(".")
    msg = err.get("msg", "invalid value")
    msg = msg.removeprefix("Value error, ")
    if err.get("type") == "extra_forbidden":
        msg = "unknown field (check the spelling)"
    elif err.get("type") == "missing":
        msg = "required field is missing"
    elif "input" in err and err.get("type") not in ("model_type", "dict_type"):
        shown = _shown_input(err["input"], msg, err.get("type", ""))
        if shown:
            msg = f"{msg} (got {shown})"
    return field, msg


def _shown_input(value: Any, msg: str, kind: str) -> str:
    """The offending input for ``(got …)``, or "" when it is a whole object, too long, or already in ``msg``."""
    if isinstance(value, (Mapping, BaseModel)) and kind in ("value_error", "assertion_error"):
        return ""  # a model-level check: its message says what is wrong, the input is the whole object
    text = repr(value)
    if len(text) > _MAX_SHOWN_INPUT:
        return ""
    if kind in ("value_error", "assertion_error") and (
            "got " in msg or re.search(rf"(?<![\w.]){re.escape(text)}(?![\w.])", msg)):
        return ""
    return text


def validate_model(cls: type[M], data: Any, source: Path | str, field: str = "") -> M:
    """Validate ``data`` into ``cls``; errors become one `InputError` line."""
    try:
        return cls.model_validate(data)
    except ValidationError as exc:
        where, msg = format_validation_error(exc, field)
        raise InputError(source, where or field, msg) from None


def read_csv_table(
    path: Path | str,
    required: Mapping[str, type],
    optional: Mapping[str, type] | None = None,
) -> pd.DataFrame:
    """Read a CSV, check columns and cell types; report the first bad cell by row and column.

    ``required``/``optional`` map column name → python type (int, float, str).
    Row numbers in messages are 1-based data rows (the header is row 0).
    """
    path = Path(path)
    optional = dict(optional or {})
    if not path.exists():
        raise InputError(path, "", "file not found")
    try:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False, skipinitialspace=True)
    except pd.errors.EmptyDataError:
        raise InputError(path, "", "file is empty (expected a header row)") from None
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise InputError(path, "", f"not a valid CSV ({str(exc).splitlines()[0]})") from None
    frame.columns = [c.strip() for c in frame.columns]
    missing = [c for c in required if c not in frame.columns]
    if missing:
        raise InputError(path, missing[0], "required column is missing")
    known = set(required) | set(optional)
    unknown = [c for c in frame.columns if c not in known]
    if unknown:
        raise InputError(path, unknown[0], f"unknown column (expected some of: {', '.join(known)})")
    if frame.empty:
        raise InputError(path, "", "no data rows")
    out: dict[str, Any] = {}
    for col, typ in {**required, **optional}.items():
        if col not in frame.columns:
            continue
        out[col] = _convert_column(path, col, frame[col], typ, col in required)
    return pd.DataFrame(out)


def _convert_column(path: Path, col: str, values: pd.Series, typ: type, required: bool) -> Sequence:
    raw = values.str.strip()
    empty = raw == ""
    if required and empty.any():
        row = int(np.flatnonzero(empty.to_numpy())[0]) + 1
        raise InputError(path, f"row {row}, column {col}", "empty value")
    if typ is str:
        return raw.where(~empty, None)
    converted = pd.to_numeric(raw.where(~empty, None), errors="coerce")
    bad = converted.isna() & ~empty
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0]) + 1
        raise InputError(path, f"row {row}, column {col}", f"not a number: {raw.iloc[row - 1]!r}")
    if typ is int:
        finite = converted.dropna()
        frac = (finite % 1) != 0
        if frac.any():
            row = int(finite.index[np.flatnonzero(frac.to_numpy())[0]]) + 1
            raise InputError(path, f"row {row}, column {col}", f"must be a whole number, got {raw.iloc[row - 1]!r}")
        return converted.astype("Int64")
    return converted.astype(float)


def resolve_relative(base_file: Path | str, target: str | Path) -> Path:
    """Resolve ``target`` relative to the directory of ``base_file`` (absolute paths kept)."""
    target = Path(target).expanduser()
    return target if target.is_absolute() else Path(base_file).parent / target
