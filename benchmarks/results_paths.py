"""Where benchmark scripts write their tables: never a committed file unless asked.

``benchmarks/results/*.md`` and ``benchmarks/RESULTS.md`` are committed (the README quotes them);
an ordinary run writes to ``benchmarks/_runs/`` (git-ignored) instead, so running a benchmark
leaves the checkout clean.  ``--update-results`` writes the committed file (a full run only:
a ``--quick`` run never replaces full results); ``--out FILE`` writes exactly where asked.

Benchmarks run as scripts, so this module is imported from the scripts' own folder, like
``machine_info``: ``from results_paths import add_output_options, output_path``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent
#: Committed results (written only with --update-results).
RESULTS = BENCH / "results"
#: Every other run (git-ignored).
RUNS = BENCH / "_runs"


def add_output_options(parser: argparse.ArgumentParser, stem: str) -> None:
    """``--out FILE`` and ``--update-results`` for a script whose table is ``<stem>.md``."""
    parser.add_argument("--out", type=Path, default=None,
                        help=f"markdown file to write (default: benchmarks/_runs/{stem}.md, git-ignored; "
                             f"with --update-results: the committed benchmarks/results/{stem}.md)")
    parser.add_argument("--update-results", action="store_true",
                        help=f"write the committed benchmarks/results/{stem}.md (full runs only)")


def output_path(parser: argparse.ArgumentParser, args: argparse.Namespace, stem: str) -> Path:
    """The file to write: ``--out``, else the committed file with ``--update-results``, else ``_runs/``."""
    if args.update_results and getattr(args, "quick", False):
        parser.error("--update-results takes a full run: a --quick run never replaces the committed results")
    if args.update_results and args.out is not None:
        parser.error("give --out or --update-results, not both")
    if args.out is not None:
        return Path(args.out)
    return (RESULTS if args.update_results else RUNS) / f"{stem}.md"


def command_args() -> str:
    """The command-line arguments that change the table (not where it is written), each after a space."""
    args, skip = [], False
    for a in sys.argv[1:]:
        if skip:
            skip = False
        elif a == "--update-results":
            continue
        elif a == "--out":
            skip = True
        elif not a.startswith("--out="):
            args.append(a)
    return "".join(f" {a}" for a in args)
