"""Batching instance files: malformed input found by the fuzz audit is one clear line, never a traceback.

Each case runs the real CLI (`planner simulate batching x.yaml`) and checks exit code 2, exactly one
non-empty stderr line, and the file, field and problem in it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import yaml
from support import REPO, assert_one_line, run_cli

TINY3 = REPO / "instances" / "batching" / "tiny3.yaml"
REQS = [{"request_id": "a", "input_tokens": 2, "output_tokens": 3},
        {"request_id": "b", "input_tokens": 1, "output_tokens": 2}]



def instance(tmp_path: Path, **changes) -> Path:
    """A copy of tiny3.yaml with ``changes`` (a value of ``...`` removes the key)."""
    data = yaml.safe_load(TINY3.read_text())
    for key, value in changes.items():
        if value is ...:
            data.pop(key, None)
        else:
            data[key] = value
    path = tmp_path / "x.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def with_csv(tmp_path: Path, body: str, name: str = "r.csv", **changes) -> Path:
    (tmp_path / name).write_text(body)
    return instance(tmp_path, **{"requests": ..., "requests_csv": name, **changes})


def simulate(monkeypatch, capsys, path: Path, *extra: str) -> tuple[int, str, str]:
    return run_cli(monkeypatch, capsys, "simulate", "batching", str(path), *extra)


# F1: requests_csv must be a path ----------------------------------------------------------------------

@pytest.mark.parametrize("value, shown", [(123, "got 123"), (None, "got null"), (["a.csv"], "got a list"),
                                          (True, "got true"), ("", "got an empty string")])
def test_requests_csv_that_is_not_a_path(monkeypatch, capsys, tmp_path, value, shown):
    code, _, err = simulate(monkeypatch, capsys, instance(tmp_path, requests=..., requests_csv=value))
    assert_one_line(code, err, "x.yaml: requests_csv: expected a CSV file path", shown)


# F17g: a directory is not "file not found" -------------------------------------------------------------

def test_requests_csv_that_is_a_directory(monkeypatch, capsys, tmp_path):
    (tmp_path / "adir").mkdir()
    code, _, err = simulate(monkeypatch, capsys, instance(tmp_path, requests=..., requests_csv="adir"))
    line = assert_one_line(code, err, "x.yaml: requests_csv:", "adir", "is a directory")
    assert "not found" not in line


# F11: requests and requests_csv together --------------------------------------------------------------

def test_requests_and_requests_csv_together(monkeypatch, capsys, tmp_path):
    path = with_csv(tmp_path, "request_id,input_tokens,output_tokens\na,1,1\n", requests=REQS)
    code, _, err = simulate(monkeypatch, capsys, path)
    assert_one_line(code, err, "x.yaml: requests_csv: give either requests or requests_csv, not both")


# F2: whole numbers beyond int64 in a CSV cell ----------------------------------------------------------

@pytest.mark.filterwarnings("error")  # the pandas RuntimeWarning of the cast must not happen at all
@pytest.mark.parametrize("cell", ["1e30", "100000000000000000000000", "18446744073709551615"])
def test_huge_whole_number_in_csv(monkeypatch, capsys, tmp_path, cell):
    path = with_csv(tmp_path, f"request_id,input_tokens,output_tokens\na,{cell},1\n", name="huge.csv")
    code, _, err = simulate(monkeypatch, capsys, path)
    assert_one_line(code, err, f"huge.csv: row 1, column input_tokens: Input should be less than or equal to 1000000 "
                               f"(got {cell})")


@pytest.mark.filterwarnings("error")
def test_huge_output_tokens_on_a_later_row(monkeypatch, capsys, tmp_path):
    path = with_csv(tmp_path, "request_id,input_tokens,output_tokens\na,1,1\nb,2,1e300\n", name="huge.csv")
    code, _, err = simulate(monkeypatch, capsys, path)
    assert_one_line(code, err, "huge.csv: row 2, column output_tokens: Input should be less than or equal to 1000000")


# F12: rows with more or fewer fields than the header ---------------------------------------------------

@pytest.mark.parametrize("body, expected", [
    ("request_id,input_tokens,output_tokens\na,1,1,50,60\n", "ragged.csv: row 1: 5 fields, the header has 3"),
    ("request_id,input_tokens,output_tokens\na,1,1\nb,2,2,9\n", "ragged.csv: row 2: 4 fields, the header has 3"),
    ("request_id,input_tokens,output_tokens\na,1\n", "ragged.csv: row 1: 2 fields, the header has 3"),
    ("request_id,input_tokens,output_tokens\na,1,1\n\nb\n", "ragged.csv: row 2: 1 field, the header has 3"),
])
def test_ragged_csv_rows(monkeypatch, capsys, tmp_path, body, expected):
    code, _, err = simulate(monkeypatch, capsys, with_csv(tmp_path, body, name="ragged.csv"))
    assert_one_line(code, err, expected)


def test_csv_quoting_blank_lines_and_bom_still_load(monkeypatch, capsys, tmp_path):
    body = '\ufeffrequest_id,input_tokens,output_tokens,arrival_s\n"a,1",2,3,\n\n   \n"b",1,2,0.5\n'
    code, _, err = simulate(monkeypatch, capsys, with_csv(tmp_path, body), "--json")
    assert code == 0, err
    from planner.batching.instance import load_batching_instance

    problem = load_batching_instance(tmp_path / "x.yaml")
    assert [(r.request_id, r.input_tokens, r.output_tokens, r.arrival_s) for r in problem.requests] == [
        ("a,1", 2, 3, 0.0), ("b", 1, 2, 0.5)]


# F13: duplicate ids in a CSV name the CSV and its rows --------------------------------------------------

def test_duplicate_id_in_csv_names_the_rows(monkeypatch, capsys, tmp_path):
    path = with_csv(tmp_path, "request_id,input_tokens,output_tokens\na,1,1\nb,1,1\na,2,2\n", name="dup.csv")
    code, _, err = simulate(monkeypatch, capsys, path)
    line = assert_one_line(code, err, "dup.csv: request_id: duplicate request id 'a' (rows 1 and 3)")
    assert "x.yaml" not in line


# F17d: ids that are neither text nor whole numbers ---------------------------------------------------

@pytest.mark.parametrize("value, shown", [(None, "got null"), ([1, 2], "got a list"), (True, "got true"),
                                          (1.5, "got 1.5"), ({"a": 1}, "got a mapping")])
def test_bad_request_ids(monkeypatch, capsys, tmp_path, value, shown):
    path = instance(tmp_path, requests=[{"request_id": value, "input_tokens": 2, "output_tokens": 3}])
    code, _, err = simulate(monkeypatch, capsys, path)
    assert_one_line(code, err, "x.yaml: requests[0].request_id: expected a string or a whole number", shown)


def test_whole_number_ids_are_accepted(tmp_path):
    from planner.batching.instance import load_batching_instance

    path = instance(tmp_path, requests=[{"request_id": 7, "input_tokens": 2, "output_tokens": 3},
                                        {"input_tokens": 1, "output_tokens": 1}])
    assert [r.request_id for r in load_batching_instance(path).requests] == ["7", "r1"]


# F4 and F10: the cost model -----------------------------------------------------------------------------

ZERO = {"a_o": 0, "b_o": 0, "a_p": 0, "b_p": 0, "a_d": 0, "b_d": 0}
SMALL = {"a_o": 0.001, "b_o": 0.05, "a_p": 1e-7, "b_p": 0.09, "a_d": 8e-6, "b_d": 0.02}


def test_all_zero_cost_model(monkeypatch, capsys, tmp_path):
    code, _, err = simulate(monkeypatch, capsys, instance(tmp_path, cost_model=ZERO))
    assert_one_line(code, err, "x.yaml: cost_model: every coefficient is 0, so every batch would take 0 s")


def test_all_zero_cost_model_file(monkeypatch, capsys, tmp_path):
    (tmp_path / "zero.yaml").write_text(yaml.safe_dump({"kind": "infermax", **ZERO, "s_p": 0.0, "s_d": 0.0}))
    code, _, err = simulate(monkeypatch, capsys, instance(tmp_path, cost_model="zero.yaml"))
    assert_one_line(code, err, "zero.yaml", "every coefficient is 0")


@pytest.mark.parametrize("text, needles", [
    ("a_o: .inf", ["cost_model.a_o: Input should be a finite number (got inf)"]),
    ("b_o: .nan", ["cost_model.b_o: Input should be a finite number (got nan)"]),
    ("b_o: inf", ["cost_model.b_o: expected a number, not text (got 'inf')"]),  # YAML 1.1 infinity is .inf
    ("a_o: 1.0e+308", ["cost_model.a_o: Input should be less than or equal to 1000000"]),
    ("b_d: 1.0e+7", ["cost_model.b_d: Input should be less than or equal to 1000000"]),
    ("a_o: true", ["cost_model.a_o: expected a number, got true"]),
    ("s_p: false", ["cost_model.s_p: expected a number, got false"]),
    ("n_layers: true", ["cost_model.n_layers: expected a number, got true"]),
    ("n_layers: 1.0e+30", ["cost_model.n_layers: Input should be less than or equal to 10000"]),
    ("n_layers: 1e30", ["cost_model.n_layers: expected a number, not text (got '1e30')",
                        "(YAML reads 1e30 as text: write 1.0e+30)"]),
    ("n_layers: 1000000000000000000000000000000", ["cost_model.n_layers: Input should be less than or equal to 10000"]),
    ("n_layers: 10001", ["cost_model.n_layers: Input should be less than or equal to 10000"]),
    ("n_layers: .inf", ["cost_model.n_layers: Input should be a finite number"]),
    ("n_layers: 32.5", ["cost_model.n_layers", "fractional part"]),
])
def test_bad_cost_model_values(monkeypatch, capsys, tmp_path, text, needles):
    key, value = text.split(": ")
    cost = {**SMALL, key: yaml.safe_load(value)}
    code, _, err = simulate(monkeypatch, capsys, instance(tmp_path, cost_model=cost))
    line = assert_one_line(code, err, "x.yaml:", *needles)
    assert len(line) < 200


def test_caps_keep_every_shipped_and_published_model(tmp_path):
    from planner.batching.costmodel import MAX_COEFFICIENT_MS, MAX_LAYERS, PUBLISHED, load_infermax_model

    models = [load_infermax_model(p) for p in sorted((REPO / "models" / "infermax").glob("*.yaml"))]
    assert len(models) >= 3
    for model in [*models, *PUBLISHED.values()]:
        assert model.n_layers <= MAX_LAYERS
        assert max(getattr(model, k) for k in ("a_o", "b_o", "a_p", "b_p", "s_p", "a_d", "b_d", "s_d")) < MAX_COEFFICIENT_MS


@pytest.mark.filterwarnings("error")
def test_largest_allowed_cost_model_keeps_latencies_finite(monkeypatch, capsys, tmp_path):
    cost = {"n_layers": 10000, **{k: 1e6 for k in ("a_o", "b_o", "a_p", "b_p", "s_p", "a_d", "b_d", "s_d")}}
    code, out, err = simulate(monkeypatch, capsys, instance(tmp_path, cost_model=cost), "--json")
    assert code == 0, err
    metrics = json.loads(out)["solution"]["metrics"]
    for key in ("total_latency", "busy_seconds", "mean_ttft", "mean_e2e"):
        assert math.isfinite(metrics[key]) and metrics[key] > 0, (key, metrics[key])


# F17a: YAML 1.1 reads 1e6 as text ---------------------------------------------------------------------

def test_exponent_without_dot_gets_a_hint(monkeypatch, capsys, tmp_path):
    path = tmp_path / "x.yaml"
    path.write_text(TINY3.read_text().replace("limits: {C: 4096, M: 6}", "limits: {C: 1e6, M: 6}"))
    code, _, err = simulate(monkeypatch, capsys, path)
    assert_one_line(code, err, "x.yaml: limits.C:", "(got '1e6')", "(YAML reads 1e6 as text: write 1000000 or 1.0e+6)")


def test_yaml_number_hint_spellings():
    from planner.core.io import yaml_number_hint

    assert yaml_number_hint("1e6") == "(YAML reads 1e6 as text: write 1000000 or 1.0e+6)"
    assert yaml_number_hint("2.5e3") == "(YAML reads 2.5e3 as text: write 2500 or 2.5e+3)"
    assert yaml_number_hint("1e-3") == "(YAML reads 1e-3 as text: write 1.0e-3)"
    assert yaml_number_hint("1e30") == "(YAML reads 1e30 as text: write 1.0e+30)"
    for not_a_number in ("abc", "e6", "1e", "", 1e6, None):
        assert yaml_number_hint(not_a_number) == ""


# Request keys of earlier files are refused, naming the key that replaced each (never reinterpreted) ----

@pytest.mark.parametrize("old, new", [("id", "request_id"), ("input_len", "input_tokens"),
                                      ("output_len", "output_tokens"), ("arrival", "arrival_s")])
def test_a_renamed_request_key_names_its_new_key(monkeypatch, capsys, tmp_path, old, new):
    row = {"request_id": "a", "input_tokens": 2, "output_tokens": 3}
    row[old] = row.pop(new) if new in row else 0.5
    code, _, err = simulate(monkeypatch, capsys, instance(tmp_path, requests=[row]))
    assert_one_line(code, err, f"x.yaml: requests[0].{old}: renamed: use {new}")


@pytest.mark.parametrize("header, old, new", [("id,input_tokens,output_tokens", "id", "request_id"),
                                              ("request_id,input_len,output_tokens", "input_len", "input_tokens"),
                                              ("request_id,input_tokens,output_len", "output_len", "output_tokens"),
                                              ("input_tokens,output_tokens,arrival", "arrival", "arrival_s")])
def test_a_renamed_csv_column_names_its_new_column(monkeypatch, capsys, tmp_path, header, old, new):
    path = with_csv(tmp_path, f"{header}\na,2,3\n", name="old.csv")
    code, _, err = simulate(monkeypatch, capsys, path)
    assert_one_line(code, err, f"old.csv: {old}: renamed: use {new}")
