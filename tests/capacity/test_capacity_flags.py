"""`planner capacity` from flags alone: the same `Scenario` as the equivalent YAML file (same validation,
same fingerprint), the answer as one JSON object, every row's cost-model source, the GPU types / TP
degrees left out named on stderr, and bad input as one line naming the flag (real subprocesses)."""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import yaml
from support import REPO, assert_one_line, run_cli

from planner.capacity.scenario import (
    TP_DEGREES,
    cost_model_label,
    fixed_length_distribution,
    load_scenario,
)
from planner.costmodels.files import cost_model_filename
from planner.errors import PlannerError

#: a hang guard per subprocess, not a speed assertion
HANG_GUARD_S = 300
MODELS = REPO / "models" / "aladdin"

QUERY = ["--model", "Llama-2-70B", "--gpu", "H100-80GB-SXM", "--ttft", "1", "--tpot", "0.05",
         "--price", "H100-80GB-SXM=3"]


def _planner(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "planner", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=HANG_GUARD_S)


def _azure_trace(tmp: Path, count: int = 60) -> Path:
    """A small Azure-format trace: ``count`` requests one second apart, lengths that fit Llama-2-70B."""
    rng = np.random.default_rng(3)
    rows = ["TIMESTAMP,ContextTokens,GeneratedTokens"]
    for k in range(count):
        rows.append(f"2023-11-16 18:{k // 60:02d}:{k % 60:02d}.000000,{int(rng.integers(100, 2000))},"
                    f"{int(rng.integers(10, 400))}")
    path = tmp / "trace.csv"
    path.write_text("\n".join(rows) + "\n")
    return path


class _Captured(PlannerError):
    """Raised by the stand-in sweep: carries the Scenario the CLI built, nothing is solved."""

    def __init__(self, scenario) -> None:  # noqa: ANN001
        super().__init__("captured")
        self.scenario = scenario


def _cli_scenario(monkeypatch, capsys, *args: str):  # noqa: ANN001, ANN202
    """The `Scenario` `planner capacity <args>` hands to the sweep (through the real CLI parsing)."""
    import planner.capacity.run as run_module

    seen = []

    def capture(scenario, *_, **__):  # noqa: ANN001, ANN002, ANN003, ANN202
        seen.append(scenario)
        raise _Captured(scenario)

    monkeypatch.setattr(run_module, "run_capacity", capture)
    code, _, err = run_cli(monkeypatch, capsys, "capacity", *args, "--no-progress")
    assert seen, (code, err)
    return seen[0]


def _yaml(tmp: Path, text: str) -> Path:
    path = tmp / "scenario.yaml"
    path.write_text(text)
    return path


# ---- one code path: the flags and the YAML give the same Scenario ------------------------------------

def test_flags_and_the_equivalent_yaml_give_the_same_scenario(tmp_path, monkeypatch, capsys):
    flags = _cli_scenario(monkeypatch, capsys, *QUERY, "--tp", "2", "--rate", "10", "--rate", "5",
                          "--time-limit", "3", "--seed", "4")
    path = _yaml(tmp_path, "model: Llama-2-70B\nslos: {ttft_s: 1, atgt_s: 0.05}\nrates: [5, 10]\n"
                           "gpus:\n  - {type: H100-80GB-SXM, price_per_hour: 3, tensor_parallel: [2]}\n"
                           "solve: {time_limit_s: 3, seed: 4}\n")
    from_file = load_scenario(path)
    assert flags.fingerprint() == from_file.fingerprint()
    assert flags.rates == (5.0, 10.0) and flags.gpus[0].degrees == (2,) and flags.time_limit_s == 3
    assert flags.percentile == 99 and flags.attainment is None  # the default criterion
    # a changed value changes the fingerprint (the comparison above can fail)
    other = load_scenario(_yaml(tmp_path, path.read_text().replace("seed: 4", "seed: 5")))
    assert other.fingerprint() != flags.fingerprint()


def test_without_tp_every_degree_with_a_cost_model_is_tried(tmp_path, monkeypatch, capsys):
    flags = _cli_scenario(monkeypatch, capsys, "--model", "Llama-2-70B", "--gpu", "H100-80GB-SXM", "--gpu",
                          "A100-80GB-SXM", "--rate", "10", "--ttft", "1", "--tpot", "0.05",
                          "--price", "H100-80GB-SXM=3", "--price", "A100-80GB-SXM=1.8")
    for cand in flags.gpus:
        on_disk = tuple(g for g in TP_DEGREES
                        if (MODELS.parent / cost_model_filename("aladdin", "Llama-2-70B", cand.spec.name, g)).exists())
        assert cand.degrees == on_disk and len(on_disk) >= 2
    text = ("model: Llama-2-70B\nslos: {ttft_s: 1, tpot_s: 0.05}\nrates: [10]\ngpus:\n"
            "  - {type: H100-80GB-SXM, price_per_hour: 3, tensor_parallel: all}\n"
            "  - {type: A100-80GB-SXM, price_per_hour: 1.8, tensor_parallel: all}\n")
    assert load_scenario(_yaml(tmp_path, text)).fingerprint() == flags.fingerprint()


def test_fixed_lengths_criterion_and_tpot_spelling_match_the_yaml(tmp_path, monkeypatch, capsys):
    flags = _cli_scenario(monkeypatch, capsys, *QUERY, "--tp", "4", "--rate", "2",
                          "--isl", "2000", "--osl", "400", "--attainment", "0.9")
    text = ("model: Llama-2-70B\nslos: {ttft_s: 1, tpot_s: 0.05, atgt_s: 0.05}\nrates: [2]\n"
            "criterion: {attainment: 0.9}\nworkload: {isl: 2000, osl: 400}\n"
            "gpus:\n  - {type: H100-80GB-SXM, price_per_hour: 3, tensor_parallel: [4]}\n")
    from_file = load_scenario(_yaml(tmp_path, text))
    assert from_file.fingerprint() == flags.fingerprint()
    assert flags.tpot_s == flags.atgt_s == 0.05
    assert flags.attainment == 0.9 and flags.percentile is None and "90 % of requests" in flags.criterion_label
    inputs, outputs = flags.distribution.sample(500, np.random.default_rng(0), flags.model.max_context_tokens)
    assert set(inputs) == {2000} and set(outputs) == {400}
    assert flags.distribution.mean_input == 2000 and flags.distribution.mean_output == 400
    assert flags.workload_label == "fixed lengths isl=2000, osl=400"
    percentile = load_scenario(_yaml(tmp_path, text.replace("{attainment: 0.9}", "{percentile: 95}")))
    assert percentile.percentile == 95 and percentile.attainment is None
    assert percentile.fingerprint() != flags.fingerprint()


def test_a_trace_window_from_flags_and_yaml(tmp_path, monkeypatch, capsys):
    trace = _azure_trace(tmp_path, count=120)
    flags = _cli_scenario(monkeypatch, capsys, *QUERY, "--tp", "2", "--rate", "2", "--trace", str(trace),
                          "--trace-format", "azure", "--trace-start", "30", "--trace-duration", "60")
    # requests arrive at 0, 1, ..., 119 s: [30, 90) holds 60 of them
    assert flags.trace is not None and flags.trace.requests == 60
    assert (flags.trace.start_s, flags.trace.duration_s, flags.trace.format) == (30, 60, "azure")
    assert flags.workload_label == "trace trace.csv (60 requests, 30–90 s)"
    text = ("model: Llama-2-70B\nslos: {ttft_s: 1, atgt_s: 0.05}\nrates: [2]\n"
            f"workload: {{trace: {trace}, format: azure, start_s: 30, duration_s: 60}}\n"
            "gpus:\n  - {type: H100-80GB-SXM, price_per_hour: 3, tensor_parallel: [2]}\n")
    assert load_scenario(_yaml(tmp_path, text)).fingerprint() == flags.fingerprint()
    whole = load_scenario(_yaml(tmp_path, text.replace(", start_s: 30, duration_s: 60", "")))
    assert whole.trace.requests == 120 and whole.fingerprint() != flags.fingerprint()


# ---- cost-model sources ------------------------------------------------------------------------------

def test_every_shipped_aladdin_model_gets_a_known_source_label():
    labels = {}
    for path in sorted(MODELS.glob("*.yaml")):
        provenance = yaml.safe_load(path.read_text()).get("provenance", "")
        labels[path.name] = cost_model_label(provenance)
        if provenance.upper().startswith("DERIVED"):  # names the measured model it came from
            assert labels[path.name] == "derived (not measured)", path.name
        elif "splitwise" in provenance.lower():
            assert labels[path.name] == "measured end-to-end (Splitwise)", path.name
        elif "vidur" in provenance.lower():
            assert labels[path.name] == "kernel composition (Vidur)", path.name
    assert labels and not [n for n, lab in labels.items() if lab.startswith(("other", "unknown"))], labels
    # a derived model names the measured one it came from: "derived" wins over "Vidur" in its text
    derived = "DERIVED, NOT MEASURED: llama-3-8b__a100-80gb-sxm__tp1.yaml (Vidur composition, A100) with prefill x 2.5"
    assert cost_model_label(derived) == "derived (not measured)"
    for path in sorted((REPO / "models").glob("*/*.yaml")):
        provenance = str(yaml.safe_load(path.read_text()).get("provenance", ""))
        if provenance.upper().startswith("DERIVED"):
            assert cost_model_label(provenance) == "derived (not measured)", path
    assert cost_model_label("") == "unknown (no provenance in the file)"
    assert cost_model_label("published coefficients of Huang et al.") == "published coefficients"


def test_cost_model_source_reads_the_file_and_its_held_out_error(tmp_path):
    scenario = load_scenario(REPO / "instances" / "capacity" / "llama2-70b-sharegpt-a100-h100.yaml")
    src = scenario.cost_model_source("H100-80GB-SXM", 2)
    data = yaml.safe_load(Path(src.path).read_text())
    assert Path(src.path).name == "llama-2-70b__h100-80gb-sxm__tp2.yaml"
    assert src.provenance == data["provenance"]
    assert src.holdout_mape == {k: v["holdout_mape"] for k, v in data["fit"]["phases"].items()}
    # the error the file states against the measured rows comes first, with its form's cross-validation
    measured = data["measured_rows"]["phases"]
    assert src.measured_basis == "measured rows"
    assert src.measured_mape == {k: v["mape"] for k, v in measured.items()}
    assert src.holdout_text().startswith(f"error vs measured rows: prefill {measured['prefill']['mape']:.1f} % "
                                         f"(CV {measured['prefill']['cv_mape']:.1f} %)")
    assert src.caveat_codes() == [c["code"] for c in data.get("caveats") or []]
    assert scenario.cost_model_source("H100-80GB-SXM", 3) is None
    # a model file without the measured-rows section: the fit's held-out error, named as such
    bare = tmp_path / "models" / "aladdin"
    bare.mkdir(parents=True)
    data.pop("measured_rows")
    data.pop("caveats", None)
    (bare / Path(src.path).name).write_text(yaml.safe_dump(data))
    mine = load_scenario(_yaml(tmp_path, "model: Llama-2-70B\nslos: {ttft_s: 1, atgt_s: 0.05}\nrates: [2]\n"
                                         "gpus:\n  - {type: H100-80GB-SXM, price_per_hour: 3, tensor_parallel: [2]}\n"
                                         f"cost_models_dir: {tmp_path / 'models'}\n"))
    text = mine.cost_model_source("H100-80GB-SXM", 2).holdout_text()
    assert text.startswith("held-out error vs its profiling rows: ") and "prefill" in text
    # and without a fit summary either: "not measured"
    data.pop("fit")
    (bare / Path(src.path).name).write_text(yaml.safe_dump(data))
    assert mine.cost_model_source("H100-80GB-SXM", 2).holdout_text().startswith("error not measured")


# ---- the answer --------------------------------------------------------------------------------------

def test_flags_only_query_json_names_cost_models_and_what_was_left_out(tmp_path):
    proc = _planner("capacity", *QUERY, "--tp", "1", "--tp", "2", "--rate", "2", "--time-limit", "2",
                    "--parallel", "1", "--no-progress", "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)  # stdout is exactly one JSON object
    assert data["scenario"] == "planner capacity flags" and data["status"] in ("optimal", "feasible")
    (point,) = data["points"]
    assert (point["gpu"], point["tensor_parallel"], point["rate"]) == ("H100-80GB-SXM", 2, 2.0)
    assert point["cost_model"] == "measured end-to-end (Splitwise)"
    assert point["cost_model_path"].endswith("llama-2-70b__h100-80gb-sxm__tp2.yaml")
    assert point["usd_per_hour"] == pytest.approx(point["gpus"] * 3.0)
    assert data["criterion"]["percentile"] == 99 and data["outputs"] == {}
    (cost,) = data["cost_models"]
    assert cost["holdout"].startswith("error vs measured rows: prefill") and cost["measured_mape"]["decode"] > 0
    assert "above_target" in [c.split(":")[0] for c in cost["caveats"]]  # Splitwise prefill misses 5 %
    # TP 1: Llama-2-70B's 138 GB of weights do not fit one 80 GB GPU — named on stderr and in the JSON
    assert [(e["gpu"], e["tensor_parallel"]) for e in data["not_planned"]] == [("H100-80GB-SXM", 1)]
    assert "not planned: H100-80GB-SXM TP 1: weights" in proc.stderr
    assert "Traceback" not in proc.stderr and not list(tmp_path.iterdir())  # nothing written without --out


def test_a_gpu_type_that_cannot_be_planned_is_named_on_stderr_from_yaml(tmp_path, monkeypatch, capsys):
    # A100 TP 2 cannot decode one token in 50 ms (un-batched iteration ≈ 56 ms); H100 TP 2 can.
    path = _yaml(tmp_path, "model: Llama-2-70B\nslos: {ttft_s: 1, tpot_s: 0.05}\nrates: [2]\ngpus:\n"
                           "  - {type: A100-80GB-SXM, price_per_hour: 1.8, tensor_parallel: [2]}\n"
                           "  - {type: H100-80GB-SXM, price_per_hour: 3, tensor_parallel: [2]}\n"
                           "solve: {time_limit_s: 2, exact_max_requests: 100}\n")
    code, out, err = run_cli(monkeypatch, capsys, "capacity", str(path), "--executor", "serial", "--no-progress")
    assert code == 0, err
    lines = [line for line in err.splitlines() if line.startswith("not planned:")]
    assert len(lines) == 1 and "A100-80GB-SXM (no TP degree can serve it): TP 2: ATGT SLO 0.05 s" in lines[0]
    assert "H100-80GB-SXM" in out and "measured end-to-end (Splitwise)" in out
    assert "cost model H100-80GB-SXM TP 2:" in out and "error vs measured rows: prefill" in out
    assert "caveats: " in out and "above_target" in out


# ---- bad input: one line naming the flag, never a traceback -------------------------------------------

def _without(args: list[str], *flags: str) -> list[str]:
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
            continue
        if a in flags:
            skip = True
            continue
        out.append(a)
    return out


BAD_FLAGS: dict[str, tuple] = {  # (arguments, needles in the one stderr line)
    "rate zero": ([*QUERY, "--rate", "0"], "--rate: arrival rates must be positive, got 0"),
    "rate negative": ([*QUERY, "--rate", "-1"], "--rate: arrival rates must be positive, got -1"),
    "percentile 100": ([*QUERY, "--rate", "1", "--percentile", "100"], "--percentile: must be strictly between 0 and 100"),
    "percentile 0": ([*QUERY, "--rate", "1", "--percentile", "0"], "--percentile: must be strictly between 0 and 100"),
    "attainment 0": ([*QUERY, "--rate", "1", "--attainment", "0"], "--attainment: must be in (0, 1]"),
    "attainment 1.5": ([*QUERY, "--rate", "1", "--attainment", "1.5"], "--attainment: must be in (0, 1]"),
    "percentile and attainment": ([*QUERY, "--rate", "1", "--percentile", "90", "--attainment", "0.9"],
                                  "give --percentile or --attainment, not both"),
    "ttft zero": ([*_without(QUERY, "--ttft"), "--ttft", "0", "--rate", "1"], "--ttft: Input should be greater than 0"),
    "tpot negative": ([*_without(QUERY, "--tpot"), "--tpot", "-0.05", "--rate", "1"],
                      "--tpot: Input should be greater than 0"),
    "no cost model for the model": ([*_without(QUERY, "--model"), "--model", "Mistral-7B-v0.1", "--rate", "1"],
                                    "--model: no Aladdin cost model for Mistral-7B-v0.1"),
    "no cost model for the gpu": (["--model", "Llama-2-70B", "--gpu", "A10-24GB", "--price", "A10-24GB=1",
                                   "--ttft", "1", "--tpot", "0.05", "--rate", "1"],
                                  "--gpu: no Aladdin cost model for Llama-2-70B on A10-24GB"),
    "price for a gpu not asked for": ([*QUERY, "--price", "A100-80GB-SXM=2", "--rate", "1"],
                                      "--price: 'A100-80GB-SXM=2' prices a GPU not asked for"),
    "no price": ([*_without(QUERY, "--price"), "--rate", "1"], "--price: required: the catalog has no price"),
    "alias gpu": (["--model", "Llama-2-70B", "--gpu", "A100-80GB", "--price", "A100-80GB=2", "--ttft", "1",
                   "--tpot", "0.05", "--rate", "1"], "did you mean one of A100-80GB-PCIe, A100-80GB-SXM?"),
    "alias model": ([*_without(QUERY, "--model"), "--model", "llama2-70b", "--rate", "1"],
                    "--model: unknown model 'llama2-70b'; did you mean Llama-2-70B?"),
    "unknown model": ([*_without(QUERY, "--model"), "--model", "GPT-9", "--rate", "1"], "--model: unknown model 'GPT-9'"),
    "unknown gpu": (["--model", "Llama-2-70B", "--gpu", "B999", "--ttft", "1", "--tpot", "0.05", "--rate", "1"],
                    "--gpu: unknown GPU type 'B999'"),
    "isl without osl": ([*QUERY, "--rate", "1", "--isl", "400"], "--osl: required option is missing"),
    "isl + osl beyond the context": ([*QUERY, "--rate", "1", "--isl", "4000", "--osl", "400"],
                                     "exceeds the model's context of 4096 tokens"),
    "empty trace window": ([*QUERY, "--rate", "1", "--trace", "TRACE", "--trace-start", "5000"],
                           "--trace-start: no requests in the window [5000, inf) s of trace.csv"),
    "no rate": (QUERY, "--rate: required option is missing"),
    "file and flags": (["instances/capacity/llama2-70b-sharegpt-a100-h100.yaml", "--rate", "3"],
                       "--rate: give a scenario file or the query flags, not both"),
    # A100 TP 2: the un-batched decode iteration (≈ 56 ms) already exceeds a 50 ms TPOT: nothing to plan
    "nothing can be planned": (["--model", "Llama-2-70B", "--gpu", "A100-80GB-SXM", "--price", "A100-80GB-SXM=2",
                                "--ttft", "1", "--tpot", "0.05", "--tp", "2", "--rate", "1"],
                               "error: --gpu: ", "A100-80GB-SXM TP 2"),
}


#: Cases also run as real subprocesses (what a user sees, stdout and stderr of the whole process); the
#: others run in-process through the same `main` (fast; nothing native runs before these refusals).
SUBPROCESS_CASES = ("rate zero", "alias gpu", "empty trace window", "file and flags", "nothing can be planned")


@pytest.fixture(scope="module")
def trace_file(tmp_path_factory):
    return _azure_trace(tmp_path_factory.mktemp("trace"))


@pytest.fixture(scope="module")
def bad_flag_runs(trace_file):
    """The `SUBPROCESS_CASES` as real subprocesses, two at a time (each only reads its input)."""

    def run(args: list[str]) -> subprocess.CompletedProcess:
        return _planner("capacity", *[str(trace_file) if a == "TRACE" else a for a in args], "--no-progress")

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip(SUBPROCESS_CASES, pool.map(run, [BAD_FLAGS[c][0] for c in SUBPROCESS_CASES])))


@pytest.mark.parametrize("case", SUBPROCESS_CASES)
def test_bad_flags_are_one_line_in_a_real_process(bad_flag_runs, case):
    proc = bad_flag_runs[case]
    assert proc.stdout == ""
    assert_one_line(proc.returncode, proc.stderr, *BAD_FLAGS[case][1:])


@pytest.mark.parametrize("case", list(BAD_FLAGS))
def test_bad_flags_are_one_line(trace_file, monkeypatch, capsys, case):
    args = [str(trace_file) if a == "TRACE" else a for a in BAD_FLAGS[case][0]]
    code, stdout, err = run_cli(monkeypatch, capsys, "capacity", *args, "--no-progress")
    assert stdout == ""
    assert_one_line(code, err, *BAD_FLAGS[case][1:])


@pytest.mark.parametrize(("slos", "message"), [
    ("{ttft_s: 1, tpot_s: 0.05, atgt_s: 0.06}", "slos.tpot_s: 0.05 s differs from atgt_s 0.06 s"),
    ("{ttft_s: 1}", "slos.atgt_s: required field is missing (give tpot_s or atgt_s"),
    ("{ttft_s: 1, tpot_s: 0}", "slos.tpot_s: Input should be greater than 0"),
])
def test_tpot_in_yaml_is_one_line_when_wrong(tmp_path, monkeypatch, capsys, slos, message):
    path = _yaml(tmp_path, f"model: Llama-2-70B\nslos: {slos}\nrates: [1]\n"
                           "gpus:\n  - {type: H100-80GB-SXM, price_per_hour: 3, tensor_parallel: [2]}\n")
    code, _, err = run_cli(monkeypatch, capsys, "capacity", str(path), "--no-progress")
    assert_one_line(code, err, f"{path}: {message}")


@pytest.mark.parametrize(("edit", "message"), [
    (("rates: [1]", "rates: [1]\ncriterion: {percentile: 100}"), "criterion.percentile: must be strictly between 0 and 100"),
    (("rates: [1]", "rates: [1]\ncriterion: {percentile: 99, attainment: 0.9}"), "criterion: give percentile or attainment"),
    (("type: H100-80GB-SXM", "type: H100"), "gpus[0].type: unknown GPU type 'H100'; did you mean one of"),
    (("rates: [1]", "rates: [1]\nworkload: {trace: TRACE, duration_s: 0.5, start_s: 200}"),
     "workload.start_s: no requests in the window [200, 200.5) s"),
    (("rates: [1]", "rates: [1]\nworkload: {distribution: sharegpt, start_s: 3}"), "workload.start_s: applies to a trace only"),
    (("tensor_parallel: [2]", "tensor_parallel: most"), "gpus[0].tensor_parallel: must be a list of TP degrees, 'best' or 'all'"),
])
def test_bad_yaml_fields_are_one_line(tmp_path, monkeypatch, capsys, edit, message):
    trace = _azure_trace(tmp_path)
    text = ("model: Llama-2-70B\nslos: {ttft_s: 1, tpot_s: 0.05}\nrates: [1]\n"
            "gpus:\n  - {type: H100-80GB-SXM, price_per_hour: 3, tensor_parallel: [2]}\n")
    assert edit[0] in text
    path = _yaml(tmp_path, text.replace(*edit).replace("TRACE", str(trace)))
    code, _, err = run_cli(monkeypatch, capsys, "capacity", str(path), "--no-progress")
    assert_one_line(code, err, f"{path}: {message}")


def test_fixed_length_distribution_is_degenerate():
    dist = fixed_length_distribution(123, 45)
    inputs, outputs = dist.sample(200, np.random.default_rng(1))
    assert set(inputs) == {123} and set(outputs) == {45}
    assert dist.predict_output(123)[0] == 45 and dist.max_total_tokens == 168


def test_bucket_flags_and_the_classes_section_give_the_same_scenario(tmp_path, monkeypatch, capsys):
    flags = _cli_scenario(monkeypatch, capsys, *QUERY, "--tp", "2", "--rate", "4", "--bucket", "input=512,2048",
                          "--bucket", "output=128")
    text = ("model: Llama-2-70B\nslos: {ttft_s: 1, atgt_s: 0.05}\nrates: [4]\n"
            "gpus:\n  - {type: H100-80GB-SXM, price_per_hour: 3, tensor_parallel: [2]}\n")
    from_file = load_scenario(_yaml(tmp_path, text + "classes: {input: [512, 2048], output: [128]}\n"))
    assert flags.class_input_edges == (512, 2048) and flags.class_output_edges == (128,) and flags.has_classes
    assert flags.classes_fingerprint() == from_file.classes_fingerprint()
    # the classes do not change a point: the points' database is shared with the same scenario without them
    plain = load_scenario(_yaml(tmp_path, text))
    assert not plain.has_classes and plain.fingerprint() == flags.fingerprint()
    assert plain.classes_fingerprint() != flags.classes_fingerprint()
