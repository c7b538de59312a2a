"""Hard small models for solver tests: what a time limit, node limit or Ctrl-C must stop."""

from __future__ import annotations

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
