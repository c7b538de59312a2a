"""Reading instance files with one-line errors: ``<file>: <field>: <problem>``.

Nothing here lets a traceback reach the user: YAML syntax errors, missing
files, missing columns, unparsable cells and schema violations all become an
`InputError` naming the file, the field (with the row for CSV cells) and what
is wrong.

Reading rules (every loader of every family goes through them):

* **Files.** Only regular files are read.  A directory, a FIFO, a device (``/dev/zero``) or a
  socket is refused after a ``stat``, before any byte is read, and so is a file larger than the cap
  of its kind: `MAX_YAML_BYTES` (64 MiB: instance, scenario, cost-model and distribution YAML),
  `MAX_TABLE_BYTES` (256 MiB: request, sample and profile CSV tables), `MAX_TRACE_BYTES` (1 GiB:
  request traces).  Reads stop at the cap even if the file grows meanwhile.
* **Text.** Files are UTF-8 (a leading byte-order mark is ignored); other bytes are one line naming
  the offset of the first undecodable byte.
* **YAML aliases.** A document is judged as if its aliases were written out in full: written out,
  it may hold at most `MAX_ALIAS_NODES` (100,000) nodes and `MAX_ALIAS_CHARS` (1,000,000) scalar
  characters more than as written (a "billion laughs" document is refused in milliseconds, before
  anything is built from it); an alias inside the node it names (a recursive document) is refused;
  nesting is at most `MAX_YAML_DEPTH` (100) levels; an integer has at most `MAX_INT_DIGITS` (1,000)
  digits.  The size is computed on the composed node graph, once per distinct node.
* **Numbers.** A field whose type is a number takes a YAML number: text (``"12"``, or ``1e6``, which
  YAML 1.1 reads as text) and booleans are refused with one line naming the field
  (`check_numbers`), never converted.
* **Shown values.** An error shows the offending value only when it is short (`short_repr`); it
  never formats the whole input.
"""

from __future__ import annotations

import csv
import io
import math
import os
import re
import reprlib
import stat
import types
import typing
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError

from planner.errors import InputError

if TYPE_CHECKING:
    import pandas as pd

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

#: Largest YAML file read (instance, scenario, cost-model and distribution files), bytes.
MAX_YAML_BYTES = 64 * 2**20
#: Largest CSV table read (requests, samples, profiles), bytes.
MAX_TABLE_BYTES = 256 * 2**20
#: Largest request trace read (CSV or JSON lines), bytes.
MAX_TRACE_BYTES = 2**30
#: Nodes and scalar characters YAML aliases may add to a document, written out in full.
MAX_ALIAS_NODES = 100_000
MAX_ALIAS_CHARS = 1_000_000
#: Deepest nesting of a YAML document (instance files need fewer than 10 levels).
MAX_YAML_DEPTH = 100
#: Most digits of an integer in a YAML file (no field takes more than 20).
MAX_INT_DIGITS = 1000


def _size(n: int) -> str:
    """Bytes in binary units, as the caps are stated: ``64 MiB``, ``3 GiB``, ``512 bytes``."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            value = n / scale
            return f"{value:.0f} {unit}" if value.is_integer() else f"{value:.1f} {unit}"
    return f"{n} bytes"


_FILE_KINDS = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
               (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def _file_problem(path: Path, st: os.stat_result, what: str, limit: int) -> str | None:
    """Why ``path`` (with ``st``) cannot be read as ``what``, or None."""
    if stat.S_ISDIR(st.st_mode):
        return f"is a directory, expected {what}"
    if not stat.S_ISREG(st.st_mode):
        kind = next((name for test, name in _FILE_KINDS if test(st.st_mode)), "not a regular file")
        return f"is {kind}, not a regular file; expected {what}"
    if st.st_size > limit:
        return f"is {_size(st.st_size)}; {what} may be at most {_size(limit)} (refused before reading)"
    return None


def _raise_file_problem(path: Path, problem: str, source: Path | str | None, field: str) -> typing.NoReturn:
    """The file's own line (``<path>: <problem>``) or, for a file named by another one, the naming
    file's line (``<source>: <field>: <path> <problem>``; not found: ``file not found: <path>``)."""
    name = str(path) if len(str(path)) <= 300 else f"{str(path)[:150]}…{str(path)[-100:]}"
    if source is None:
        raise InputError(name, "", problem)
    if problem in ("file not found", "directory not found"):
        raise InputError(source, field, f"{problem}: {name}")
    raise InputError(source, field, f"{name} {problem}")


def check_input_file(path: Path | str, what: str, limit: int, *, source: Path | str | None = None,
                     field: str = "") -> Path:
    """``path`` if it is a regular file of at most ``limit`` bytes; else one `InputError` line, before any
    byte is read (a FIFO or ``/dev/zero`` would block or never end).  With ``source``/``field`` the line
    names the file and field that referred to ``path``."""
    path = Path(path)
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        _raise_file_problem(path, "file not found", source, field)
    except OSError as exc:  # permission, name too long, a symlink loop
        _raise_file_problem(path, f"cannot be read ({exc.strerror or exc})", source, field)
    except ValueError:  # a NUL character in the name
        _raise_file_problem(path, "is not a valid file name (it contains a NUL character)", source, field)
    problem = _file_problem(path, st, what, limit)
    if problem is not None:
        _raise_file_problem(path, problem, source, field)
    return path


def check_input_dir(path: Path | str, what: str, *, source: Path | str, field: str) -> Path:
    """``path`` if it is a directory; else one `InputError` line on the naming file's field."""
    path = Path(path)
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        _raise_file_problem(path, "directory not found", source, field)
    except OSError as exc:
        _raise_file_problem(path, f"cannot be read ({exc.strerror or exc})", source, field)
    except ValueError:
        _raise_file_problem(path, "is not a valid directory name (it contains a NUL character)", source, field)
    if not stat.S_ISDIR(st.st_mode):
        _raise_file_problem(path, f"is not a directory; expected {what}", source, field)
    return path


def read_input_bytes(path: Path | str, what: str, limit: int, *, source: Path | str | None = None,
                     field: str = "") -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes (`check_input_file`).  The file is opened
    without blocking and checked again on the open descriptor, and at most ``limit`` + 1 bytes are read."""
    path = check_input_file(path, what, limit, source=source, field=field)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        _raise_file_problem(path, f"cannot be read ({exc.strerror or exc})", source, field)
    with os.fdopen(fd, "rb") as handle:
        problem = _file_problem(path, os.fstat(fd), what, limit)  # replaced since the stat
        if problem is not None:
            _raise_file_problem(path, problem, source, field)
        try:
            data = handle.read(limit + 1)
        except OSError as exc:
            _raise_file_problem(path, f"cannot be read ({exc.strerror or exc})", source, field)
    if len(data) > limit:
        _raise_file_problem(path, f"is larger than {_size(limit)}, the most {what} may be", source, field)
    return data


def decode_text(data: bytes, path: Path | str) -> str:
    """UTF-8 text (a leading byte-order mark dropped); other bytes are one line naming the first bad byte."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        bad = data[exc.start:exc.start + 1].hex()
        hint = " (it looks like UTF-16)" if data[:2] in (b"\xff\xfe", b"\xfe\xff") else ""
        raise InputError(path, "", f"not UTF-8 text: byte 0x{bad} at offset {exc.start}{hint}; "
                                   "save the file as UTF-8") from None


def read_input_text(path: Path | str, what: str, limit: int, *, source: Path | str | None = None,
                    field: str = "") -> str:
    """`read_input_bytes` decoded by `decode_text`."""
    return decode_text(read_input_bytes(path, what, limit, source=source, field=field), path)


_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxstring, _REPR.maxother, _REPR.maxlong = 3, 100, 100, 100
_REPR.maxlist = _REPR.maxtuple = _REPR.maxdict = _REPR.maxset = _REPR.maxfrozenset = 12


def short_repr(value: Any, limit: int = 80) -> str | None:
    """``repr(value)`` when it has at most ``limit`` characters, else None; never builds the repr of a
    large value (text, a long list, a deep mapping)."""
    if isinstance(value, str) and len(value) > limit:
        return None
    text = _REPR.repr(value)
    if len(text) > limit or ("..." in text and "..." not in (value if isinstance(value, str) else "")):
        return None
    return text


def shown(value: Any, limit: int = 80) -> str:
    """A value as the user wrote it, for an error message: ``null``, ``true``, ``'abc'``, ``[1, 2]``; a
    long value is described (``a text of 3,000 characters``, ``a list of 500 items``)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    text = short_repr(value, limit)
    if text is not None:
        return text
    if isinstance(value, str):
        return f"a text of {len(value):,} characters"
    if isinstance(value, (list, tuple)):
        return f"a list of {len(value):,} items"
    if isinstance(value, Mapping):
        return f"a mapping of {len(value):,} keys"
    return f"a {type(value).__name__}"


def number_text_problem(value: str) -> str:
    """The message for text where a number is expected: ``expected a number, not text (got '12'):
    write 12 without quotes`` or the YAML 1.1 exponent hint (`yaml_number_hint`)."""
    got = short_repr(value, 40)
    problem = f"expected a number, not text (got {got})" if got else "expected a number, got a text"
    hint = yaml_number_hint(value)
    if hint:
        return f"{problem} {hint}"
    try:
        number = float(value.replace("_", ""))
    except ValueError:
        return problem
    if math.isfinite(number) and value.strip():
        return f"{problem}: write {value.strip()} without quotes"
    return problem


def _reject_bool(value: Any) -> Any:
    if isinstance(value, bool):
        raise ValueError(f"expected a number, got {str(value).lower()}")  # noqa: TRY004 (pydantic needs ValueError)
    if isinstance(value, str):
        raise ValueError(number_text_problem(value))  # noqa: TRY004
    return value


#: Annotate a numeric field with this so YAML ``true``/``false`` is not read as 1/0, nor ``"12"`` as 12.
NotBool = BeforeValidator(_reject_bool)


class StrictSpec(BaseModel):
    """Base of the file-schema models (the YAML as written, before it becomes a problem): frozen, an
    unknown key is an error (a misspelt field is never silently ignored), and NaN or infinity is refused
    in every float field."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


def name_field(data: Mapping[str, Any], key: str, default: str, source: Path | str, field: str = "") -> str:
    """``data[key]`` as a name: text that is not empty (``default`` when the key is absent).  A list,
    a number, a boolean or null is one line, not turned into the text ``"[1, 2]"`` or ``"True"``."""
    if key not in data:
        return default
    value = data[key]
    if not isinstance(value, str) or not value.strip():
        raise InputError(source, field or key, f"expected a name (text), got {shown(value)}")
    return value


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
        super().__init__(f"key {shown(key, 60)} appears twice in one mapping (YAML would silently keep the last)")
        self.key, self.line = key, line


class _Refused(yaml.YAMLError):
    """A document refused before it is built (alias expansion, recursion, nesting): one line."""

    def __init__(self, problem: str, line: int | None = None) -> None:
        super().__init__(problem)
        self.problem_text, self.line = problem, line


#: libyaml's parser when PyYAML was built with it (about 20× faster on large instance files), else pure Python.
_SafeLoaderBase = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

_MERGE_TAG = "tag:yaml.org,2002:merge"


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return node.value
    return []


def check_expansion(root: yaml.Node) -> None:
    """Refuse a composed document whose aliases, written out, add more than `MAX_ALIAS_NODES` nodes or
    `MAX_ALIAS_CHARS` scalar characters, that contains itself through an alias, or that nests deeper
    than `MAX_YAML_DEPTH`.

    One pass visits each distinct node once and records every further reference to a node (an alias);
    written out, the document is the distinct nodes plus, per alias, the written-out size of the node
    it names.  Those sizes are computed (memoised by identity, iteratively) only when aliases exist."""
    seen = {id(root)}
    aliases: dict[int, list] = {}  # id(node named by aliases) -> [node, number of aliases, deepest alias]
    stack: list[tuple[yaml.Node, int]] = [(root, 1)]
    scalar = yaml.ScalarNode
    while stack:
        node, depth = stack.pop()
        if depth > MAX_YAML_DEPTH:
            raise _Refused(f"nested more than {MAX_YAML_DEPTH} levels deep", node.start_mark.line + 1)
        if isinstance(node, scalar):
            continue
        depth += 1
        for kid in _children(node):
            key = id(kid)
            if key not in seen:
                seen.add(key)
                stack.append((kid, depth))
            elif key in aliases:
                entry = aliases[key]
                entry[1] += 1
                entry[2] = max(entry[2], depth)
            else:
                aliases[key] = [kid, 1, depth]
    if not aliases:
        return
    added_nodes = added_chars = 0
    size: dict[int, tuple[int, int, int]] = {}  # id(node) -> (nodes, characters, depth) written out
    for target, count, depth in aliases.values():
        nodes, chars, height = _written_out(target, size)
        added_nodes += count * nodes
        added_chars += count * chars
        if depth + height - 1 > MAX_YAML_DEPTH:
            raise _Refused(f"aliases nest the document more than {MAX_YAML_DEPTH} levels deep",
                           target.start_mark.line + 1)
    if added_nodes > MAX_ALIAS_NODES or added_chars > MAX_ALIAS_CHARS:
        raise _Refused(f"aliases expand the document to {len(seen) + added_nodes:,} nodes, "
                       f"{added_nodes:,} nodes and {added_chars:,} characters of text more than written; at most "
                       f"{MAX_ALIAS_NODES:,} and {MAX_ALIAS_CHARS:,} more are accepted (write the repeated parts "
                       "out, or use fewer aliases)")


def _written_out(root: yaml.Node, size: dict[int, tuple[int, int, int]]) -> tuple[int, int, int]:
    """(nodes, scalar characters, depth) of ``root`` with every alias written out (memo ``size``);
    `_Refused` when a node contains itself."""
    open_nodes: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, finished = stack.pop()
        key = id(node)
        if finished:
            open_nodes.discard(key)
            kids = _children(node)
            size[key] = (1 + sum(size[id(k)][0] for k in kids),
                         (len(node.value) if isinstance(node, yaml.ScalarNode) else 0)
                         + sum(size[id(k)][1] for k in kids),
                         1 + max((size[id(k)][2] for k in kids), default=0))
            continue
        if key in size:
            continue
        open_nodes.add(key)
        stack.append((node, True))
        for kid in _children(node):
            if id(kid) in open_nodes:
                raise _Refused("an alias refers to a node that contains it (a recursive document)",
                               kid.start_mark.line + 1)
            if id(kid) not in size:
                stack.append((kid, False))
    return size[id(root)]


class _UniqueKeyLoader(_SafeLoaderBase):  # type: ignore[misc,valid-type]
    """A safe loader that refuses a key repeated in one mapping (``{M: 100, M: 1}``), which plain
    YAML loading resolves silently to the last value, and documents whose aliases expand too far
    (`check_expansion`).  Merge keys (``<<: *base``) work as in YAML 1.1: keys written beside the
    merge override the merged ones."""

    def get_single_data(self):  # noqa: ANN201
        node = self.get_single_node()
        if node is None:
            return None
        check_expansion(node)
        return self.construct_document(node)

    def construct_yaml_int(self, node):  # noqa: ANN001, ANN201
        """An integer of more than `MAX_INT_DIGITS` digits is refused (Python cannot even print one of
        more than 4,300 digits, and no field takes one)."""
        text = str(node.value)
        if len(text) > MAX_INT_DIGITS + 8:  # quick: the digits themselves (with sign, 0x/0b/0o and _)
            digits = sum(ch.isalnum() for ch in text)
            if digits > MAX_INT_DIGITS:
                raise _Refused(f"an integer of {digits:,} digits; at most {MAX_INT_DIGITS} are accepted",
                               node.start_mark.line + 1)
        value = super().construct_yaml_int(node)
        if value.bit_length() > MAX_INT_DIGITS * 3.33:  # 0b…/0x… forms with few characters but many digits
            raise _Refused(f"an integer of more than {MAX_INT_DIGITS} digits", node.start_mark.line + 1)
        return value

    def construct_mapping(self, node, deep=False):  # noqa: ANN001, ANN201
        if isinstance(node, yaml.MappingNode):
            seen: set = set()
            for key_node, _ in node.value:
                if key_node.tag == _MERGE_TAG:
                    continue
                key = self.construct_object(key_node, deep=deep)
                try:
                    duplicate = key in seen
                except TypeError:  # an unhashable key: the base class reports it
                    break
                if duplicate:
                    raise _DuplicateKey(key, key_node.start_mark.line + 1)
                seen.add(key)
        return super().construct_mapping(node, deep=deep)


_UniqueKeyLoader.add_constructor("tag:yaml.org,2002:int", _UniqueKeyLoader.construct_yaml_int)


def load_yaml_text(text: str, path: Path | str) -> Any:
    """Parse YAML text with the rules of this module; every problem is one `InputError` line."""
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 (a SafeLoader subclass)
    except _DuplicateKey as exc:
        raise InputError(path, f"line {exc.line}", str(exc)) from None
    except _Refused as exc:
        raise InputError(path, f"line {exc.line}" if exc.line else "", exc.problem_text) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else "YAML"
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        if len(problem) > 200:
            problem = problem[:200] + "…"
        raise InputError(path, where, f"not valid YAML ({problem})") from None
    except RecursionError:
        raise InputError(path, "", f"nested too deeply (at most {MAX_YAML_DEPTH} levels)") from None
    except (ValueError, OverflowError) as exc:  # a scalar the constructor cannot convert
        raise InputError(path, "YAML", f"not valid YAML ({str(exc).splitlines()[0][:200]})") from None


def read_yaml_mapping(path: Path | str, *, source: Path | str | None = None, field: str = "") -> dict[str, Any]:
    """Parse a YAML file whose top level must be a mapping (the module's reading rules apply).

    With ``source``/``field`` (the file and field that named ``path``), a file that cannot be read at
    all (missing, a directory, a FIFO, a device, over `MAX_YAML_BYTES`) is reported on that line."""
    path = Path(path)
    text = read_input_text(path, "a YAML file", MAX_YAML_BYTES, source=source, field=field)
    data = load_yaml_text(text, path)
    if data is None:
        raise InputError(path, "", "file is empty")
    if not isinstance(data, Mapping):
        kind = {list: "a list", str: "text", int: "a number", float: "a number", bool: "a boolean"}.get(
            type(data), type(data).__name__)
        raise InputError(path, "", f"top level must be a mapping of keys, got {kind}")
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
        got = _shown_input(err["input"], msg, err.get("type", ""))
        if got:
            msg = f"{msg} (got {got})"
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
    text = short_repr(value, _MAX_SHOWN_INPUT)
    if text is None:
        return ""
    if kind in ("value_error", "assertion_error") and (
            "got " in msg or re.search(rf"(?<![\w.]){re.escape(text)}(?![\w.])", msg)):
        return ""
    return text


def validate_model(cls: type[M], data: Any, source: Path | str, field: str = "") -> M:
    """Validate ``data`` into ``cls``; errors become one `InputError` line.  Text or a boolean where
    ``cls`` (or a model inside it) takes a number is refused first (`check_numbers`)."""
    check_numbers(cls, data, source, field)
    try:
        return cls.model_validate(data)
    except ValidationError as exc:
        where, msg = format_validation_error(exc, field)
        raise InputError(source, where or field, msg) from None


# ---- numbers must be numbers ----------------------------------------------------------------------

_NUMBER = ("number",)


def _strip_annotated(tp: Any) -> Any:
    while get_origin(tp) is Annotated:
        tp = get_args(tp)[0]
    return tp


def _slot(tp: Any) -> tuple | None:
    """What a field of type ``tp`` holds, for `check_numbers`: ``("number",)`` (int/float, optionally
    None), ``("model", cls)``, ``("items", slot)`` (list/tuple/set of one kind), ``("values", slot)``
    (a mapping's values), or None (anything else: text, unions of other kinds, literals)."""
    tp = _strip_annotated(tp)
    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        members = [m for m in get_args(tp) if _strip_annotated(m) is not type(None)]
        slots = [_slot(m) for m in members]
        if slots and all(s == _NUMBER for s in slots):
            return _NUMBER
        return slots[0] if len(slots) == 1 else None
    if tp is int or tp is float:
        return _NUMBER
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return ("model", tp)
    if origin in (list, set, frozenset, Sequence, typing.Sequence):
        inner = _slot(get_args(tp)[0]) if get_args(tp) else None
        return ("items", inner) if inner else None
    if origin is tuple:
        args = [a for a in get_args(tp) if a is not Ellipsis]
        inner = {_slot(a) for a in args}
        return ("items", inner.pop()) if len(inner) == 1 and None not in inner else None
    if origin in (dict, Mapping, typing.Mapping):
        args = get_args(tp)
        inner = _slot(args[1]) if len(args) == 2 else None
        return ("values", inner) if inner else None
    return None


_MODEL_SLOTS: dict[type, dict[str, tuple]] = {}


def _model_slots(cls: type[BaseModel]) -> dict[str, tuple]:
    """Input key → slot of each field of ``cls`` that holds numbers or models (cached per class)."""
    if cls not in _MODEL_SLOTS:
        slots = {}
        for name, info in cls.model_fields.items():
            slot = _slot(info.annotation)
            if slot is not None:
                slots[info.alias if isinstance(info.alias, str) else name] = slot
        _MODEL_SLOTS[cls] = slots
    return _MODEL_SLOTS[cls]


def _join(prefix: str, part: str | int) -> str:
    if isinstance(part, int):
        return f"{prefix}[{part}]"
    return f"{prefix}.{part}" if prefix else str(part)


def check_numbers(cls: type[BaseModel], data: Any, source: Path | str, prefix: str = "") -> None:
    """Refuse text or a boolean where ``cls`` takes a number (pydantic would turn ``"12"`` into 12 and
    ``true`` into 1), with one line naming the field: ``groups[0].num_requests: expected a number, not
    text (got '12'): write 12 without quotes``.  Walks nested models, lists and mappings of them;
    fields of other types are left to pydantic."""
    stack: list[tuple[tuple, Any, str]] = [(("model", cls), data, prefix)]
    while stack:
        slot, value, where = stack.pop()
        if slot == _NUMBER:
            if isinstance(value, bool):
                raise InputError(source, where, f"expected a number, got {str(value).lower()}")
            if isinstance(value, str):
                raise InputError(source, where, number_text_problem(value))
        elif slot[0] == "model" and isinstance(value, Mapping):
            fields = _model_slots(slot[1])
            items = [(key, value[key]) for key in fields if key in value]
            stack += [(fields[key], item, _join(where, key)) for key, item in reversed(items)]
        elif slot[0] == "items" and isinstance(value, (list, tuple)):
            stack += [(slot[1], item, _join(where, k)) for k, item in reversed(list(enumerate(value)))]
        elif slot[0] == "values" and isinstance(value, Mapping):
            stack += [(slot[1], item, _join(where, str(key))) for key, item in reversed(list(value.items()))]


def read_csv_table(
    path: Path | str,
    required: Mapping[str, type],
    optional: Mapping[str, type] | None = None,
    *,
    maximum: Mapping[str, float] | None = None,
    source: Path | str | None = None,
    field: str = "",
) -> pd.DataFrame:
    """Read a CSV, check columns and cell types; report the first bad cell by row and column.

    ``required``/``optional`` map column name → python type (int, float, str); ``maximum`` maps a
    numeric column to its largest allowed value.  Every row must have as many fields as the header
    (``row 3: 5 fields, the header has 3``); whole numbers must fit int64.
    Row numbers in messages are 1-based data rows (the header is row 0; blank lines are not counted).
    Spaces and tabs around a cell are not part of its value, quoted or not: ``" 12 "`` in an int
    column is 12 and `` r1`` in a text column is ``r1`` (so two ids differing only in surrounding
    spaces are the same id); spaces inside a number (``1 2``) make it not a number.  The file is
    read under the module's rules (a regular UTF-8 file of at most `MAX_TABLE_BYTES`; with
    ``source``/``field``, a file that cannot be read is reported on the line of the file naming it).
    """
    import pandas as pd  # noqa: PLC0415 (imported when a table is read: a bad YAML file is refused without it)

    path = Path(path)
    optional = dict(optional or {})
    text = read_input_text(path, "a CSV file", MAX_TABLE_BYTES, source=source, field=field)
    if "\x00" in text:
        raise InputError(path, "", "not a valid CSV (contains a NUL byte: binary data?)")
    _check_field_counts(path, text)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", pd.errors.ParserWarning)
            frame = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False, skipinitialspace=True,
                                index_col=False)
    except pd.errors.EmptyDataError:
        raise InputError(path, "", "file is empty (expected a header row)") from None
    except (pd.errors.ParserError, pd.errors.ParserWarning, ValueError) as exc:
        raise InputError(path, "", f"not a valid CSV ({str(exc).splitlines()[0][:200]})") from None
    frame.columns = [str(c).strip() for c in frame.columns]
    missing = [c for c in required if c not in frame.columns]
    if missing:
        raise InputError(path, missing[0], "required column is missing")
    known = set(required) | set(optional)
    unknown = [c for c in frame.columns if c not in known]
    if unknown:
        name = unknown[0] if len(unknown[0]) <= 60 else unknown[0][:60] + "…"
        raise InputError(path, name, f"unknown column (expected some of: {', '.join(known)})")
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


def _check_field_counts(path: Path, text: str) -> None:
    """A row with more or fewer fields than the header is one line (pandas would silently turn extra
    leading fields into an index, or pad a short row with empty cells).  Text the csv module cannot
    read is left to pandas, whose message says why."""
    try:
        header: int | None = None
        row_number = 0
        for row in csv.reader(io.StringIO(text, newline=""), skipinitialspace=True, strict=True):
            if _is_blank(row):
                continue
            if header is None:
                header = len(row)
                names = [name.strip() for name in row]
                twice = next((name for k, name in enumerate(names) if name in names[:k]), None)
                if twice is not None:  # pandas would rename the second one "name.1"
                    name = twice if len(twice) <= 60 else twice[:60] + "…"
                    raise InputError(path, name, "column appears twice in the header")
                continue
            row_number += 1
            if len(row) != header:
                fields = f"{len(row)} field{'s' if len(row) != 1 else ''}"
                raise InputError(path, f"row {row_number}", f"{fields}, the header has {header}")
    except csv.Error:
        return


def _convert_column(path: Path, col: str, values: pd.Series, typ: type, required: bool,
                    maximum: float | None = None) -> Sequence:
    import numpy as np  # noqa: PLC0415
    import pandas as pd  # noqa: PLC0415

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
        raise InputError(path, f"row {row}, column {col}", f"not a number: {shown(raw.iloc[row - 1])}")
    present = converted.dropna().astype(float)
    if typ is int:
        frac = (present % 1) != 0
        if frac.any():
            row = int(present.index[np.flatnonzero(frac.to_numpy())[0]]) + 1
            raise InputError(path, f"row {row}, column {col}",
                             f"must be a whole number, got {shown(raw.iloc[row - 1])}")
    if maximum is not None:
        over = present > maximum
        if over.any():
            row = int(present.index[np.flatnonzero(over.to_numpy())[0]]) + 1
            cap = int(maximum) if float(maximum).is_integer() else maximum
            raise InputError(path, f"row {row}, column {col}",
                             f"Input should be less than or equal to {cap} (got {raw.iloc[row - 1]})")
    if typ is int:
        huge = present.abs() >= _INT64_LIMIT
        if huge.any():
            row = int(present.index[np.flatnonzero(huge.to_numpy())[0]]) + 1
            raise InputError(path, f"row {row}, column {col}",
                             f"whole number too large (at most {2**63 - 1}), got {shown(raw.iloc[row - 1])}")
        return converted.astype("Int64")
    return converted.astype(float)


def resolve_relative(base_file: Path | str, target: str | Path) -> Path:
    """Resolve ``target`` relative to the directory of ``base_file`` (absolute paths kept)."""
    target = Path(target)
    try:
        target = target.expanduser()
    except RuntimeError:  # ~name of an unknown user: kept as written (then "file not found")
        pass
    return target if target.is_absolute() else Path(base_file).parent / target
