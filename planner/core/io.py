"""Reading instance files with one-line errors: ``<file>: <field>: <problem>``.

Nothing here lets a traceback reach the user: YAML syntax errors, missing
files, missing columns, unparsable cells and schema violations all become an
`InputError` naming the file, the field (with the row for CSV cells) and what
is wrong.
"""

from __future__ import annotations

import csv
import re
import warnings
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

#: A number in exponent form that YAML 1.1 (PyYAML) reads as text: no dot in the mantissa (``1e6``) or no
#: sign in the exponent (``1.5e6``); ``1.0e+6`` is a float.
_YAML_TEXT_EXPONENT = re.compile(r"[-+]?(?:\d[\d_]*\.?[\d_]*|\.\d[\d_]*)[eE][-+]?\d+")

#: Whole numbers in a CSV int column must fit numpy's int64.
_INT64_LIMIT = 2.0**63


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


class _DuplicateKey(yaml.YAMLError):
    def __init__(self, key: Any, line: int) -> None:
        super().__init__(f"key {key!r} appears twice in one mapping (YAML would silently keep the last)")
        self.key, self.line = key, line


#: libyaml's parser when PyYAML was built with it (about 20× faster on large instance files), else pure Python.
_SafeLoaderBase = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _UniqueKeyLoader(_SafeLoaderBase):  # type: ignore[misc,valid-type]
    """A safe loader that refuses a key repeated in one mapping (``{M: 100, M: 1}``), which plain
    YAML loading resolves silently to the last value."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen: set = set()
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=deep)
                try:
                    duplicate = key in seen
                except TypeError:  # an unhashable key: the base class reports it
                    break
                if duplicate:
                    raise _DuplicateKey(key, key_node.start_mark.line + 1)
                seen.add(key)
        return super().construct_mapping(node, deep=deep)


def read_yaml_mapping(path: Path | str) -> dict[str, Any]:
    """Parse a YAML file whose top level must be a mapping."""
    path = Path(path)
    if not path.exists():
        raise InputError(path, "", "file not found")
    if path.is_dir():
        raise InputError(path, "", "is a directory, expected a YAML file")
    try:
        data = yaml.load(path.read_text(), Loader=_UniqueKeyLoader)  # noqa: S506 (a SafeLoader subclass)
    except _DuplicateKey as exc:
        raise InputError(path, f"line {exc.line}", str(exc)) from None
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


#: Names pydantic puts in an error's location for the member of a union that failed (``model.str``,
#: ``cost.function-after[...]``): type tags, not fields of the input, so they are left out of the path.
_UNION_TAG = re.compile(r"(str|int|float|bool|bytes|none|constrained-\w+"
                        r"|(list|dict|tuple|set|frozenset|function-\w+|lax-or-strict|json-or-python|nullable|literal"
                        r"|is-instance|tagged-union|union|model|default|chain)\[.*\])")


def _is_union_tag(part: object) -> bool:
    return isinstance(part, str) and _UNION_TAG.fullmatch(part) is not None


def format_validation_error(exc: ValidationError, prefix: str = "") -> tuple[str, str]:
    """The first pydantic error as (field path like ``groups[0].num_requests``, message)."""
    err = exc.errors()[0]
    loc = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err.get("loc", ())
                  if p != "__root__" and not _is_union_tag(p))
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
        hint = yaml_number_hint(err["input"])
        if hint and err.get("type", "").endswith("_parsing"):
            msg = f"{msg} {hint}"
    return field, msg


def yaml_number_hint(value: Any) -> str:
    """For text YAML 1.1 did not read as a number (``1e6``, ``1.5e6``): ``(YAML reads 1e6 as text: write …)``."""
    if not isinstance(value, str) or not _YAML_TEXT_EXPONENT.fullmatch(value.strip()):
        return ""
    text = value.strip()
    try:
        number = float(text.replace("_", ""))
    except ValueError:
        return ""
    mantissa, exponent = re.split("[eE]", text.replace("_", ""))
    if "." not in mantissa:
        mantissa = f"{mantissa}.0" if mantissa.lstrip("+-") else mantissa
    if mantissa.lstrip("+-").startswith("."):
        mantissa = mantissa.replace(".", "0.", 1)
    exp = int(exponent)
    spelled = f"{mantissa}e{'-' if exp < 0 else '+'}{abs(exp)}"
    options = [spelled]
    if number.is_integer() and abs(number) < 1e15:
        options.insert(0, str(int(number)))
    return f"(YAML reads {text} as text: write {' or '.join(options)})"


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
    *,
    maximum: Mapping[str, float] | None = None,
) -> pd.DataFrame:
    """Read a CSV, check columns and cell types; report the first bad cell by row and column.

    ``required``/``optional`` map column name → python type (int, float, str); ``maximum`` maps a
    numeric column to its largest allowed value.  Every row must have as many fields as the header
    (``row 3: 5 fields, the header has 3``); whole numbers must fit int64.
    Row numbers in messages are 1-based data rows (the header is row 0; blank lines are not counted).
    """
    path = Path(path)
    optional = dict(optional or {})
    if not path.exists():
        raise InputError(path, "", "file not found")
    if path.is_dir():
        raise InputError(path, "", "is a directory, expected a CSV file")
    _check_field_counts(path)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", pd.errors.ParserWarning)
            frame = pd.read_csv(path, dtype=str, keep_default_na=False, skipinitialspace=True, index_col=False)
    except pd.errors.EmptyDataError:
        raise InputError(path, "", "file is empty (expected a header row)") from None
    except (pd.errors.ParserError, pd.errors.ParserWarning, UnicodeDecodeError) as exc:
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
        out[col] = _convert_column(path, col, frame[col], typ, col in required, (maximum or {}).get(col))
    return pd.DataFrame(out)


def _is_blank(row: list[str]) -> bool:
    """A line pandas skips: empty or only whitespace."""
    return not row or (len(row) == 1 and not row[0].strip())


def _check_field_counts(path: Path) -> None:
    """A row with more or fewer fields than the header is one line (pandas would silently turn extra
    leading fields into an index, or pad a short row with empty cells).  Files the csv module cannot
    read are left to pandas, whose message says why."""
    try:
        with path.open(newline="", encoding="utf-8-sig") as handle:
            header: int | None = None
            row_number = 0
            for row in csv.reader(handle, skipinitialspace=True, strict=True):
                if _is_blank(row):
                    continue
                if header is None:
                    header = len(row)
                    names = [name.strip() for name in row]
                    twice = next((name for k, name in enumerate(names) if name in names[:k]), None)
                    if twice is not None:  # pandas would rename the second one "name.1"
                        raise InputError(path, twice, "column appears twice in the header")
                    continue
                row_number += 1
                if len(row) != header:
                    fields = f"{len(row)} field{'s' if len(row) != 1 else ''}"
                    raise InputError(path, f"row {row_number}", f"{fields}, the header has {header}")
    except (csv.Error, UnicodeDecodeError):
        return


def _convert_column(path: Path, col: str, values: pd.Series, typ: type, required: bool,
                    maximum: float | None = None) -> Sequence:
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
    present = converted.dropna().astype(float)
    if typ is int:
        frac = (present % 1) != 0
        if frac.any():
            row = int(present.index[np.flatnonzero(frac.to_numpy())[0]]) + 1
            raise InputError(path, f"row {row}, column {col}", f"must be a whole number, got {raw.iloc[row - 1]!r}")
    if maximum is not None:
        over = present > maximum
        if over.any():
            row = int(present.index[np.flatnonzero(over.to_numpy())[0]]) + 1
            shown = int(maximum) if float(maximum).is_integer() else maximum
            raise InputError(path, f"row {row}, column {col}",
                             f"Input should be less than or equal to {shown} (got {raw.iloc[row - 1]})")
    if typ is int:
        huge = present.abs() >= _INT64_LIMIT
        if huge.any():
            row = int(present.index[np.flatnonzero(huge.to_numpy())[0]]) + 1
            raise InputError(path, f"row {row}, column {col}",
                             f"whole number too large (at most {2**63 - 1}), got {raw.iloc[row - 1]!r}")
        return converted.astype("Int64")
    return converted.astype(float)


def resolve_relative(base_file: Path | str, target: str | Path) -> Path:
    """Resolve ``target`` relative to the directory of ``base_file`` (absolute paths kept)."""
    target = Path(target).expanduser()
    return target if target.is_absolute() else Path(base_file).parent / target
