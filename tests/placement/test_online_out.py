"""`planner simulate replay --report DIR` writes DIR/requests.csv and DIR/heartbeats.csv: both or neither.
An existing table is refused (without --force) before the replay runs and before anything is written."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest

from support import assert_one_line, run_cli

REPLAY = ("simulate", "replay", "--rate", "1", "--duration", "8")


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


@pytest.mark.parametrize("existing", ["requests", "heartbeats"])
def test_an_existing_table_is_refused_and_nothing_is_written(monkeypatch, capsys, tmp_path, existing):
    (tmp_path / "run").mkdir()
    kept = tmp_path / "run" / f"{existing}.csv"
    kept.write_text("the user's own table\n")
    code, out, err = run_cli(monkeypatch, capsys, *REPLAY, "--report", str(tmp_path / "run"))
    assert_one_line(code, err, f"run/{existing}.csv: already exists; pass --force to overwrite it")
    assert out == ""  # refused before the replay: no result table either
    assert leftovers(tmp_path / "run") == [kept.name]  # the other table was not written (it was, before the fix)
    assert kept.read_text() == "the user's own table\n"


def test_both_tables_are_written_then_refused_then_forced(monkeypatch, capsys, tmp_path):
    folder = tmp_path / "run"
    code, _, err = run_cli(monkeypatch, capsys, *REPLAY, "--report", str(folder))
    assert code == 0, err
    assert leftovers(folder) == ["heartbeats.csv", "requests.csv"]
    first = {name: (folder / name).read_text() for name in leftovers(folder)}
    assert len(pd.read_csv(folder / "requests.csv")) > 0
    code, _, err = run_cli(monkeypatch, capsys, *REPLAY, "--report", str(folder))
    assert_one_line(code, err, "already exists; pass --force to overwrite it")
    assert {name: (folder / name).read_text() for name in leftovers(folder)} == first
    code, _, err = run_cli(monkeypatch, capsys, *REPLAY, "--report", str(folder), "--force")
    assert code == 0, err
    assert {name: (folder / name).read_text() for name in leftovers(folder)} == first  # same seed, same tables


def test_a_table_that_cannot_be_written_leaves_no_other_table_behind(monkeypatch, capsys, tmp_path):
    # Putting the second table in place fails (disk full) after the first one was placed: neither table nor
    # any temporary file may remain, and a user's file named like the old fixed temporary name is untouched.
    (tmp_path / "run").mkdir()
    users = tmp_path / "run" / ".heartbeats.csv.tmp"
    users.mkdir()
    real_link = os.link

    def link(src, dst):  # noqa: ANN001
        if str(dst).endswith("run/heartbeats.csv"):
            raise OSError(28, "No space left on device")
        return real_link(src, dst)

    monkeypatch.setattr(os, "link", link)
    code, _, err = run_cli(monkeypatch, capsys, *REPLAY, "--report", str(tmp_path / "run"))
    assert_one_line(code, err, "--report", "heartbeats.csv: cannot write (No space left on device)")
    assert leftovers(tmp_path / "run") == [users.name]
    assert users.is_dir()


def test_a_report_table_naming_a_directory_is_refused_up_front(monkeypatch, capsys, tmp_path):
    (tmp_path / "run" / "requests.csv").mkdir(parents=True)
    code, out, err = run_cli(monkeypatch, capsys, *REPLAY, "--report", str(tmp_path / "run"), "--force")
    assert_one_line(code, err, "requests.csv: is a directory; give a file name")
    assert out == ""
    assert leftovers(tmp_path / "run") == ["requests.csv"]


def test_a_report_folder_that_is_a_file_is_refused_up_front(monkeypatch, capsys, tmp_path):
    (tmp_path / "run").write_text("a file\n")
    code, out, err = run_cli(monkeypatch, capsys, *REPLAY, "--report", str(tmp_path / "run"))
    assert_one_line(code, err, "--report must be a directory")
    assert out == ""
