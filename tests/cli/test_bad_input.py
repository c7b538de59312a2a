"""Every malformed input gets exactly one clear line naming the file, the field and the problem."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from support import REPO, assert_one_line, run_cli

SRC = REPO / "instances" / "placement" / "sharegpt-70b-a100-n40.yaml"
COST = REPO / "models" / "aladdin" / "llama-2-70b__a100-80gb-sxm__tp2.yaml"


@pytest.fixture
def instance(tmp_path: Path) -> Path:
    """A copy of a shipped instance with an absolute cost-model path, ready to be broken."""
    data = yaml.safe_load(SRC.read_text())
    data["cost_model"] = str(COST)
    (tmp_path / "requests.csv").write_text(SRC.with_suffix(".csv").read_text())
    data["requests"] = "requests.csv"
    path = tmp_path / "inst.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def edit_yaml(path: Path, **changes) -> Path:
    data = yaml.safe_load(path.read_text())
    for key, value in changes.items():
        if value is None:
            data.pop(key, None)
        else:
            data[key] = value
    path.write_text(yaml.safe_dump(data))
    return path


def edit_csv(path: Path, row: int, column: str, value: str) -> Path:
    csv = path.parent / "requests.csv"
    lines = csv.read_text().splitlines()
    header = lines[0].split(",")
    cells = lines[row].split(",")
    cells[header.index(column)] = value
    lines[row] = ",".join(cells)
    csv.write_text("\n".join(lines) + "\n")
    return path



def test_the_fixture_instance_is_valid(monkeypatch, capsys, instance):
    code, out, err = run_cli(monkeypatch, capsys, "solve", "placement", str(instance), "--json")
    assert code == 0 and '"status": "optimal"' in out


@pytest.mark.parametrize(
    "mutate, needles",
    [
        (lambda p: p.parent / "missing.yaml", ["missing.yaml", "file not found"]),
        (lambda p: (p.write_text("name: [unclosed\n"), p)[1], ["inst.yaml", "line", "not valid YAML"]),
        (lambda p: (p.write_text("- a\n- b\n"), p)[1], ["inst.yaml", "mapping"]),
        (lambda p: edit_yaml(p, tensor_paralel=2), ["inst.yaml", "tensor_paralel", "unknown field"]),
        (lambda p: edit_yaml(p, cost_model=None), ["inst.yaml", "cost_model", "required"]),
        (lambda p: edit_yaml(p, model="Llama-9-900B"), ["inst.yaml", "model", "unknown model"]),
        (lambda p: edit_yaml(p, gpu="Z100"), ["inst.yaml", "gpu", "unknown GPU"]),
        (lambda p: edit_yaml(p, tensor_parallel=4), ["inst.yaml", "cost_model", "tensor_parallel=2"]),
        (lambda p: edit_yaml(p, tensor_parallel=0), ["inst.yaml", "tensor_parallel", "greater than 0"]),
        (lambda p: edit_yaml(p, tensor_parallel="2e0"),
         ["inst.yaml", "tensor_parallel", "(YAML reads 2e0 as text: write 2 or 2.0e+0)"]),
        (lambda p: edit_yaml(p, cost_model="nope.yaml"), ["inst.yaml", "cost_model", "not found"]),
        (lambda p: edit_yaml(p, slos={"default": {"ttft_s": 1.6, "atgt_s": 0.01}}),
         ["inst.yaml", "slos.default.atgt_s", "un-batched"]),
        (lambda p: edit_yaml(p, slos={"default": {"ttft_s": -1, "atgt_s": 0.075}}),
         ["inst.yaml", "slos.default.ttft_s", "greater than 0"]),
        (lambda p: edit_yaml(p, slos={"chat": {"ttft_s": 1.6, "atgt_s": 0.075}}),
         ["requests.csv", "slo_class", "default"]),
        (lambda p: edit_yaml(p, placement={"mode": "colocated", "strictness": 1.5}),
         ["inst.yaml", "placement.strictness", "less than or equal to 1"]),
        (lambda p: edit_yaml(p, placement={"mode": "sideways"}), ["inst.yaml", "placement.mode"]),
        (lambda p: edit_csv(p, 3, "input_tokens", "-5"), ["requests.csv", "row 3", "input_tokens", "greater than 0"]),
        (lambda p: edit_csv(p, 2, "output_tokens", "many"), ["requests.csv", "row 2", "output_tokens", "not a number"]),
        (lambda p: edit_csv(p, 4, "predicted_output_tokens", "12.5"), ["requests.csv", "row 4", "whole number"]),
        (lambda p: edit_csv(p, 5, "request_id", "n0000"), ["requests.csv", "row 5", "duplicate request_id"]),
        (lambda p: edit_csv(p, 1, "input_tokens", ""), ["requests.csv", "row 1", "input_tokens", "empty"]),
    ],
)
def test_bad_scenario_or_requests_gets_one_line(monkeypatch, capsys, instance, mutate, needles):
    path = mutate(instance)
    code, _, err = run_cli(monkeypatch, capsys, "solve", "placement", str(path))
    assert_one_line(code, err, *needles)


def test_missing_column_and_unknown_column(monkeypatch, capsys, instance):
    csv = instance.parent / "requests.csv"
    lines = csv.read_text().splitlines()
    csv.write_text("\n".join(l.rsplit(",", 1)[0] if i == 0 else l for i, l in enumerate(lines)) + "\n")
    code, _, err = run_cli(monkeypatch, capsys, "solve", "placement", str(instance))
    assert code == 2 and "requests.csv" in err and len(err.strip().splitlines()) == 1
    lines[0] = lines[0].replace("slo_class", "slo_klass")
    csv.write_text("\n".join(lines) + "\n")
    code, _, err = run_cli(monkeypatch, capsys, "solve", "placement", str(instance))
    assert_one_line(code, err, "requests.csv", "slo_klass", "unknown column")


@pytest.mark.parametrize("extra, needles", [
    (",7", ["requests.csv", "row 3: 7 fields, the header has 6"]),
    (None, ["requests.csv", "row 3: 5 fields, the header has 6"]),
])
def test_csv_row_with_more_or_fewer_fields_than_the_header(monkeypatch, capsys, instance, extra, needles):
    # shared `read_csv_table`: pandas would turn extra leading fields into an index or pad a short row
    csv = instance.parent / "requests.csv"
    lines = csv.read_text().splitlines()
    lines[3] = lines[3] + extra if extra else lines[3].rsplit(",", 1)[0]
    csv.write_text("\n".join(lines) + "\n")
    code, _, err = run_cli(monkeypatch, capsys, "solve", "placement", str(instance))
    assert_one_line(code, err, *needles)


def test_ongoing_row_without_generated_tokens(monkeypatch, capsys, instance):
    csv = instance.parent / "requests.csv"
    lines = csv.read_text().splitlines()
    lines[0] += ",worker,generated_tokens"
    lines[1] += ",0,"
    lines[2:] = [l + ",," for l in lines[2:]]
    csv.write_text("\n".join(lines) + "\n")
    code, _, err = run_cli(monkeypatch, capsys, "solve", "placement", str(instance))
    assert_one_line(code, err, "requests.csv", "row 1", "generated_tokens", "ongoing")


def test_weights_that_do_not_fit(monkeypatch, capsys, instance):
    model = {"name": "Llama-2-70B", "num_layers": 80, "hidden_size": 8192, "num_attention_heads": 64,
             "num_kv_heads": 8, "head_dim": 128, "num_parameters": 90_000_000_000}
    edit_yaml(instance, model=model)
    code, _, err = run_cli(monkeypatch, capsys, "solve", "placement", str(instance))
    assert_one_line(code, err, "inst.yaml", "tensor_parallel", "do not fit")


def test_malformed_cost_model_file(monkeypatch, capsys, instance, tmp_path):
    bad = tmp_path / "bad_cost.yaml"
    data = yaml.safe_load(COST.read_text())
    data["decode_base_s"] = -0.1
    bad.write_text(yaml.safe_dump(data))
    edit_yaml(instance, cost_model=str(bad))
    code, _, err = run_cli(monkeypatch, capsys, "solve", "placement", str(instance))
    assert_one_line(code, err, "bad_cost.yaml", "decode_base_s", "greater than or equal to 0")


@pytest.mark.parametrize(
    "args, needles",
    [
        (["--solver", "cplex"], ["unknown solver", "cplex"]),
        (["--time-limit", "-3"], ["--time-limit", "positive"]),
    ],
)
def test_bad_options(monkeypatch, capsys, instance, args, needles):
    code, _, err = run_cli(monkeypatch, capsys, "solve", "placement", str(instance), *args)
    assert_one_line(code, err, *needles)


def test_out_file_is_never_overwritten_without_force(monkeypatch, capsys, instance, tmp_path):
    target = tmp_path / "result.json"
    target.write_text("precious")
    code, _, err = run_cli(monkeypatch, capsys, "solve", "placement", str(instance), "--out", str(target))
    assert_one_line(code, err, "result.json", "--force")
    assert target.read_text() == "precious"
    code, _, _ = run_cli(monkeypatch, capsys, "solve", "placement", str(instance), "--out", str(target), "--force")
    assert code == 0 and '"objective"' in target.read_text()


@pytest.mark.parametrize(
    "args, needles",
    [
        (["plan", "worker-config", "--model", "Llama-9", "--gpu", "A100-80GB-SXM"], ["unknown model"]),
        (["plan", "worker-config", "--model", "Llama-2-70B", "--gpu", "A100-80GB-SXM", "--tp", "x"], ["--tp"]),
        (["plan", "worker-config", "--model", "Llama-2-70B", "--gpu", "A100-80GB-SXM", "--workload", "nope"], ["unknown workload", "sharegpt"]),
        # a family alias names several SKUs: refused with the candidates, never read as one of them
        (["plan", "worker-config", "--model", "Llama-2-70B", "--gpu", "A100-80GB"], ["--gpu", "alias", "A100-80GB-PCIe", "A100-80GB-SXM"]),
        (["simulate", "replay", "--model", "Llama-2-70B", "--gpu", "H100", "--tp", "2", "--rate", "1"], ["--gpu", "alias", "H100-80GB-SXM"]),
        (["fit", "/nonexistent/perf.csv"], ["perf.csv", "not found"]),
        (["generate", "placement", "x.yaml", "--mode", "split"], ["--mode"]),
    ],
)
def test_other_commands_bad_input(monkeypatch, capsys, tmp_path, args, needles):
    monkeypatch.chdir(REPO)
    code, _, err = run_cli(monkeypatch, capsys, *args)
    assert_one_line(code, err, *needles)


@pytest.mark.parametrize(
    "name, content, fmt, needles",
    [
        ("t.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\nnot-a-date,12,3\n", "azure", ["t.csv", "row 1", "TIMESTAMP"]),
        ("t.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,x,3\n", "azure",
         ["t.csv", "row 1", "ContextTokens", "not a number"]),
        ("t.csv", "a,b\n1,2\n", "sharegpt", ["t.csv", "num_prefill_tokens", "missing"]),
        ("t.jsonl", '{"timestamp": 1, "input_length": 3\n', "mooncake", ["t.jsonl", "line 1", "not valid JSON"]),
        ("t.jsonl", '{"timestamp": 1, "input_length": 3}\n', "mooncake", ["t.jsonl", "output_length"]),
    ],
)
def test_bad_trace_files_get_one_line(monkeypatch, capsys, tmp_path, name, content, fmt, needles):
    trace = tmp_path / name
    trace.write_text(content)
    code, _, err = run_cli(monkeypatch, capsys, "workload", "derive", str(trace), str(tmp_path / "x.yaml"),
                           "--trace-format", fmt, "--name", "x")
    assert_one_line(code, err, *needles)


def test_usage_error_is_not_a_traceback(monkeypatch, capsys):
    code, _, err = run_cli(monkeypatch, capsys, "solve", "placement")
    assert code == 2 and "Missing argument" in err and "Traceback" not in err


@pytest.mark.parametrize("text, line, key", [
    ("family: batching\nlimits: {C: 4096, M: 100, M: 1}\nrequests: [{request_id: a, input_tokens: 2, output_tokens: 2}]\n", 2, "M"),
    ("family: batching\nlimits:\n  M: 100\nlimits:\n  M: 5\nrequests: [{request_id: a, input_tokens: 2, output_tokens: 2}]\n",
     4, "limits"),
])
def test_a_key_repeated_in_one_mapping_is_one_line(monkeypatch, capsys, tmp_path, text, line, key):
    # plain YAML keeps the last of two equal keys without a word; the loader names the line and key
    path = tmp_path / "dup.yaml"
    path.write_text(text)
    code, _, err = run_cli(monkeypatch, capsys, "simulate", "batching", str(path))
    lines = [x for x in err.strip().splitlines() if x.strip()]
    assert code == 2 and len(lines) == 1
    assert f"dup.yaml: line {line}: key '{key}' appears twice" in lines[0]


def test_a_column_named_twice_in_a_csv_header_is_one_line(tmp_path):
    # pandas would rename the second input_tokens to "input_tokens.1" and report an unknown column
    from planner.core.io import read_csv_table
    from planner.errors import InputError

    path = tmp_path / "dup_col.csv"
    path.write_text("id,input_tokens,input_tokens\na,1,2\n")
    with pytest.raises(InputError, match="dup_col.csv: input_tokens: column appears twice in the header"):
        read_csv_table(path, {"id": str, "input_tokens": int})


def test_a_union_fields_error_names_the_field_not_the_union_member():
    # pydantic locates an error of `str | Inner` at ('model', 'str'): the type tag is not a field of the input.
    from pydantic import BaseModel, ValidationError

    from planner.core.io import format_validation_error

    class Inner(BaseModel):
        a: int

    class Spec(BaseModel):
        model: str | Inner
        sizes: list[int] | dict[str, int] = []
        C: int = 1  # an upper-case field name is a field, not a tag

    cases = [({"model": 5}, "model"), ({"model": "m", "sizes": 3}, "sizes"), ({"model": "m", "C": "x"}, "C")]
    for data, field in cases:
        with pytest.raises(ValidationError) as caught:
            Spec.model_validate(data)
        assert format_validation_error(caught.value)[0] == field


def test_a_gpu_alias_in_an_instance_file_is_refused_not_rewritten(monkeypatch, capsys, tmp_path):
    # 'A100' names the SXM and PCIe parts; a plan for one of them must not be made for the other silently.
    src = REPO / "instances/placement/sharegpt-70b-a100-n40.yaml"
    text = src.read_text().replace("gpu: A100-80GB-SXM", "gpu: A100")
    assert "gpu: A100\n" in text
    (tmp_path / "p.yaml").write_text(text)
    (tmp_path / src.with_suffix(".csv").name).write_text(src.with_suffix(".csv").read_text())
    code, _, err = run_cli(monkeypatch, capsys, "solve", "placement", str(tmp_path / "p.yaml"))
    assert_one_line(code, err, "p.yaml", "gpu", "alias", "A100-80GB-PCIe", "A100-80GB-SXM")
