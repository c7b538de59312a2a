"""The bad inputs of issue 22's fuzz audit, one by one: each is one stderr line naming the file, the
field and the problem, with a non-zero exit — never a traceback, a hang or a memory blow-up.

Inputs that grew without bound before (alias bombs, ``/dev/zero``) and runs whose stdout is read run
as real subprocesses with a 30 s hang guard and a 2 GiB address-space cap; the others run in-process
under a 30 s alarm (a FIFO that blocks an ``open`` is interrupted by it and fails the test).
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from support import REPO, assert_one_line, run_cli

PLACEMENT = REPO / "instances" / "placement" / "sharegpt-70b-a100-n40.yaml"
COST_70B = REPO / "models" / "aladdin" / "llama-2-70b__a100-80gb-sxm__tp2.yaml"
BILLION_LAUGHS = "[" + ", ".join(
    ['&a0 [' + ", ".join(['"lol"'] * 10) + ']']
    + [f"&a{k} [" + ", ".join([f"*a{k - 1}"] * 10) + "]" for k in range(1, 10)]) + "]"
HANG_GUARD_S = 30


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


def planner(*args: str, cwd: Path | None = None) -> tuple[int, str, str]:
    """`planner <args>` as a real subprocess (hang guard, 2 GiB cap): (exit code, stdout, stderr)."""
    proc = subprocess.run([sys.executable, "-m", "planner", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=HANG_GUARD_S, preexec_fn=_limit_memory, stdin=subprocess.DEVNULL)
    return proc.returncode, proc.stdout, proc.stderr


def in_process(monkeypatch, capsys, *args: str) -> tuple[int, str, str]:
    """`run_cli` under a `HANG_GUARD_S` alarm (a hang becomes an internal-error line: the test fails)."""
    def fire(signum, frame):  # noqa: ANN001, ARG001
        raise TimeoutError(f"planner {' '.join(args)} ran for more than {HANG_GUARD_S} s")

    previous = signal.signal(signal.SIGALRM, fire)
    signal.alarm(HANG_GUARD_S)
    try:
        return run_cli(monkeypatch, capsys, *args)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def placement_copy(tmp_path: Path, filename: str = "inst.yaml", **changes) -> Path:
    """The shipped placement instance, self-contained in ``tmp_path`` (requests.csv beside it)."""
    data = yaml.safe_load(PLACEMENT.read_text())
    data["cost_model"] = str(COST_70B)
    (tmp_path / "requests.csv").write_text(PLACEMENT.with_suffix(".csv").read_text())
    data["requests"] = "requests.csv"
    data.update(changes)
    path = tmp_path / filename
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data))
    return path


def shipped(family_dir: str, name: str, tmp_path: Path) -> dict:
    return yaml.safe_load((REPO / "instances" / family_dir / name).read_text())


# ---- rich markup in file names and values --------------------------------------------------------

def test_markup_in_a_missing_file_name_is_printed_as_written(monkeypatch, capsys, tmp_path):
    monkeypatch.chdir(tmp_path)
    code, _, err = in_process(monkeypatch, capsys, "solve", "placement", "[/]x.yaml")
    line = assert_one_line(code, err, "[/]x.yaml", "file not found")
    assert "MarkupError" not in err, line


def test_markup_in_a_number_field_is_shown_verbatim(monkeypatch, capsys, tmp_path):
    data = shipped("batching", "tiny3.yaml", tmp_path)
    data["limits"]["C"] = "[red]big[/red]"
    path = tmp_path / "b.yaml"
    path.write_text(yaml.safe_dump(data))
    code, _, err = in_process(monkeypatch, capsys, "solve", "batching", str(path))
    assert_one_line(code, err, "b.yaml: limits.C:", "expected a number", "'[red]big[/red]'")


@pytest.mark.parametrize("name", ["[/]x.yaml", "[red]x[/red].yaml"])
def test_markup_in_names_of_a_valid_instance_renders_tables(tmp_path, name):
    # the file name and the instance name go into table titles; rich must print them, not parse them
    path = placement_copy(tmp_path, filename=name, name="[bold]n40[/] [/]")
    if path.parent != tmp_path:  # "[/]x.yaml" is the file "]x.yaml" in the directory "["
        (path.parent / "requests.csv").write_text((tmp_path / "requests.csv").read_text())
    code, out, err = planner("solve", "placement", name, "--time-limit", "20", cwd=tmp_path)
    assert code == 0, err
    assert "Placement: [bold]n40[/] [/]" in out
    assert "Traceback" not in err and "MarkupError" not in err


def test_control_characters_in_an_error_stay_on_one_line(monkeypatch, capsys, tmp_path):
    path = placement_copy(tmp_path, model="Llama\nwith\x1b[31m a newline")
    code, _, err = in_process(monkeypatch, capsys, "solve", "placement", str(path))
    assert_one_line(code, err, "inst.yaml: model:", "unknown model")


# ---- YAML alias bombs, recursion, nesting --------------------------------------------------------

BOMB_CASES = {
    "placement": ("placement", "sharegpt-70b-a100-n40.yaml", "name"),
    "batching": ("batching", "tiny3.yaml", "name"),
    "priority": ("priority", "fig3_toy.yaml", "name"),
    "queueing": ("queueing", "two-models-one-a100.yaml", "name"),
    "deployment": ("deployment", "cost-two-models.yaml", "name"),
    "routing": ("routing", "llama3-8b-v100-small.yaml", "name"),
    "capacity": ("capacity", "llama2-70b-sharegpt-a100-h100.yaml", "name"),
}


@pytest.mark.parametrize("family", sorted(BOMB_CASES))
def test_billion_laughs_is_refused_at_once(tmp_path, family):
    folder, name, key = BOMB_CASES[family]
    data = shipped(folder, name, tmp_path)
    data[key] = "__BOMB__"
    path = tmp_path / "bomb.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False).replace("__BOMB__", BILLION_LAUGHS))
    args = ["capacity", str(path), "--report", str(tmp_path / "o")] if family == "capacity" else \
        ["solve", family, str(path)]
    code, _, err = planner(*args)
    line = assert_one_line(code, err, "bomb.yaml", "aliases expand the document to 12,", "at most 100,000")
    assert "lol" not in line  # the expanded input is never formatted


def test_billion_laughs_in_a_referenced_cost_model_names_that_file(tmp_path):
    bomb = tmp_path / "cost.yaml"
    bomb.write_text(f"kind: aladdin\nmodel: {BILLION_LAUGHS}\n")
    path = placement_copy(tmp_path, cost_model=str(bomb))
    code, _, err = planner("solve", "placement", str(path))
    assert_one_line(code, err, "cost.yaml", "aliases expand")


@pytest.mark.parametrize("text, needles", [
    ("name: &r [1, *r]\n", ["line 1", "an alias refers to a node that contains it"]),
    ("name: " + "[" * 150 + "]" * 150 + "\n", ["nest"]),
])
def test_recursive_or_deep_documents_are_one_line(monkeypatch, capsys, tmp_path, text, needles):
    path = tmp_path / "r.yaml"
    path.write_text(text)
    code, _, err = in_process(monkeypatch, capsys, "solve", "queueing", str(path))
    assert_one_line(code, err, "r.yaml", *needles)


def test_a_few_aliases_still_work_and_merge_keys_override(tmp_path):
    from planner.core.io import load_yaml_text

    data = load_yaml_text("base: &b {ttft_s: 1.0, atgt_s: 0.1}\nchat: {<<: *b, ttft_s: 2.0}\nsame: *b\n", "x.yaml")
    assert data["chat"] == {"ttft_s": 2.0, "atgt_s": 0.1} and data["same"] == {"ttft_s": 1.0, "atgt_s": 0.1}


def test_an_alias_expansion_just_under_the_cap_is_accepted_and_just_over_is_refused():
    from planner.core.io import MAX_ALIAS_NODES, load_yaml_text
    from planner.errors import InputError

    # one anchored list of 9 items (10 nodes), aliased n times: each alias adds 10 nodes
    def doc(aliases: int) -> str:
        return "a: &x [1, 2, 3, 4, 5, 6, 7, 8, 9]\nb: [" + ", ".join(["*x"] * aliases) + "]\n"

    fits = MAX_ALIAS_NODES // 10
    assert len(load_yaml_text(doc(fits), "x.yaml")["b"]) == fits
    with pytest.raises(InputError, match="aliases expand"):
        load_yaml_text(doc(fits + 1), "x.yaml")


# ---- files that are not regular files, or too large ----------------------------------------------

def _fifo(tmp_path: Path, name: str) -> Path:
    path = tmp_path / name
    os.mkfifo(path)
    return path


def _sparse(tmp_path: Path, name: str, size: int = 3 << 30) -> Path:
    path = tmp_path / name
    with open(path, "wb") as handle:
        handle.truncate(size)
    return path


@pytest.mark.parametrize("field, target, needles", [
    ("requests", "/dev/zero", ["inst.yaml: requests: /dev/zero is a character device, not a regular file"]),
    ("requests", "fifo", ["inst.yaml: requests:", "fifo.csv is a FIFO (named pipe), not a regular file"]),
    ("requests", "sparse", ["inst.yaml: requests:", "huge.csv is 3 GiB", "at most 256 MiB",
                            "refused before reading"]),
    ("cost_model", "/dev/zero", ["inst.yaml: cost_model: /dev/zero is a character device"]),
    ("cost_model", "fifo", ["inst.yaml: cost_model:", "is a FIFO"]),
    ("cost_model", "sparse", ["inst.yaml: cost_model:", "is 3 GiB", "at most 64 MiB"]),
])
def test_placement_references_to_endless_or_huge_files(monkeypatch, capsys, tmp_path, field, target, needles):
    endless = target == "/dev/zero"
    if target == "fifo":
        target = str(_fifo(tmp_path, "fifo.csv" if field == "requests" else "fifo.yaml"))
    elif target == "sparse":
        target = str(_sparse(tmp_path, "huge.csv" if field == "requests" else "huge.yaml"))
    path = placement_copy(tmp_path, **{field: target})
    args = ("solve", "placement", str(path))
    code, _, err = planner(*args) if endless else in_process(monkeypatch, capsys, *args)
    assert_one_line(code, err, *needles)


@pytest.mark.parametrize("where", ["cluster", "demand", "routing"])
def test_workload_dev_zero_and_fifo(monkeypatch, capsys, tmp_path, where):
    if where == "cluster":
        data, args = shipped("deployment", "clusters/llama3-8b-8xv100.yaml", tmp_path), ["solve", "deployment"]
        set_workload, field = (lambda d, w: d.__setitem__("workload", w)), "workload"
    elif where == "demand":
        data, args = shipped("deployment", "cost-two-models.yaml", tmp_path), ["solve", "deployment"]
        set_workload, field = (lambda d, w: d["demands"][0].__setitem__("workload", w)), "demands[0].workload"
    else:
        data, args = shipped("routing", "llama3-8b-v100-small.yaml", tmp_path), ["solve", "routing"]
        set_workload, field = (lambda d, w: d["requests"].__setitem__("workload", w)), "requests.workload"
    for target, words in (("/dev/zero", "is a character device"), (str(_fifo(tmp_path, "w.yaml")), "is a FIFO")):
        set_workload(data, target)
        path = tmp_path / "d.yaml"
        path.write_text(yaml.safe_dump(data))
        run = planner if target == "/dev/zero" else (lambda *a: in_process(monkeypatch, capsys, *a))
        code, _, err = run(*args, str(path))
        assert_one_line(code, err, f"d.yaml: {field}:", words)


@pytest.mark.parametrize("family, field", [("batching", "cost_model"), ("priority", "cost_model"),
                                           ("batching", "requests_csv")])
def test_other_references_to_dev_zero(tmp_path, family, field):
    data = shipped(family, "tiny3.yaml" if family == "batching" else "fig3_toy.yaml", tmp_path)
    data[field] = "/dev/zero"
    if field == "requests_csv":
        data.pop("requests")
    path = tmp_path / "x.yaml"
    path.write_text(yaml.safe_dump(data))
    code, _, err = planner("solve", family, str(path))
    assert_one_line(code, err, f"x.yaml: {field}: /dev/zero is a character device, not a regular file")


def test_the_instance_itself_as_fifo_or_directory(monkeypatch, capsys, tmp_path):
    fifo = _fifo(tmp_path, "q.yaml")
    code, _, err = in_process(monkeypatch, capsys, "solve", "queueing", str(fifo))
    assert_one_line(code, err, "q.yaml: is a FIFO (named pipe), not a regular file; expected a YAML file")
    code, _, err = in_process(monkeypatch, capsys, "solve", "queueing", str(tmp_path))
    assert_one_line(code, err, "is a directory, expected a YAML file")


def test_a_trace_that_is_dev_zero(tmp_path):
    data = shipped("capacity", "llama2-70b-sharegpt-a100-h100.yaml", tmp_path)
    data["workload"] = {"trace": "/dev/zero", "format": "azure"}
    path = tmp_path / "cap.yaml"
    path.write_text(yaml.safe_dump(data))
    code, _, err = planner("capacity", str(path), "--report", str(tmp_path / "o"), "--no-progress")
    assert_one_line(code, err, "cap.yaml: workload.trace: /dev/zero is a character device")
    code, _, err = planner("workload", "derive", "/dev/zero", str(tmp_path / "d.yaml"), "--trace-format", "azure",
                           "--name", "d")
    assert_one_line(code, err, "/dev/zero: is a character device, not a regular file; expected a trace file")


# ---- encodings -----------------------------------------------------------------------------------

@pytest.mark.parametrize("content, needles", [
    (b"\xff\xfe" + "name: x\n".encode("utf-16-le"), ["not UTF-8 text: byte 0xff at offset 0", "UTF-16"]),
    ("name: Café\n".encode("latin-1"), ["not UTF-8 text: byte 0xe9 at offset 9"]),
    (b"name: a\x00b\n", ["not valid YAML"]),
])
def test_text_that_is_not_utf8_yaml(monkeypatch, capsys, tmp_path, content, needles):
    path = tmp_path / "q.yaml"
    path.write_bytes(content)
    code, _, err = run_cli(monkeypatch, capsys, "solve", "queueing", str(path))
    assert_one_line(code, err, "q.yaml", *needles)


def test_a_bom_is_ignored(monkeypatch, capsys, tmp_path):
    path = placement_copy(tmp_path)
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    csv = tmp_path / "requests.csv"
    csv.write_bytes(b"\xef\xbb\xbf" + csv.read_bytes())
    code, out, err = run_cli(monkeypatch, capsys, "solve", "placement", str(path), "--json")
    assert code == 0, err


# ---- numbers written as text, negative now_s -----------------------------------------------------

@pytest.mark.parametrize("family, file, mutate, needles", [
    ("placement", None, lambda d: d.__setitem__("tensor_parallel", "2"),
     ["inst.yaml: tensor_parallel: expected a number, not text (got '2'): write 2 without quotes"]),
    ("placement", None, lambda d: d.__setitem__("slos", {"default": {"ttft_s": "1.6", "atgt_s": 0.075}}),
     ["inst.yaml: slos.default.ttft_s: expected a number, not text (got '1.6')"]),
    ("batching", "tiny3.yaml", lambda d: d["limits"].__setitem__("C", "12"),
     ["x.yaml: limits.C: expected a number, not text (got '12'): write 12 without quotes"]),
    ("batching", "tiny3.yaml", lambda d: d["requests"][1].__setitem__("input_tokens", "3"),
     ["x.yaml: requests[1].input_tokens: expected a number, not text (got '3')"]),
    ("queueing", "two-models-one-a100.yaml", lambda d: d["groups"][0].__setitem__("num_requests", "8"),
     ["x.yaml: groups[0].num_requests: expected a number, not text (got '8')"]),
    ("queueing", "two-models-one-a100.yaml", lambda d: d["slo_classes"].__setitem__("interactive", "20"),
     ["x.yaml: slo_classes.interactive: expected a number, not text (got '20')"]),
    ("priority", "fig3_toy.yaml", lambda d: d["jobs"][0].__setitem__("input_tokens", "7"),
     ["x.yaml: jobs[0].input_tokens: expected a number, not text (got '7')"]),
    ("priority", "fig3_toy.yaml", lambda d: d.__setitem__("b_max", "2"),
     ["x.yaml: b_max: expected a number, not text (got '2')"]),
    ("deployment", "cost-two-models.yaml", lambda d: d["demands"][0].__setitem__("rate", "6"),
     ["x.yaml: demands[0].rate: expected a number, got '6'"]),
    ("queueing", "two-models-one-a100.yaml", lambda d: d.__setitem__("now_s", -1),
     ["x.yaml: now_s: Input should be greater than or equal to 0 (got -1)"]),
])
def test_numbers_as_text_and_negative_now_are_refused(monkeypatch, capsys, tmp_path, family, file, mutate, needles):
    if file is None:
        data = yaml.safe_load(placement_copy(tmp_path).read_text())
        path = tmp_path / "inst.yaml"
    else:
        data = shipped(family, file, tmp_path)
        path = tmp_path / "x.yaml"
    mutate(data)
    path.write_text(yaml.safe_dump(data))
    code, _, err = run_cli(monkeypatch, capsys, "solve", family, str(path))
    assert_one_line(code, err, *needles)


def test_check_numbers_walks_nested_models_lists_and_mappings():
    from planner.core.io import check_numbers
    from planner.errors import InputError
    from planner.queueing.instance import QueueingSpec

    good = {"slo_classes": {"a": 1.0}, "instance_types": [{"name": "t", "gpu": "A100-80GB-SXM", "swap_time_s": 1, "count": 1}],
            "groups": [], "estimator": {"epsilon": 1.5}}
    check_numbers(QueueingSpec, good, "x.yaml")  # numbers and names: nothing to refuse
    for path, value, field in ((("estimator", "epsilon"), "1.5", "estimator.epsilon"),
                               (("instance_types", 0, "count"), True, "instance_types[0].count"),
                               (("slo_classes", "a"), "1", "slo_classes.a")):
        data = json.loads(json.dumps(good))
        target = data
        for part in path[:-1]:
            target = target[part]
        target[path[-1]] = value
        with pytest.raises(InputError) as raised:
            check_numbers(QueueingSpec, data, "x.yaml")
        assert str(raised.value).startswith(f"x.yaml: {field}: expected a number"), str(raised.value)


# ---- CSV cells with surrounding spaces -----------------------------------------------------------

def test_csv_spaces_around_a_cell_are_stripped_but_inside_a_number_refused(tmp_path):
    from planner.core.io import read_csv_table
    from planner.errors import InputError

    path = tmp_path / "t.csv"
    path.write_text('id,worker\n" r1 "," 12 "\nr2,  7\n')
    table = read_csv_table(path, {"id": str, "worker": int})
    assert list(table["id"]) == ["r1", "r2"] and list(table["worker"]) == [12, 7]
    path.write_text('id,worker\nr1,"1 2"\n')
    with pytest.raises(InputError, match=r"t\.csv: row 1, column worker: not a number: '1 2'"):
        read_csv_table(path, {"id": str, "worker": int})


def test_placement_worker_cell_with_spaces_is_that_worker(tmp_path):
    # " 0 " (quoted, spaces) reads as worker 0: the same plan as writing 0
    path = placement_copy(tmp_path)
    csv = tmp_path / "requests.csv"
    lines = csv.read_text().splitlines()
    lines[0] += ",worker,generated_tokens"
    lines[1] += ',"{w}",3'
    lines[2:] = [line + ",," for line in lines[2:]]
    results = []
    for cell in ("0", " 0 "):
        csv.write_text("\n".join(lines).replace("{w}", cell) + "\n")
        code, out, err = planner("solve", "placement", str(path), "--json", "--time-limit", "20")
        assert code == 0, err
        result = json.loads(out)
        results.append((result["objective"], result["solution"]["assignment"]))
    assert results[0] == results[1]


# ---- deployment: degrees with capacities, a GPU type listed twice --------------------------------

def _cost_plan(tmp_path: Path, degrees: list[int] | None) -> Path:
    # one A100 type, 2 machines × 8 GPUs at $1/GPU-h; 10 req/s of model m.  Given capacities: TP 8 serves
    # 10 req/s (1 instance, $8/h); TP 2 serves 2 req/s (5 instances = 10 GPUs, $10/h).
    data = {"family": "deployment", "name": "degrees",
            "inventory": [{"gpu": "A100-80GB-SXM", "machines": 2, "gpus_per_machine": 8, "price_per_gpu_hour": 1.0}],
            "demands": [{"model": "m", "rate": 10.0, "mean_input": 100, "mean_output": 100}],
            "capacities": [{"model": "m", "gpu": "A100-80GB-SXM", "tensor_parallel": 8, "requests_per_s": 10.0},
                           {"model": "m", "gpu": "A100-80GB-SXM", "tensor_parallel": 2, "requests_per_s": 2.0}]}
    if degrees is not None:
        data["degrees"] = degrees
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_degrees_restrict_given_capacities(tmp_path):
    objectives = {}
    for degrees in (None, [1, 2]):
        code, out, err = planner("solve", "deployment", str(_cost_plan(tmp_path, degrees)), "--json")
        assert code == 0, err
        result = json.loads(out)
        assert result["validation"]["feasible"]
        objectives[str(degrees)] = result["objective"]
        tps = {int(i["option"].rsplit("tp", 1)[1]) for i in result["solution"]["instances"]}
        assert degrees is None or tps <= set(degrees), tps
    assert objectives == {"None": 8.0, "[1, 2]": 10.0}


def test_degrees_that_leave_no_given_capacity_are_one_line(monkeypatch, capsys, tmp_path):
    code, _, err = run_cli(monkeypatch, capsys, "solve", "deployment", str(_cost_plan(tmp_path, [1])), "--json")
    assert_one_line(code, err, "plan.yaml: demands[0].model: m fits nowhere", "TP 2 is not in degrees [1]")


def test_a_gpu_type_listed_twice_in_the_inventory(monkeypatch, capsys, tmp_path):
    data = shipped("deployment", "cost-two-models.yaml", tmp_path)
    data["inventory"].append(dict(data["inventory"][0], machines=1))
    path = tmp_path / "x.yaml"
    path.write_text(yaml.safe_dump(data))
    code, _, err = run_cli(monkeypatch, capsys, "solve", "deployment", str(path))
    assert_one_line(code, err,
                    "x.yaml: inventory[2].gpu: A100-80GB-SXM is listed twice (inventory[0] and inventory[2])")


def test_a_capacity_given_twice(monkeypatch, capsys, tmp_path):
    path = _cost_plan(tmp_path, None)
    data = yaml.safe_load(path.read_text())
    data["capacities"].append(dict(data["capacities"][0], requests_per_s=3.0))
    path.write_text(yaml.safe_dump(data))
    code, _, err = run_cli(monkeypatch, capsys, "solve", "deployment", str(path))
    assert_one_line(code, err, "plan.yaml: capacities[2]: m on A100-80GB-SXM tp8 is given twice")


# ---- names must be text --------------------------------------------------------------------------

@pytest.mark.parametrize("family, file, mutate, needles", [
    ("batching", "tiny3.yaml", lambda d: d.__setitem__("name", []), ["x.yaml: name: expected a name (text), got []"]),
    ("deployment", "clusters/llama2-70b-continuous.yaml", lambda d: d["machines"][1].__setitem__("name", [1, 2]),
     ["x.yaml: machines[1].name: expected a name (text), got [1, 2]"]),
    ("deployment", "cost-two-models.yaml", lambda d: d.__setitem__("name", True),
     ["x.yaml: name: expected a name (text), got true"]),
    ("routing", "llama3-8b-v100-small.yaml", lambda d: d["instances"][0].__setitem__("name", 7),
     ["x.yaml: instances[0].name: expected a name (text), got 7"]),
])
def test_names_that_are_not_text_are_refused(monkeypatch, capsys, tmp_path, family, file, mutate, needles):
    folder = "routing" if family == "routing" else family
    data = shipped(folder, file, tmp_path)
    mutate(data)
    path = tmp_path / "x.yaml"
    path.write_text(yaml.safe_dump(data))
    code, _, err = in_process(monkeypatch, capsys, "solve", family, str(path))
    assert_one_line(code, err, *needles)


# ---- text too long to be a file name, directories that are not -----------------------------------

@pytest.mark.parametrize("key, value, needles", [
    ("workload", "x" * 5000, ["d.yaml: requests.workload: unknown workload distribution a text of 5,000 characters"]),
    ("models_dir", "z" * 5000, ["d.yaml: models_dir:", "cannot be read (File name too long)"]),
    ("models_dir", "/dev/zero", ["d.yaml: models_dir: /dev/zero is not a directory"]),
    ("models_dir", "nope", ["d.yaml: models_dir: directory not found:", "nope"]),
])
def test_routing_names_that_cannot_be_paths(monkeypatch, capsys, tmp_path, key, value, needles):
    data = shipped("routing", "llama3-8b-v100-small.yaml", tmp_path)
    if key == "workload":
        data["requests"]["workload"] = value
    else:
        data[key] = value
    path = tmp_path / "d.yaml"
    path.write_text(yaml.safe_dump(data))
    code, _, err = in_process(monkeypatch, capsys, "solve", "routing", str(path))
    assert_one_line(code, err, *needles)
