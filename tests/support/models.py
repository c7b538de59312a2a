"""Hard small models for solver tests: what a time limit, node limit or Ctrl-C must stop."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np

from planner.solver import ModelBuilder


def market_split(m: int = 4, n: int = 30, seed: int = 0, slack: bool = True):
    """Cornuéjols–Dawande market split: branch and bound cannot finish it in minutes."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 100, size=(m, n))
    b = ModelBuilder("market-split")
    x = b.add_binaries("x", n)
    rows, cols, vals = [np.repeat(np.arange(m), n)], [np.tile(x.columns, m)], [a.ravel()]
    if slack:
        plus, minus = b.add_variables("s_plus", m, cost=1.0), b.add_variables("s_minus", m, cost=1.0)
        rows += [np.arange(m), np.arange(m)]
        cols += [plus.columns, minus.columns]
        vals += [np.ones(m), -np.ones(m)]
    b.add_constraints("split", m, np.concatenate(rows), np.concatenate(cols), np.concatenate(vals),
                      lower=a.sum(axis=1) // 2, upper=a.sum(axis=1) // 2)
    b.objective_is_integral = True
    return b.build()


def interrupt_script(solver: str, ready: bool = False) -> str:
    """A Python program that solves `market_split` with ``solver`` under the CLI's SIGINT handler, for a test to
    interrupt: Ctrl-C must end it with exit code 130 and the one line "interrupted" on stderr.  With ``ready`` it
    prints "ready" once the handler is installed."""
    tests_dir = str(Path(__file__).resolve().parents[1])
    return textwrap.dedent(f"""
        import os, sys
        sys.path.insert(0, {tests_dir!r})
        from planner.core.interrupt import sigint_handler
        from planner.solver import SolveOptions, solve
        from support.models import market_split

        def end():
            sys.stderr.write("interrupted\\n")
            sys.stderr.flush()
            os._exit(130)

        model = market_split()
        try:
            with sigint_handler(on_timeout=end):
                {'print("ready", flush=True)' if ready else 'pass'}
                solve(model, {solver!r}, SolveOptions(time_limit=60))
        except KeyboardInterrupt:
            end()
        sys.exit(0)
    """)
