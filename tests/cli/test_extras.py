"""Optional extras (`planner[ray]`, `planner[parquet]`): without them the rest works and the option that needs
one says so in one line.  The missing package is simulated by a `None` entry in ``sys.modules`` (what Python
does for a module that cannot be imported), in a real subprocess of the CLI."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from support import REPO

QUERY = ["capacity", "--model", "Llama-2-70B", "--gpu", "H100-80GB-SXM", "--tp", "4", "--rate", "1", "--ttft", "1",
         "--tpot", "0.05", "--price", "H100-80GB-SXM=3.0", "--no-progress"]


def _run_without(modules: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    code = ("import sys\n"
            f"for name in {modules!r}.split(','):\n"
            "    sys.modules[name] = None\n"
            f"sys.argv = ['planner', *{list(args)!r}]\n"
            "from planner.cli.main import main\n"
            "main()\n")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd, timeout=600)


def test_executor_ray_without_ray_is_one_line_naming_the_extra(tmp_path):
    proc = _run_without("ray", *QUERY, "--executor", "ray", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "planner[ray]" in lines[0], proc.stderr
    assert proc.stdout == ""


def test_capacity_report_without_pyarrow_writes_everything_but_parquet_and_says_so(tmp_path):
    report = tmp_path / "report"
    proc = _run_without("pyarrow", *QUERY, "--executor", "serial", "--report", str(report), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    written = {p.name for p in report.iterdir()}
    assert {"report.html", "points.csv", "eq7.csv"} <= written and "points.parquet" not in written, written
    assert "points.parquet not written" in proc.stderr and "planner[parquet]" in proc.stderr


def test_the_test_extra_installs_both_extras():
    text = (REPO / "pyproject.toml").read_text()
    test_line = next(line for line in text.splitlines() if line.startswith("test = "))
    assert "planner[ray,parquet]" in test_line
    for extra in ("ray = [", "parquet = ["):
        assert any(line.startswith(extra) for line in text.splitlines()), extra
