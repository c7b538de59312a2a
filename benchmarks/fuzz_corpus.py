"""A deterministic corpus of malformed variants of the shipped instances (bad-input fuzzing).

Every YAML instance under ``instances/`` (all seven families) is the base of mutations in eight
categories:

* ``fields``     — a key dropped, renamed (a typo), added (unknown) or written twice (top level);
* ``types``      — a value replaced by text (also 5,000 characters long, or with a line break), a
  number, a list, a mapping, a boolean, null or "";
* ``numbers``    — a number replaced by 0, negative, huge (1e300, 10**30), nan, ±inf, a fraction, a
  numeric string (``"12"``), YAML-1.1 text (``1e6``) or a boolean;
* ``encodings``  — the whole file as random binary, with a UTF-8 BOM, latin-1 text, UTF-16,
  truncated at a random byte, with a NUL byte, CRLF line ends, empty, or only a comment;
* ``references`` — a field naming a file (``requests``, ``cost_model``, ``workload``,
  ``requests_csv``, ``samples_csv``, ``workload.distribution``/``trace``) pointed at a missing
  file, a directory, ``/dev/zero``, ``/dev/null``, a FIFO, the instance itself, an empty file, a
  binary file or a 3 GiB sparse file;
* ``csv``        — a request CSV (placement) with a cell mutated (``" 12 "``, empty, text, -5,
  1e400, nan, inf), a column dropped or written twice, an extra field, a BOM, latin-1 bytes;
* ``aliases``    — YAML alias bombs (billion laughs 10^9 nodes; a wide one-anchor bomb), a
  recursive alias, a 5,000-deep nesting;
* ``markup``     — rich markup in a text value (``[red]big[/red]``, ``[/]``, ``[bold]``, a link)
  and in the instance's file name (``[/]x.yaml``).

The variants are chosen with ``random.Random`` seeded from ``--seed`` and the base's path, so the
same seed gives the same corpus.  Each variant is a directory holding the mutated instance (and
the files it references, copied or mutated); references to shipped files that are not mutated
are written as absolute paths into this repository.  ``manifest.json`` lists, per variant, the
family, base, category, a one-line description and the ``planner`` arguments to run (relative
to the variant's directory).  Run the corpus with ``benchmarks/fuzz_run.py``.

Base reductions (so that a variant the planner accepts finishes well inside the runner's 30 s):
the capacity scenario keeps its first rate and its first GPU type with one TP degree and a 2 s
time limit per point; every ``solve`` command gets ``--time-limit 5``.

Usage:  python benchmarks/fuzz_corpus.py DIR [--seed 0] [--count 1200]
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import os
import random
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
INSTANCES = REPO / "instances"

CATEGORIES = ("fields", "types", "numbers", "encodings", "references", "csv", "aliases", "markup")


@dataclass
class Variant:
    id: str
    family: str
    base: str  # repository-relative path of the shipped instance
    category: str
    mutation: str  # one line: what was changed
    main: str  # file given to the command, relative to the variant directory
    argv: list[str]  # arguments of `planner`, relative to the variant directory
    files: dict[str, bytes] = field(default_factory=dict, repr=False)  # relative path -> content
    fifos: list[str] = field(default_factory=list)
    sparse: dict[str, int] = field(default_factory=dict)  # relative path -> size (bytes)
    dirs: list[str] = field(default_factory=list)
    make: Any = field(default=None, repr=False)  # builds the content of a candidate (see `Builder.lazy`)


# ---- the bases ------------------------------------------------------------------------------------

def family_of(path: Path, data: dict) -> str:
    folder = path.relative_to(INSTANCES).parts[0]
    return {"deployment": "routing" if data.get("family") == "routing" else "deployment"}.get(folder, folder)


def command(family: str, main: str, tables: bool) -> list[str]:
    json_flag = [] if tables else ["--json"]
    if family == "capacity":
        return ["capacity", main, "--report", "capacity-out", "--parallel", "1", "--no-progress", *json_flag]
    return ["solve", family, main, "--time-limit", "5", *json_flag]


#: Fields that name another file, per family: (path in the YAML, kind of file).
REFERENCE_FIELDS = {
    "placement": [(("cost_model",), "yaml"), (("requests",), "csv")],
    "priority": [(("cost_model",), "yaml")],
    "batching": [(("cost_model",), "yaml"), (("requests_csv",), "csv")],
    "deployment": [(("workload",), "yaml"), (("samples_csv",), "csv"), (("demands", 0, "workload"), "yaml")],
    "routing": [(("requests", "workload"), "yaml"), (("requests_csv",), "csv")],
    "capacity": [(("workload", "distribution"), "yaml"), (("workload", "trace"), "csv")],
    "queueing": [],
}


def load_bases() -> list[tuple[Path, dict, str]]:
    bases = []
    for path in sorted(INSTANCES.rglob("*.yaml")):
        data = yaml.safe_load(path.read_text())
        if not isinstance(data, dict):
            continue
        bases.append((path, data, family_of(path, data)))
    return bases


def prepared(path: Path, data: dict, family: str) -> tuple[dict, dict[str, bytes]]:
    """The base made self-contained: shipped references as absolute paths, a placement request CSV
    copied beside the instance as ``requests.csv``; the capacity scenario cut to one point (one joint point
    for several models), one configuration and a 120 s arrival window."""
    data = copy.deepcopy(data)
    files: dict[str, bytes] = {}
    if family in ("placement", "priority") and isinstance(data.get("cost_model"), str):
        data["cost_model"] = str((path.parent / data["cost_model"]).resolve())
    if family == "placement":
        files["requests.csv"] = (path.parent / data["requests"]).read_bytes()
        data["requests"] = "requests.csv"
    if family == "capacity":
        if isinstance(data.get("models"), list):  # several models: one joint point
            data["models"] = [{**m, "rates": m["rates"][:1]} if isinstance(m, dict) and "rates" in m else m
                              for m in data["models"]]
        else:
            data["rates"] = data["rates"][:1]
        first = dict(data["gpus"][0])
        first["tensor_parallel"] = [4]
        data["gpus"] = [first]
        data["solve"] = {**data.get("solve", {}), "time_limit_s": 2, "exact_max_requests": 50}
        # a short arrival window: the point is the input handling, not the fleet's size
        sim = data.get("simulation") if isinstance(data.get("simulation"), dict) else {}
        data["simulation"] = {**sim, "duration_s": 120, "warmup_s": 10}
    return data, files


# ---- paths inside a YAML document ---------------------------------------------------------------

def paths_of(data: Any, prefix: tuple = ()) -> list[tuple]:
    """Paths to every node (lists: their first, second and last element only)."""
    out = []
    if isinstance(data, dict):
        for key, value in data.items():
            out.append((*prefix, key))
            out += paths_of(value, (*prefix, key))
    elif isinstance(data, list):
        picks = sorted({0, 1, len(data) - 1} & set(range(len(data))))
        for k in picks:
            out.append((*prefix, k))
            out += paths_of(data[k], (*prefix, k))
    return out


def get(data: Any, path: tuple) -> Any:
    for part in path:
        data = data[part]
    return data


def put(data: Any, path: tuple, value: Any) -> None:
    get(data, path[:-1])[path[-1]] = value


def show(path: tuple) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).removeprefix(".")


_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def dump(data: Any) -> str:
    return yaml.dump(data, Dumper=_DUMPER, sort_keys=False, width=200, allow_unicode=True)


# ---- mutation values ----------------------------------------------------------------------------

TYPE_VALUES: list[tuple[str, Any]] = [("text 'abc'", "abc"), ("number 7", 7), ("number 2.5", 2.5),
                                      ("list [1, 2]", [1, 2]), ("mapping {a: 1}", {"a": 1}), ("true", True),
                                      ("false", False), ("null", None), ("empty text", ""), ("empty list", []),
                                      ("empty mapping", {}), ("text of 5,000 characters", "x" * 5000),
                                      ("text with a line break", "a\nb")]


def number_values(value: int | float) -> list[tuple[str, Any]]:
    whole = isinstance(value, int)
    out = [("0", 0), ("-1", -1), ("-1e9", -1e9), ("1e300", 1e300), ("10**30", 10**30), ("nan", math.nan),
           ("inf", math.inf), ("-inf", -math.inf), (f"numeric string {str(value)!r}", str(value)),
           ("text 1e6", "1e6"), ("true", True)]
    if whole:
        out.append(("fraction 1.5", 1.5))
    return out


MARKUP_VALUES = ["[red]big[/red]", "[/]", "[bold]x", "[link=file:///etc/passwd]x[/link]", "a[/b]c", "\\[x]"]
MARKUP_NAMES = ["[/]x.yaml", "[red]x[/red].yaml", "a [b] c.yaml"]


def billion_laughs(levels: int = 9, width: int = 10) -> str:
    parts = ['&a0 [' + ", ".join(['"lol"'] * width) + ']']
    for k in range(1, levels + 1):
        parts.append(f"&a{k} [" + ", ".join([f"*a{k - 1}"] * width) + "]")
    return "[" + ", ".join(parts) + "]"


def wide_bomb(count: int = 200_000) -> str:
    return '[&w {model: x, count: 1}, ' + ", ".join(["*w"] * count) + "]"


def deep_nesting(depth: int = 5000) -> str:
    return "[" * depth + "1" + "]" * depth


# ---- the variants of one base ---------------------------------------------------------------------

class Builder:
    def __init__(self, path: Path, data: dict, family: str, seed: int) -> None:
        self.path, self.family = path, family
        self.base = str(path.relative_to(REPO))
        self.data, self.files = prepared(path, data, family)
        self.name = path.name
        self.rng = random.Random(f"{seed}:{self.base}")
        self.candidates: dict[str, list[Variant]] = {c: [] for c in CATEGORIES}
        self.always: list[tuple[str, str, Any]] = []  # (category, mutation, make): chosen whatever the quotas

    def variant(self, category: str, mutation: str, text: str | bytes | None = None, *, data: Any = None,
                main: str | None = None, files: dict[str, bytes] | None = None, **extra: Any) -> None:
        self.lazy(category, mutation, lambda: dict(text=text, data=data, main=main, files=files, **extra))

    def lazy(self, category: str, mutation: str, make: Any) -> None:
        """A candidate whose content ``make()`` builds (only for the variants chosen)."""
        self.candidates[category].append(Variant(id="", family=self.family, base=self.base, category=category,
                                                 mutation=mutation, main="", argv=[], make=make))

    def materialize(self, v: Variant) -> None:
        spec = v.make()
        v.make = None
        main = spec.pop("main") or self.name
        text, data, files = spec.pop("text"), spec.pop("data"), spec.pop("files")
        if text is None:
            text = dump(data)
        content = text.encode() if isinstance(text, str) else text
        v.main = main
        v.files = {**self.files, **(files or {}), main: content}
        for key, value in spec.items():
            setattr(v, key, value)

    def _changed(self, change: Any) -> Any:
        """A thunk for `lazy`: a deep copy of the base with ``change(copy)`` applied."""
        def make() -> dict:
            d = copy.deepcopy(self.data)
            change(d)
            return dict(text=None, data=d, main=None, files=None)
        return make

    # fields: drop, rename, add, duplicate
    def fields(self) -> None:
        for path in paths_of(self.data):
            if isinstance(path[-1], int):
                continue
            self.lazy("fields", f"drop {show(path)}", self._changed(lambda d, p=path: get(d, p[:-1]).pop(p[-1])))
            typo = path[-1][:-1] if len(path[-1]) > 2 else path[-1] + "x"

            def rename(d: Any, p: tuple = path, t: str = typo) -> None:
                target = get(d, p[:-1])
                target[t] = target.pop(p[-1])
            self.lazy("fields", f"rename {show(path)} to {typo!r}", self._changed(rename))
            if len(path) == 1:
                self.lazy("fields", f"duplicate top-level key {path[0]!r}",
                          lambda p=path: dict(text=dump(self.data) + dump({p[0]: self.data[p[0]]}), data=None,
                                              main=None, files=None))
        for path in [(), *[p for p in paths_of(self.data) if isinstance(get(self.data, p), dict)]]:
            self.lazy("fields", f"unknown key at {show(path) or 'top level'}",
                      self._changed(lambda d, p=path: get(d, p).__setitem__("unexpected_key", 1)))

    def types(self) -> None:
        for path in paths_of(self.data):
            for label, value in TYPE_VALUES:
                self.lazy("types", f"{show(path)} = {label}",
                          self._changed(lambda d, p=path, v=value: put(d, p, copy.deepcopy(v))))

    def numbers(self) -> None:
        for path in paths_of(self.data):
            value = get(self.data, path)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            for label, new in number_values(value):
                self.lazy("numbers", f"{show(path)} = {label}", self._changed(lambda d, p=path, v=new: put(d, p, v)))

    def encodings(self) -> None:
        text = dump(self.data)
        raw = text.encode()
        self.variant("encodings", "random binary", bytes(self.rng.randrange(256) for _ in range(512)))
        self.variant("encodings", "UTF-8 BOM", b"\xef\xbb\xbf" + raw)
        latin = text.replace("name: ", "name: Café-ü-", 1) if "name: " in text else "# Café\n" + text
        self.variant("encodings", "latin-1 text", latin.encode("latin-1", errors="replace"))
        self.variant("encodings", "UTF-16", text.encode("utf-16"))
        cut = self.rng.randrange(1, max(2, len(raw)))
        self.variant("encodings", f"truncated at byte {cut}", raw[:cut])
        nul = self.rng.randrange(0, len(raw))
        self.variant("encodings", f"NUL byte at {nul}", raw[:nul] + b"\x00" + raw[nul:])
        self.variant("encodings", "CRLF line ends", text.replace("\n", "\r\n"))
        self.variant("encodings", "empty file", b"")
        self.variant("encodings", "only a comment", "# nothing here\n")

    def references(self) -> None:
        for path, kind in REFERENCE_FIELDS[self.family]:
            if len(path) > 1:
                try:
                    parent = get(self.data, path[:-1])
                except (KeyError, IndexError, TypeError):
                    continue
                if not isinstance(parent, dict):
                    continue
            ext = f".{kind}"
            targets = [
                ("a missing file", f"missing{ext}", {}),
                ("a directory", "adir", {"dirs": ["adir"]}),
                ("/dev/zero", "/dev/zero", {}),
                ("/dev/null", "/dev/null", {}),
                ("a FIFO", f"fifo{ext}", {"fifos": [f"fifo{ext}"]}),
                ("the instance itself", self.name, {}),
                ("an empty file", f"empty{ext}", {"files": {f"empty{ext}": b""}}),
                ("a binary file", f"binary{ext}",
                 {"files": {f"binary{ext}": bytes(self.rng.randrange(256) for _ in range(2048))}}),
                ("a 3 GiB sparse file", f"huge{ext}", {"sparse": {f"huge{ext}": 3 << 30}}),
            ]
            for label, target, extra in targets:
                d = copy.deepcopy(self.data)
                if path == ("requests_csv",) and self.family == "batching":
                    d.pop("requests", None)
                if path == ("requests_csv",) and self.family == "routing":
                    d.pop("requests", None)
                if path == ("workload", "trace"):
                    d["workload"] = {"trace": target, "format": "azure"}
                else:
                    put(d, path, target)
                self.variant("references", f"{show(path)} -> {label}", data=d, **extra)

    def csv(self) -> None:
        if "requests.csv" not in self.files:
            return
        lines = self.files["requests.csv"].decode().splitlines()
        header = lines[0].split(",")
        row = self.rng.randrange(1, min(len(lines), 20))

        def with_cell(column: str, cell: str) -> bytes:
            out = list(lines)
            cells = out[row].split(",")
            cells[header.index(column)] = cell
            out[row] = ",".join(cells)
            return ("\n".join(out) + "\n").encode()

        for column in ("input_tokens", "predicted_output_tokens", "arrival_s"):
            for cell in ('" 12 "', "", "abc", "-5", "1e400", "nan", "inf", "12.5", "0x10", "1_000"):
                self.variant("csv", f"requests.csv row {row} {column} = {cell!r}", dump(self.data),
                             files={"requests.csv": with_cell(column, cell)})
        text = "\n".join(lines) + "\n"
        drop = [",".join(c for k, c in enumerate(line.split(",")) if k != 2) for line in lines]
        self.variant("csv", "requests.csv without its third column", dump(self.data),
                     files={"requests.csv": ("\n".join(drop) + "\n").encode()})
        self.variant("csv", "requests.csv with a duplicated header name", dump(self.data),
                     files={"requests.csv": text.replace(header[1], header[2], 1).encode()})
        extra = list(lines)
        extra[row] += ",7"
        self.variant("csv", f"requests.csv row {row} with an extra field", dump(self.data),
                     files={"requests.csv": ("\n".join(extra) + "\n").encode()})
        self.variant("csv", "requests.csv with a BOM", dump(self.data),
                     files={"requests.csv": b"\xef\xbb\xbf" + text.encode()})
        self.variant("csv", "requests.csv latin-1 id", dump(self.data),
                     files={"requests.csv": text.replace(",", "é,", 2).encode("latin-1")})
        self.variant("csv", "requests.csv only a header", dump(self.data),
                     files={"requests.csv": (lines[0] + "\n").encode()})
        self.variant("csv", "requests.csv worker column with ' 12 '", dump(self.data),
                     files={"requests.csv": ("\n".join([lines[0] + ",worker,generated_tokens"]
                                                        + [line + ',,' for line in lines[1:row]]
                                                        + [lines[row] + ',\" 12 \",3']
                                                        + [line + ',,' for line in lines[row + 1:]]) + "\n").encode()})

    def aliases(self) -> None:
        paths = [p for p in paths_of(self.data) if not isinstance(get(self.data, p), (dict, list))]
        picks = self.rng.sample(paths, min(2, len(paths)))
        for path in picks:
            for label, bomb in (("billion laughs (10^9 nodes)", billion_laughs()),
                                ("one anchor aliased 200,000 times", wide_bomb()),
                                ("a recursive alias", "&r [1, *r]"), ("5,000-deep nesting", deep_nesting())):
                d = copy.deepcopy(self.data)
                put(d, path, "__FUZZ_BOMB__")
                self.variant("aliases", f"{show(path)} = {label}", dump(d).replace("__FUZZ_BOMB__", bomb, 1))
        top = "lol: &l0 [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
            f"l{k}: &l{k} [" + ", ".join([f"*l{k - 1}"] * 10) + "]\n" for k in range(1, 9))
        self.variant("aliases", "billion laughs under unknown top-level keys", top + dump(self.data))

    def markup(self, with_names: bool) -> None:
        scalars = [p for p in paths_of(self.data) if not isinstance(get(self.data, p), (dict, list))]
        for path in scalars:
            for value in MARKUP_VALUES:
                self.lazy("markup", f"{show(path)} = {value!r}",
                          self._changed(lambda d, p=path, v=value: put(d, p, v)))
        if with_names:  # always in the corpus (not sampled): one set per family
            for name in MARKUP_NAMES:
                self.always.append(("markup", f"file named {name!r}",
                                    lambda n=name: dict(text=dump(self.data), data=None, main=n, files=None)))

    def build(self, with_names: bool) -> dict[str, list[Variant]]:
        self.fields()
        self.types()
        self.numbers()
        self.encodings()
        self.references()
        self.csv()
        self.aliases()
        self.markup(with_names)
        return self.candidates


#: Per base and category, at most this many variants (sampled); the rest of ``--count`` is filled
#: from fields, types and numbers in turn.
QUOTA = {"fields": 6, "types": 7, "numbers": 7, "encodings": 5, "references": 14, "csv": 16, "aliases": 4,
         "markup": 5}


def build_corpus(seed: int = 0, count: int = 1200) -> list[Variant]:
    """The variants, deterministic in ``seed``: `QUOTA` per base and category, then fields, types and
    numbers in turn until there are at least ``count``; ids are ``v0001-<family>-<category>``…"""
    chosen: list[Variant] = []
    leftovers: dict[str, list[Variant]] = {"fields": [], "types": [], "numbers": []}
    named: set[str] = set()
    for path, data, family in load_bases():
        builder = Builder(path, data, family, seed)
        candidates = builder.build(with_names=family not in named)
        named.add(family)
        for category, items in candidates.items():
            rng = random.Random(f"{seed}:{builder.base}:{category}")
            rng.shuffle(items)
            take = QUOTA[category]
            for v in items[:take]:
                builder.materialize(v)
            chosen += items[:take]
            if category in leftovers:
                leftovers[category] += [(builder, v) for v in items[take:]]
        for category, mutation, make in builder.always:
            builder.lazy(category, mutation, make)
            v = builder.candidates[category].pop()
            builder.materialize(v)
            chosen.append(v)
    rng = random.Random(f"{seed}:fill")
    for items in leftovers.values():
        rng.shuffle(items)
    pools = [leftovers["types"], leftovers["numbers"], leftovers["fields"]]
    k = 0
    while len(chosen) < count and any(pools):
        pool = pools[k % len(pools)]
        if pool:
            builder, v = pool.pop()
            builder.materialize(v)
            chosen.append(v)
        k += 1
    for n, v in enumerate(chosen, start=1):
        v.id = f"v{n:04d}-{v.family}-{v.category}"
        tables = v.category == "markup" or n % 2 == 1
        v.argv = command(v.family, v.main, tables)
    return chosen


def write_corpus(variants: list[Variant], root: Path) -> Path:
    """Write every variant under ``root/<id>/`` and ``root/manifest.json``; returns the manifest path."""
    root.mkdir(parents=True, exist_ok=True)
    for v in variants:
        folder = root / v.id
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir()
        for name, content in v.files.items():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)  # "[/]x.yaml" is "]x.yaml" in "["
            (folder / name).write_bytes(content)
        for name in v.dirs:
            (folder / name).mkdir(exist_ok=True)
        for name in v.fifos:
            os.mkfifo(folder / name)
        for name, size in v.sparse.items():
            with open(folder / name, "wb") as handle:
                handle.truncate(size)
    manifest = root / "manifest.json"
    rows = [{k: val for k, val in asdict(v).items() if k != "files"} for v in variants]
    manifest.write_text(json.dumps(rows, indent=1))
    return manifest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="directory to write the corpus into (created)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--count", type=int, default=1200, help="at least this many variants")
    args = parser.parse_args()
    variants = build_corpus(args.seed, args.count)
    manifest = write_corpus(variants, args.out)
    by_category: dict[str, int] = {}
    for v in variants:
        by_category[v.category] = by_category.get(v.category, 0) + 1
    print(f"{len(variants)} variants in {args.out} ({', '.join(f'{k} {n}' for k, n in by_category.items())}); "
          f"manifest {manifest}")


if __name__ == "__main__":
    main()
