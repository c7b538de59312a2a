"""Reading a `planner.solver.LinearModel` by names, for the tests that check each ``define_*`` against its
equation: the rows of a named family, rows written by hand as ``{(variable block, index…): coefficient}``,
points written the same way, and whether a point satisfies a family."""

from __future__ import annotations

import numpy as np

from planner.solver import LinearModel


def family(model: LinearModel, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(dense rows, row lower, row upper) of every row block called ``name`` (in model order)."""
    blocks = [b for b in model.row_blocks if b.name == name]
    assert blocks, f"no row block {name!r} in {model.families}"
    idx = np.concatenate([np.arange(b.start, b.start + b.size) for b in blocks])
    return model.matrix[idx].toarray(), model.row_lower[idx], model.row_upper[idx]


def rows_of(model: LinearModel, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`family` of a name that must be exactly one row block."""
    found = [b.name for b in model.row_blocks if b.name == name]
    assert len(found) == 1, f"expected one row block {name!r}, got {[b.name for b in model.row_blocks]}"
    return family(model, name)


def dense(model: LinearModel, rows: list[dict[tuple, float]]) -> np.ndarray:
    """Rows written as {(variable block, index…): coefficient} → a dense matrix over the model's columns."""
    blocks = {b.name: b for b in model.var_blocks}
    out = np.zeros((len(rows), model.num_cols))
    for r, terms in enumerate(rows):
        for (name, *index), coef in terms.items():
            out[r, blocks[name].col(*index)] += coef
    return out


def assert_rows(model: LinearModel, name: str, rows: list[dict[tuple, float]], lower, upper) -> None:
    """The one row block ``name`` is exactly ``rows`` with bounds ``lower``/``upper`` (scalars broadcast)."""
    got, lo, up = rows_of(model, name)
    np.testing.assert_allclose(got, dense(model, rows), err_msg=name)
    np.testing.assert_allclose(lo, np.broadcast_to(np.asarray(lower, float), lo.shape), err_msg=f"{name} lower")
    np.testing.assert_allclose(up, np.broadcast_to(np.asarray(upper, float), up.shape), err_msg=f"{name} upper")


def point(model: LinearModel, values: dict[tuple, float]) -> np.ndarray:
    """A column vector from {(variable block, index…): value}; unlisted columns are 0."""
    blocks = {b.name: b for b in model.var_blocks}
    x = np.zeros(model.num_cols)
    for (name, *index), value in values.items():
        x[blocks[name].col(*index)] = value
    return x


def holds(model: LinearModel, name: str, values: dict[tuple, float], tol: float = 1e-9) -> bool:
    """Every row of block ``name`` holds at the point (unlisted variables are 0)."""
    a, lo, up = rows_of(model, name)
    act = a @ point(model, values)
    return bool(np.all(act >= lo - tol) and np.all(act <= up + tol))


def violation(model: LinearModel, name: str, x: np.ndarray) -> float:
    """The largest violation of the rows called ``name`` at ``x`` (0 when they all hold)."""
    a, lo, hi = family(model, name)
    act = a @ x
    return float(max(np.max(lo - act, initial=0.0), np.max(act - hi, initial=0.0)))


def column_upper(model: LinearModel, name: str) -> np.ndarray:
    """The upper bounds of variable block ``name``, in its shape."""
    blk = next(b for b in model.var_blocks if b.name == name)
    return model.col_upper[blk.start:blk.start + blk.size].reshape(blk.shape)
