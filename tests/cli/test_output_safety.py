"""Output files: every --out / --out-dir / OUTPUT is checked before anything is solved, nothing is
overwritten without --force, temporary files have private names, and writes are all-or-nothing
(`planner.core.outputs`)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from support import REPO, assert_one_line, run_cli

from planner.core import outputs
from planner.errors import PlannerError

INST = REPO / "instances"


def _refuse(target: str):
    def solver(*args, **kwargs):  # noqa: ANN002, ANN003
        raise AssertionError(f"{target} ran before the output was checked")

    return solver


#: (command line with OUT for the output path, the function that would solve, patched to fail if reached)
COMMANDS = [
    (["solve", "placement", str(INST / "placement/sharegpt-70b-a100-n40.yaml"), "--out", "OUT"],
     "planner.placement.pipeline.solve_placement"),
    (["compare", "placement", str(INST / "placement/sharegpt-70b-a100-n40.yaml"), "--out", "OUT"], "planner.compare.compare"),
    (["simulate", "batching", str(INST / "batching/tiny3.yaml"), "--out", "OUT"], "planner.batching.pipeline.run_scheduler"),
    (["solve", "batching", str(INST / "batching/tiny3.yaml"), "--out", "OUT"], "planner.batching.pipeline.solve_batching"),
    (["compare", "batching", str(INST / "batching/tiny3.yaml"), "--out", "OUT"], "planner.compare.compare"),
    (["solve", "priority", str(INST / "priority/fig3_toy.yaml"), "--out", "OUT"], "planner.priority.pipeline.run_method"),
    (["compare", "priority", str(INST / "priority/fig3_toy.yaml"), "--out", "OUT"], "planner.compare.compare"),
    (["solve", "queueing", str(INST / "queueing/two-models-one-a100.yaml"), "--out", "OUT"],
     "planner.queueing.pipeline.solve_queueing"),
    (["compare", "queueing", str(INST / "queueing/two-models-one-a100.yaml"), "--out", "OUT"], "planner.compare.compare"),
    (["solve", "deployment", str(INST / "deployment/cost-two-models.yaml"), "--out", "OUT"],
     "planner.deployment.cost_solve.solve_cost_plan"),
    (["solve", "deployment", str(INST / "deployment/cost-two-models.yaml"), "--max-load", "--out", "OUT"],
     "planner.deployment.cost_solve.max_servable_load"),
    (["solve", "routing", str(INST / "routing/llama3-8b-v100-small.yaml"), "--out", "OUT"],
     "planner.deployment.routing_solve.solve_routing"),
    (["compare", "routing", str(INST / "routing/llama3-8b-v100-small.yaml"), "--out", "OUT"], "planner.compare.compare"),
    (["generate", "placement", "OUT"], "planner.placement.generator.generate_placement_problem"),
    (["generate", "priority", "OUT"], "planner.priority.generator.generate_priority_problem"),
    (["workload", "derive", str(REPO / "README.md"), "OUT", "--trace-format", "sharegpt", "--name", "x"],
     "planner.workloads.lengths.read_trace_lengths"),
]
IDS = [" ".join(a[:2]) for a, _ in COMMANDS]


def _run(monkeypatch, capsys, args: list[str], target: str, out: Path, *extra: str):
    module, name = target.rsplit(".", 1)
    monkeypatch.setattr(__import__(module, fromlist=[name]), name, _refuse(target))
    return run_cli(monkeypatch, capsys, *[str(out) if a == "OUT" else a for a in args], *extra)


@pytest.mark.parametrize("args,target", COMMANDS, ids=IDS)
def test_an_existing_output_is_refused_before_solving_and_kept(monkeypatch, capsys, tmp_path, args, target):
    out = tmp_path / "result.json"
    out.write_text("the user's file")
    code, stdout, err = _run(monkeypatch, capsys, args, target, out)
    assert_one_line(code, err, "result.json: already exists; pass --force to overwrite it")
    assert stdout == "" and out.read_text() == "the user's file"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["result.json"]


@pytest.mark.parametrize("args,target", COMMANDS, ids=IDS)
def test_an_output_under_a_file_is_refused_before_solving(monkeypatch, capsys, tmp_path, args, target):
    (tmp_path / "afile").write_text("x")
    code, stdout, err = _run(monkeypatch, capsys, args, target, tmp_path / "afile" / "sub" / "r.json", "--force")
    assert_one_line(code, err, "afile is not a directory")
    assert stdout == "" and (tmp_path / "afile").read_text() == "x"


@pytest.mark.parametrize("args,target", COMMANDS, ids=IDS)
def test_an_output_where_nothing_can_be_written_is_refused_before_solving(monkeypatch, capsys, args, target):
    # /proc: os.access says "writable" to root, creating a file there fails: the check probes for real
    code, stdout, err = _run(monkeypatch, capsys, args, target, Path("/proc/planner-no-such-dir/r.json"))
    assert_one_line(code, err, "cannot write in /proc")
    assert stdout == ""


@pytest.mark.parametrize("args,target", [c for c in COMMANDS if c[0][0] != "generate"],
                         ids=[i for i, c in zip(IDS, COMMANDS) if c[0][0] != "generate"])
def test_an_output_that_is_a_directory_is_refused_before_solving(monkeypatch, capsys, tmp_path, args, target):
    code, stdout, err = _run(monkeypatch, capsys, args, target, tmp_path, "--force")
    assert_one_line(code, err, "is a directory")
    assert stdout == ""


def test_replay_checks_both_tables_before_replaying(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(__import__("planner.placement.online", fromlist=["replay"]), "replay",
                        _refuse("planner.placement.online.replay"))
    code, _, err = run_cli(monkeypatch, capsys, "simulate", "replay", "--rate", "1", "--duration", "8", "--report",
                           "/proc/planner-no-such-dir/run")
    assert_one_line(code, err, "cannot write in /proc")


def test_fit_out_dir_is_checked_before_fitting(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(__import__("planner.costmodels.fitting", fromlist=["fit_groups"]), "fit_groups",
                        _refuse("planner.costmodels.fitting.fit_groups"))
    code, _, err = run_cli(monkeypatch, capsys, "fit", str(REPO / "README.md"), "--source-format", "table",
                           "--out-dir", "/proc/planner-no-such-dir/models")
    assert_one_line(code, err, "--out-dir", "cannot write in /proc")


def test_a_users_fixed_name_temporary_file_is_never_touched(monkeypatch, capsys, tmp_path):
    # a fixed temporary name (".NAME.tmp") would overwrite a user's file of that name and rename it away
    users = tmp_path / ".result.json.tmp"
    users.write_text("mine")
    out = tmp_path / "result.json"
    code, _, err = run_cli(monkeypatch, capsys, "simulate", "batching", str(INST / "batching/tiny3.yaml"), "--out",
                           str(out))
    assert code == 0, err
    assert users.read_text() == "mine" and '"objective"' in out.read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == [".result.json.tmp", "result.json"]


# ---- the writer itself ---------------------------------------------------------------------------


def test_write_file_refuses_a_target_that_appeared_after_the_check(tmp_path):
    target = tmp_path / "r.json"
    outputs.check_output_file(target, force=False)  # passes: nothing there yet
    target.write_text("appeared meanwhile")  # e.g. a second run finished first
    with pytest.raises(PlannerError, match="already exists; pass --force"):
        outputs.write_file(target, "new", force=False)
    assert target.read_text() == "appeared meanwhile"
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]  # no temporary file left
    outputs.write_file(target, "new", force=True)
    assert target.read_text() == "new"


def test_write_files_is_all_or_nothing(tmp_path, monkeypatch):
    first, second = tmp_path / "a.csv", tmp_path / "b.csv"
    real_link = os.link

    def link(src, dst):  # noqa: ANN001
        if Path(dst) == second:
            raise OSError(28, "No space left on device")
        return real_link(src, dst)

    monkeypatch.setattr(os, "link", link)
    with pytest.raises(PlannerError, match=r"--out .*b\.csv: cannot write \(No space left on device\)"):
        outputs.write_files([(first, "1"), (second, "2")], force=False)
    assert list(tmp_path.iterdir()) == []  # the first table was removed again, no temporary file left


def test_an_interrupted_write_leaves_neither_target_nor_temporary_file(tmp_path, monkeypatch):
    real_fdopen = os.fdopen

    class Interrupting:
        def __init__(self, fh):  # noqa: ANN001
            self.fh = fh

        def __enter__(self):
            return self

        def __exit__(self, *exc):  # noqa: ANN002
            self.fh.close()

        def write(self, data):  # noqa: ANN001
            self.fh.write(data[: len(data) // 2])
            raise KeyboardInterrupt

    monkeypatch.setattr(os, "fdopen", lambda fd, mode: Interrupting(real_fdopen(fd, mode)))
    with pytest.raises(KeyboardInterrupt):
        outputs.write_file(tmp_path / "r.json", "x" * 1000, force=False)
    assert list(tmp_path.iterdir()) == []


def test_written_files_get_the_mode_a_plain_open_gives(tmp_path):
    old = os.umask(0o027)
    try:
        outputs.write_file(tmp_path / "r.json", "x", force=False)
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "r.json").stat().st_mode) == 0o640
