"""A thin block builder for sparse MILPs (not a modeling language).

Formulations add *variable blocks* (named, shaped, with bounds, integrality and
objective cost) and *row blocks* (named constraint families given as COO
triples with row lower/upper bounds).  `ModelBuilder.build` assembles one CSR
matrix, which every backend (HiGHS, Gurobi, CBC) takes as is: one formulation, no
per-solver copies.

Row-block names are the constraint-family names of the formulation; solver
diagnostics (IIS rows, family deletion tests) are reported by family and by
the row's label, e.g. ``kv_capacity[worker=3, breakpoint=17]``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

INF = float("inf")


@dataclass(frozen=True)
class VarBlock:
    """Columns ``start … start+size−1`` holding an array of variables of ``shape`` (C order)."""

    name: str
    start: int
    shape: tuple[int, ...]
    integer: bool

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def columns(self) -> np.ndarray:
        return np.arange(self.start, self.start + self.size)

    def col(self, *index: int | np.ndarray) -> np.ndarray | int:
        """Global column index of ``self[index]`` (vectorised over array indices)."""
        return self.start + np.ravel_multi_index(index, self.shape)

    def values(self, x: np.ndarray) -> np.ndarray:
        return np.asarray(x[self.start : self.start + self.size]).reshape(self.shape)


@dataclass(frozen=True)
class RowBlock:
    """Rows ``start … start+size−1`` of one named constraint family."""

    name: str
    start: int
    size: int
    label: Callable[[int], str] | None = field(default=None, compare=False)

    def describe(self, local_row: int) -> str:
        return self.label(local_row) if self.label else f"{self.name}[{local_row}]"


@dataclass(frozen=True)
class LinearModel:
    """``min/max cᵀx + offset  s.t.  row_lower ≤ A x ≤ row_upper,  col_lower ≤ x ≤ col_upper``."""

    name: str
    sense: str  # "min" or "max"
    cost: np.ndarray
    offset: float
    col_lower: np.ndarray
    col_upper: np.ndarray
    integrality: np.ndarray  # bool per column
    matrix: sp.csr_matrix
    row_lower: np.ndarray
    row_upper: np.ndarray
    var_blocks: tuple[VarBlock, ...]
    row_blocks: tuple[RowBlock, ...]
    objective_is_integral: bool = False

    @property
    def num_cols(self) -> int:
        return int(self.cost.size)

    @property
    def num_rows(self) -> int:
        return int(self.row_lower.size)

    @property
    def num_nonzeros(self) -> int:
        return int(self.matrix.nnz)

    @property
    def num_integer(self) -> int:
        return int(self.integrality.sum())

    def row_family(self, row: int) -> RowBlock:
        starts = np.array([b.start for b in self.row_blocks])
        k = int(np.searchsorted(starts, row, side="right") - 1)
        return self.row_blocks[k]

    def describe_row(self, row: int) -> str:
        blk = self.row_family(row)
        return blk.describe(row - blk.start)

    @property
    def families(self) -> tuple[str, ...]:
        seen: list[str] = []
        for b in self.row_blocks:
            if b.name not in seen:
                seen.append(b.name)
        return tuple(seen)

    def without_families(self, names: Sequence[str]) -> "LinearModel":
        """The same model with every row of the named families removed (for diagnosis)."""
        drop = set(names)
        keep_blocks = [b for b in self.row_blocks if b.name not in drop]
        rows = np.concatenate([np.arange(b.start, b.start + b.size) for b in keep_blocks]) if keep_blocks else np.array([], int)
        new_blocks, start = [], 0
        for b in keep_blocks:
            new_blocks.append(RowBlock(b.name, start, b.size, b.label))
            start += b.size
        return LinearModel(
            name=self.name,
            sense=self.sense,
            cost=self.cost,
            offset=self.offset,
            col_lower=self.col_lower,
            col_upper=self.col_upper,
            integrality=self.integrality,
            matrix=self.matrix[rows] if rows.size else sp.csr_matrix((0, self.num_cols)),
            row_lower=self.row_lower[rows],
            row_upper=self.row_upper[rows],
            var_blocks=self.var_blocks,
            row_blocks=tuple(new_blocks),
            objective_is_integral=self.objective_is_integral,
        )

    def as_feasibility(self) -> "LinearModel":
        """The same constraints with a zero objective."""
        return LinearModel(
            name=self.name,
            sense=self.sense,
            cost=np.zeros_like(self.cost),
            offset=0.0,
            col_lower=self.col_lower,
            col_upper=self.col_upper,
            integrality=self.integrality,
            matrix=self.matrix,
            row_lower=self.row_lower,
            row_upper=self.row_upper,
            var_blocks=self.var_blocks,
            row_blocks=self.row_blocks,
            objective_is_integral=True,
        )

    def row_activity(self, x: np.ndarray) -> np.ndarray:
        return self.matrix @ x

    def max_violation(self, x: np.ndarray) -> float:
        """Largest bound or row violation of ``x`` (0 when feasible)."""
        act = self.row_activity(x)
        viol = [
            np.max(np.maximum(self.row_lower - act, 0.0), initial=0.0),
            np.max(np.maximum(act - self.row_upper, 0.0), initial=0.0),
            np.max(np.maximum(self.col_lower - x, 0.0), initial=0.0),
            np.max(np.maximum(x - self.col_upper, 0.0), initial=0.0),
        ]
        return float(max(viol))

    def stats(self) -> dict[str, int]:
        return {
            "variables": self.num_cols,
            "integer_variables": self.num_integer,
            "constraints": self.num_rows,
            "nonzeros": self.num_nonzeros,
        }


class ModelBuilder:
    """Collects variable and row blocks, then assembles a `LinearModel`."""

    def __init__(self, name: str, sense: str = "min") -> None:
        if sense not in ("min", "max"):
            raise ValueError("sense must be 'min' or 'max'")
        self.name = name
        self.sense = sense
        self._vars: list[VarBlock] = []
        self._lower: list[np.ndarray] = []
        self._upper: list[np.ndarray] = []
        self._cost: list[np.ndarray] = []
        self._rows: list[RowBlock] = []
        self._coo_rows: list[np.ndarray] = []
        self._coo_cols: list[np.ndarray] = []
        self._coo_vals: list[np.ndarray] = []
        self._row_lower: list[np.ndarray] = []
        self._row_upper: list[np.ndarray] = []
        self._num_cols = 0
        self._num_rows = 0
        self.offset = 0.0
        self.objective_is_integral = False

    def add_variables(
        self,
        name: str,
        shape: int | tuple[int, ...],
        *,
        lower: float | np.ndarray = 0.0,
        upper: float | np.ndarray = INF,
        integer: bool = False,
        cost: float | np.ndarray = 0.0,
    ) -> VarBlock:
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        blk = VarBlock(name, self._num_cols, shape, integer)
        n = blk.size
        self._lower.append(np.broadcast_to(np.asarray(lower, float), shape).ravel().copy())
        self._upper.append(np.broadcast_to(np.asarray(upper, float), shape).ravel().copy())
        self._cost.append(np.broadcast_to(np.asarray(cost, float), shape).ravel().copy())
        self._vars.append(blk)
        self._num_cols += n
        return blk

    def add_binaries(self, name: str, shape: int | tuple[int, ...], *, cost: float | np.ndarray = 0.0) -> VarBlock:
        return self.add_variables(name, shape, lower=0.0, upper=1.0, integer=True, cost=cost)

    def add_constraints(
        self,
        name: str,
        num_rows: int,
        rows: np.ndarray,
        cols: np.ndarray,
        vals: np.ndarray,
        *,
        lower: float | np.ndarray = -INF,
        upper: float | np.ndarray = INF,
        label: Callable[[int], str] | None = None,
    ) -> RowBlock:
        """Add ``num_rows`` rows ``lower ≤ Σ vals·x[cols] ≤ upper``; ``rows`` are local (0-based)."""
        rows = np.asarray(rows, dtype=np.int64)
        cols = np.asarray(cols, dtype=np.int64)
        vals = np.asarray(vals, dtype=float)
        if not (rows.shape == cols.shape == vals.shape):
            raise ValueError(f"{name}: rows, cols and vals must have the same shape")
        if rows.size and (rows.min() < 0 or rows.max() >= num_rows):
            raise ValueError(f"{name}: local row index out of range")
        if cols.size and (cols.min() < 0 or cols.max() >= self._num_cols):
            raise ValueError(f"{name}: column index out of range")
        blk = RowBlock(name, self._num_rows, num_rows, label)
        self._rows.append(blk)
        self._coo_rows.append(rows + self._num_rows)
        self._coo_cols.append(cols)
        self._coo_vals.append(vals)
        self._row_lower.append(np.broadcast_to(np.asarray(lower, float), (num_rows,)).copy())
        self._row_upper.append(np.broadcast_to(np.asarray(upper, float), (num_rows,)).copy())
        self._num_rows += num_rows
        return blk

    def build(self) -> LinearModel:
        cat = lambda parts, dtype=float: np.concatenate(parts).astype(dtype) if parts else np.array([], dtype)  # noqa: E731
        integrality = np.concatenate(
            [np.full(b.size, b.integer, dtype=bool) for b in self._vars]
        ) if self._vars else np.array([], bool)
        matrix = sp.csr_matrix(
            (cat(self._coo_vals), (cat(self._coo_rows, np.int64), cat(self._coo_cols, np.int64))),
            shape=(self._num_rows, self._num_cols),
        )
        matrix.sum_duplicates()
        matrix.eliminate_zeros()
        return LinearModel(
            name=self.name,
            sense=self.sense,
            cost=cat(self._cost),
            offset=self.offset,
            col_lower=cat(self._lower),
            col_upper=cat(self._upper),
            integrality=integrality,
            matrix=matrix,
            row_lower=cat(self._row_lower),
            row_upper=cat(self._row_upper),
            var_blocks=tuple(self._vars),
            row_blocks=tuple(self._rows),
            objective_is_integral=self.objective_is_integral,
        )
