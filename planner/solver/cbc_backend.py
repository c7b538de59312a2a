"""CBC backend: the same `LinearModel`, written as an MPS file and solved by the CBC binary PuLP ships.

PuLP is not the modelling layer here: the model's CSR matrix is written straight to a fixed-layout
MPS file (`write_mps`, numbers with 17 significant digits, so every coefficient and bound reaches
CBC as the same double), and the CBC 2.10 executable bundled with PuLP (``PULP_CBC_CMD.pulp_cbc_path``;
a ``cbc`` on PATH when PuLP is absent) runs as a subprocess in a temporary directory that is removed
afterwards.

Reading choices.
* Sense: a maximisation is written as ``min −cᵀx`` and the objective and bound are negated back; the
  objective offset is added here, so ``objective = cᵀx + offset`` for the returned ``x`` (the same
  quantity HiGHS and Gurobi report).  When CBC's own objective (printed with 8 decimals) differs from
  it by more than 1e-6 relative, the outcome says so and is not reported optimal.
* The column values come from CBC's binary solution file (``saveSolution``: exact doubles); the
  status from the first line of its text solution file ("Optimal", "Infeasible", "Integer
  infeasible", "Unbounded", "Stopped on time/nodes/… - objective value v" with an incumbent,
  "Stopped … (no integer solution - continuous used)" without one).  "Unbounded" on a MIP is CBC's
  verdict on the linear relaxation (said in the message).
* Best bound: PuLP's API does not return it; it is read from CBC's log.  A completed search proves
  its incumbent optimal (bound = objective).  Otherwise CBC prints the bound rounded — the summary's
  "Lower bound:" with 3 decimals, "best possible" with 6 significant digits: the more precise of the
  two is taken and lowered by half a unit in its last place, so the reported bound is never better
  than CBC's (`_parse_bound`), and never better than the incumbent.  A stopped LP has no bound.
* A returned point is checked against the model's rows, bounds and integrality (tolerance 1e-6
  relative to the largest value); a point that fails is not reported as a solution.
* Bounds of magnitude ≥ 1e20 are infinite (as for HiGHS).  Free rows constrain nothing and are not
  written; a row or column whose lower bound exceeds its upper bound is reported INFEASIBLE without
  running CBC.
* Options: ``time_limit`` → ``sec`` in elapsed (wall) time; ``threads`` n > 1 → CBC's repeatable
  parallel mode ``threads 100+n`` (same model and seed → same answer); ``mip_rel_gap`` →
  ``ratioGap``; the absolute gap → ``allowableGap`` (1 − 1e-6 on an integral objective, as for HiGHS);
  ``seed`` > 0 → ``randomSeed`` and ``randomCbcSeed`` (CBC reads 0 as "time of day", so seed 0 keeps
  CBC's fixed default seeds); ``node_limit`` → ``maxNodes``; ``presolve=False`` → ``presolve off`` and
  ``preprocess off``; ``heuristic_effort`` 0 → ``heuristicsOnOff off`` (CBC has no effort share: any
  other value keeps its default heuristics, and the outcome's message says so); ``warm_start`` → a
  ``mipstart`` file of the integer columns (accepted when CBC's log reports the start's cost);
  ``progress`` ← CBC's "Integer solution of …" and "After n nodes … best possible …" log lines;
  ``verbose`` copies CBC's log to stderr.  Feasibility tolerances are 1e-8 (``primalTolerance``,
  ``integerTolerance``), as for HiGHS and Gurobi.

Ctrl-C.  The caller waits in short interruptible sleeps; on KeyboardInterrupt, or on the CLI's
process-wide Ctrl-C request (`planner.core.interrupt`), the CBC process is killed and reaped, its
files are removed and KeyboardInterrupt propagates (no result is returned, so nothing is written).
A CBC run that outlives its time limit by `OVERRUN_GRACE_S` (and as much again as the limit) is
killed and reported as ERROR.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from planner.solver.model import LinearModel
from planner.solver.outcome import ProgressEvent, SolveOptions, SolverOutcome, SolveStatus

#: CBC reads any bound of magnitude ≥ 1e30 as infinite.
_CBC_INF = 1e30
#: Bounds of magnitude ≥ 1e20 are infinite, as for HiGHS (its ``infinite_bound``): written as such.
_INFINITE_BOUND = 1e20
_FEASIBILITY_TOLERANCE = 1e-8
#: Tolerance of the check of a returned point against the model (rows, bounds, integrality).
_CHECK_TOLERANCE = 1e-6
#: Seconds between the caller's checks for Ctrl-C while CBC runs.
_POLL_S = 0.05
#: Seconds past its time limit (plus the limit itself) after which a CBC run that has not stopped is killed.
OVERRUN_GRACE_S = 30.0
_NAME_WIDTH = 8  # fixed-MPS name field: columns C0…C9999999, rows R0…R9999999


def cbc_path() -> str | None:
    """The CBC executable: the one bundled with PuLP, else ``cbc`` on PATH; None when neither exists."""
    try:
        from pulp.apis.coin_api import PULP_CBC_CMD

        path = os.path.realpath(PULP_CBC_CMD.pulp_cbc_path)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    except Exception:  # noqa: BLE001 - PuLP absent or without a binary for this platform
        pass
    return shutil.which("cbc")


def cbc_available() -> tuple[bool, str]:
    """Whether a CBC executable was found (and why not)."""
    if cbc_path() is None:
        return False, "no CBC executable found: pip install pulp (it bundles CBC), or put cbc on PATH"
    return True, ""


# --------------------------------------------------------------------------------------------- MPS


def _num(values: np.ndarray) -> list[str]:
    return [format(v, ".17g") for v in np.asarray(values, float).tolist()]


def write_mps(model: LinearModel, path: Path, *, negate_cost: bool = False) -> np.ndarray:
    """Write ``model`` (without its objective offset) as a fixed-layout MPS file; return the written rows.

    Columns are named ``C<j>``, rows ``R<i>`` (model indices); free rows are left out.  Every integer
    column gets explicit bounds (``LI``/``UI``/``MI``/``PL``/``FX``) so that no reader takes it for a
    binary.  ``negate_cost`` writes ``−c`` (a maximisation solved as a minimisation).
    """
    n, m = model.num_cols, model.num_rows
    if max(n, m) >= 10 ** (_NAME_WIDTH - 1):
        raise ValueError(f"model too large for the MPS writer ({n} columns, {m} rows)")
    lo = np.where(model.row_lower <= -_INFINITE_BOUND, -np.inf, model.row_lower)
    up = np.where(model.row_upper >= _INFINITE_BOUND, np.inf, model.row_upper)
    fin_lo, fin_up = np.isfinite(lo), np.isfinite(up)
    kept = np.flatnonzero(fin_lo | fin_up)
    eq = fin_lo & fin_up & (lo == up)
    ranged = fin_lo & fin_up & (lo != up)
    kind = np.where(eq, "E", np.where(fin_up, "L", "G"))
    rhs = np.where(fin_up, up, lo)
    rname = np.array([f"R{i}" for i in range(m)], dtype=object)
    cname = [f"C{j}" for j in range(n)]
    cost = -model.cost if negate_cost else model.cost

    out: list[str] = [f"NAME          {re.sub(r'[^A-Za-z0-9_]', '_', model.name)[:8] or 'model'}", "ROWS", " N  OBJ"]
    out += [f" {k}  {r}" for k, r in zip(kind[kept].tolist(), rname[kept].tolist())]

    out.append("COLUMNS")
    csc = model.matrix.tocsc()
    csc.sort_indices()
    keep_row = np.zeros(m, bool)
    keep_row[kept] = True
    vals = _num(csc.data)
    rows = csc.indices.tolist()
    indptr = csc.indptr.tolist()
    costs = _num(cost)
    integer = model.integrality.tolist()
    keep_row_l = keep_row.tolist()
    rname_l = rname.tolist()
    in_marker = False
    markers = 0
    for j in range(n):
        if integer[j] != in_marker:
            out.append(f"    MARK{markers:04d}  'MARKER'                 '{'INTORG' if integer[j] else 'INTEND'}'")
            markers += 1
            in_marker = integer[j]
        name = cname[j].ljust(_NAME_WIDTH)
        out.append(f"    {name}  OBJ       {costs[j]}")  # also declares a column without entries
        for k in range(indptr[j], indptr[j + 1]):
            r = rows[k]
            if keep_row_l[r]:
                out.append(f"    {name}  {rname_l[r].ljust(_NAME_WIDTH)}  {vals[k]}")
    if in_marker:
        out.append(f"    MARK{markers:04d}  'MARKER'                 'INTEND'")

    out.append("RHS")
    nz_rhs = kept[rhs[kept] != 0]
    out += [f"    RHS       {r.ljust(_NAME_WIDTH)}  {v}" for r, v in zip(rname[nz_rhs].tolist(), _num(rhs[nz_rhs]))]
    rng = np.flatnonzero(ranged)
    if rng.size:
        out.append("RANGES")
        widths = _num(up[rng] - lo[rng])
        out += [f"    RNG       {r.ljust(_NAME_WIDTH)}  {v}" for r, v in zip(rname[rng].tolist(), widths)]

    out.append("BOUNDS")
    clo = np.where(model.col_lower <= -_INFINITE_BOUND, -np.inf, model.col_lower)
    cup = np.where(model.col_upper >= _INFINITE_BOUND, np.inf, model.col_upper)
    lo_s, up_s = _num(clo), _num(cup)
    for j, (a, b, is_int) in enumerate(zip(clo.tolist(), cup.tolist(), integer)):
        name = cname[j].ljust(_NAME_WIDTH)
        if a == b:
            out.append(f" FX BND       {name}  {lo_s[j]}")
            continue
        if a == -np.inf:
            if b == np.inf and not is_int:
                out.append(f" FR BND       {name}")
                continue
            out.append(f" MI BND       {name}")
        elif a != 0.0 or is_int:
            out.append(f" {'LI' if is_int else 'LO'} BND       {name}  {lo_s[j]}")
        if b != np.inf:
            out.append(f" {'UI' if is_int else 'UP'} BND       {name}  {up_s[j]}")
        elif is_int:
            out.append(f" PL BND       {name}")
    out.append("ENDATA")
    path.write_text("\n".join(out) + "\n")
    return kept


# ------------------------------------------------------------------------------------------ the run

_FLOAT = r"([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?inf|[-+]?1e\+?308)"
_RE_INTEGER_SOLUTION = re.compile(rf"Cbc00(?:04|12|16)I Integer solution of {_FLOAT} found")
_RE_NODES = re.compile(rf"Cbc0010I After \d+ nodes, \d+ on tree, {_FLOAT} best solution, best possible {_FLOAT}")
_RE_LOWER_BOUND = re.compile(rf"^Lower bound:\s+{_FLOAT}")
_RE_BEST_POSSIBLE = re.compile(rf"Partial search - best objective {_FLOAT} \(best possible {_FLOAT}\)")
_RE_COMPLETED = re.compile(r"Search completed - best objective")
_RE_MIPSTART_COST = re.compile(r"MIPStart provided solution with cost")  # else: "mipstart values could not be used"


class _Log:
    """CBC's output, read on a helper thread from a file descriptor (progress is reported from there)."""

    def __init__(self, fd: int, sign: float, options: SolveOptions, started: float) -> None:
        self.lines: list[str] = []
        self._sign = sign
        self._options = options
        self._started = started
        self._last = -1.0
        self._thread = threading.Thread(target=self._read, args=(fd,), name="planner-cbc-log", daemon=True)
        self._thread.start()

    def _read(self, fd: int) -> None:
        pending = b""
        while True:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # a pseudo-terminal whose other end closed (Linux: EIO)
                chunk = b""
            if not chunk:
                break
            pending += chunk
            *complete, pending = pending.split(b"\n")
            for raw in complete:
                self._line(raw)
        if pending:
            self._line(pending)
        os.close(fd)

    def _line(self, raw: bytes) -> None:
        line = raw.decode("utf-8", "replace").rstrip("\r")
        self.lines.append(line)
        if self._options.verbose:
            print(line, file=sys.stderr, flush=True)
        if self._options.progress is not None:
            try:
                self._progress(line)
            except Exception:  # noqa: BLE001 - a failing progress display must not stall CBC's output
                self._options = SolveOptions(verbose=self._options.verbose)

    def _progress(self, line: str) -> None:
        now = time.perf_counter() - self._started
        found = _RE_INTEGER_SOLUTION.search(line)
        if found:
            self._last = now
            self._options.progress(ProgressEvent(now, self._sign * float(found.group(1)), None))
            return
        nodes = _RE_NODES.search(line)
        if nodes and now - self._last >= 0.25:
            self._last = now
            inc, bnd = float(nodes.group(1)), float(nodes.group(2))
            self._options.progress(ProgressEvent(now, self._sign * inc if abs(inc) < _CBC_INF else None,
                                                 self._sign * bnd if abs(bnd) < _CBC_INF else None))

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)


def _run(args: list[str], cwd: str, options: SolveOptions, sign: float,
         started: float) -> tuple[int | None, list[str], str]:
    """Run CBC; return (exit code or None when killed for overrunning, log lines, note).

    CBC's C stdio buffers its log in blocks on a pipe; when progress or the log is shown live, its output
    goes to a pseudo-terminal instead (POSIX), where it is written line by line.
    """
    from planner.core import interrupt

    live = (options.progress is not None or options.verbose) and os.name == "posix"
    if live:
        import pty

        read_fd, write_fd = pty.openpty()
    else:
        read_fd, write_fd = os.pipe()
    try:
        proc = subprocess.Popen(args, cwd=cwd, stdin=subprocess.DEVNULL, stdout=write_fd, stderr=write_fd)
    except BaseException:
        os.close(read_fd)
        raise
    finally:
        os.close(write_fd)
    log = _Log(read_fd, sign, options, started)
    hard_stop = None
    if options.time_limit is not None:
        hard_stop = time.monotonic() + 2 * max(options.time_limit, 0.0) + OVERRUN_GRACE_S
    note = ""
    try:
        while True:
            try:
                code = proc.wait(_POLL_S)
                break
            except subprocess.TimeoutExpired:
                pass
            if interrupt.requested():
                raise KeyboardInterrupt
            if hard_stop is not None and time.monotonic() > hard_stop:
                proc.kill()
                proc.wait()
                code, note = None, f"CBC did not stop within its time limit of {options.time_limit:g} s and was killed"
                break
    except BaseException:  # KeyboardInterrupt (Ctrl-C) or anything else: no CBC process outlives the call
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        raise
    finally:
        log.join(1.0)  # the reader ends (and closes ``read_fd``) once CBC's end of the channel is closed
    return code, log.lines, note


def _read_binary_solution(path: Path, num_cols: int) -> np.ndarray | None:
    """Column values of CBC's ``saveSolution`` file: int rows, int cols, double objective, row activities,
    row duals, column values, reduced costs."""
    try:
        raw = path.read_bytes()
    except OSError:
        return None
    if len(raw) < 16:
        return None
    rows, cols = (int(v) for v in np.frombuffer(raw[:8], dtype=np.int32))
    if cols != num_cols or len(raw) != 16 + 8 * (2 * rows + 2 * cols):
        return None
    start = 16 + 16 * rows
    return np.frombuffer(raw[start : start + 8 * cols], dtype=np.float64).copy()


def _read_text_solution(path: Path, num_cols: int) -> np.ndarray | None:
    """Column values of CBC's text solution file (8 significant digits; used when the binary file is missing)."""
    x = np.zeros(num_cols)
    try:
        lines = path.read_text().splitlines()[1:]
    except OSError:
        return None
    for line in lines:
        parts = line.split()
        if parts and parts[0] == "**":
            parts = parts[1:]
        if len(parts) >= 3 and parts[1].startswith("C") and parts[1][1:].isdigit():
            j = int(parts[1][1:])
            if j < num_cols:
                x[j] = float(parts[2])
    return x


def _g_uncertainty(text: str) -> float:
    """Half a unit in the last place of a number CBC printed with ``%g`` (6 significant digits; 0 is exact)."""
    v = abs(float(text))
    return 0.0 if v == 0.0 else 0.5 * 10.0 ** (np.floor(np.log10(v)) - 5)


def _fixed_uncertainty(text: str) -> float:
    """Half a unit in the last place of a number printed with a fixed count of decimals (``%.3f``)."""
    mantissa, _, exponent = text.lower().partition("e")
    decimals = len(mantissa.partition(".")[2])
    return 0.5 * 10.0 ** (int(exponent or 0) - decimals)


def _parse_bound(lines: list[str]) -> float | None:
    """CBC's best bound in the sense CBC solved (minimisation), from its log, never above the true bound.

    CBC prints its bound rounded ("Lower bound:" with 3 decimals; "best possible" with 6 significant
    digits): of the last value of each kind the more precise one is taken, lowered by half a unit in its
    last place.
    """
    candidates: list[tuple[float, float]] = []  # (uncertainty, value)
    summary = best_possible = None
    for line in lines:
        m = _RE_LOWER_BOUND.search(line.strip())
        if m:
            summary = m.group(1)
        m = _RE_BEST_POSSIBLE.search(line) or _RE_NODES.search(line)
        if m:
            best_possible = m.group(2)
    if summary is not None:
        candidates.append((_fixed_uncertainty(summary), float(summary)))
    if best_possible is not None:
        candidates.append((_g_uncertainty(best_possible), float(best_possible)))
    candidates = [(u, v) for u, v in candidates if np.isfinite(v) and abs(v) < _CBC_INF]
    if not candidates:
        return None
    unc, value = min(candidates)
    return value - unc


def _error(message: str, seconds: float = 0.0) -> SolverOutcome:
    return SolverOutcome(SolveStatus.ERROR, "cbc", None, None, None, seconds, message)


def _last_words(lines: list[str]) -> str:
    banner = ("Welcome", "Version", "Build Date", "command line")
    useful = [ln.strip() for ln in lines if ln.strip() and not ln.startswith(banner)]
    return useful[-1] if useful else "no output"


def _point_ok(model: LinearModel, x: np.ndarray) -> bool:
    if x.shape != (model.num_cols,) or not np.all(np.isfinite(x)):
        return False
    if model.max_violation(x) > _CHECK_TOLERANCE * max(1.0, float(np.max(np.abs(x), initial=0.0))):
        return False
    xi = x[model.integrality]
    return bool(np.all(np.abs(xi - np.round(xi)) <= _CHECK_TOLERANCE))


def _args(model: LinearModel, options: SolveOptions, mps: str, start_file: str | None) -> tuple[list[str], list[str]]:
    """CBC's command line (after the executable) and notes on options CBC does not follow exactly."""
    notes: list[str] = []
    a = [mps, "-timeMode", "elapsed", "-primalTolerance", repr(_FEASIBILITY_TOLERANCE),
         "-integerTolerance", repr(_FEASIBILITY_TOLERANCE)]
    if options.time_limit is not None:
        a += ["-sec", repr(float(max(options.time_limit, 0.0)))]
    if options.threads is not None and options.threads > 1:
        a += ["-threads", str(100 + int(options.threads))]  # 100+n: n threads, repeatable search
    a += ["-ratioGap", repr(float(options.mip_rel_gap))]
    abs_gap = options.mip_abs_gap
    if abs_gap is None and model.objective_is_integral:
        abs_gap = 1.0 - 1e-6  # an integral objective is optimal once incumbent − bound < 1
    if abs_gap is not None:
        a += ["-allowableGap", repr(float(abs_gap))]
    if options.seed:
        seed = str(int(options.seed) % 2147483647 or 1)
        a += ["-randomSeed", seed, "-randomCbcSeed", seed]
    if options.node_limit is not None:
        a += ["-maxNodes", str(int(options.node_limit))]
    if options.presolve is False:
        a += ["-presolve", "off", "-preprocess", "off"]
    if options.heuristic_effort is not None:
        if options.heuristic_effort == 0.0:
            a += ["-heuristicsOnOff", "off"]
        else:
            notes.append("CBC has no heuristic-effort share: its default heuristics run")
    if start_file is not None:
        a += ["-mipstart", start_file]
    a += ["-solve", "-solution", "solution.txt", "-saveSolution", "solution.bin"]
    return a, notes


#: CBC's "Stopped on …" reasons in the words the other backends use (callers look for "time limit").
_STOP_REASONS = {"on time": "time limit reached", "on nodes": "node limit reached",
                 "on iterations": "iteration limit reached", "on solutions": "solution limit reached",
                 "on ctrl-c": "interrupted", "on difficulties": "numerical difficulties"}


def solve_cbc(model: LinearModel, options: SolveOptions) -> SolverOutcome:
    """Solve ``model`` with CBC (see the module docstring for the reading choices): a model decided without
    CBC (no columns, crossed bounds), else MPS file → CBC run → status, checked point and bound."""
    exe = cbc_path()
    if exe is None:
        return _error(cbc_available()[1])
    trivial = _decided_without_cbc(model)
    if trivial is not None:
        return trivial
    start = time.perf_counter()
    is_mip = bool(model.integrality.any())
    sign = -1.0 if model.sense == "max" else 1.0
    with tempfile.TemporaryDirectory(prefix="planner-cbc-") as tmp:
        work = Path(tmp)
        try:
            write_mps(model, work / "model.mps", negate_cost=sign < 0)
        except (OSError, ValueError) as exc:
            return _error(f"could not write the model for CBC: {exc}", time.perf_counter() - start)
        start_file = _write_mip_start(model, options, work) if is_mip else None
        args, notes = _args(model, options, "model.mps", start_file)
        try:
            code, lines, note = _run([exe, *args], tmp, options, sign, start)
        except OSError as exc:
            return _error(f"could not run CBC ({exe}): {exc}", time.perf_counter() - start)
        if note:
            return _error(note, time.perf_counter() - start)
        seconds = time.perf_counter() - start
        status_line, x = _read_solution(work, model.num_cols, notes)
        if status_line is None:
            return _error(f"CBC stopped without a solution file (exit code {code}): {_last_words(lines)}", seconds)

    status = _status_of(status_line, lines, is_mip, notes)
    if status is None:
        return _error(f"CBC status not understood: {status_line!r}", seconds)
    reported = re.search(rf"objective value {_FLOAT}", status_line)
    status, objective, x_out, error = _checked_point(model, x, status, reported, sign, notes)
    if error:
        return _error(error, seconds)
    return SolverOutcome(
        status=status,
        solver="cbc",
        objective=objective,
        bound=_bound_of(model, lines, status, objective, is_mip, sign),
        x=x_out,
        seconds=seconds,
        message="; ".join(notes),
        node_count=_node_count(lines) if is_mip else None,
        warm_start_accepted=any(_RE_MIPSTART_COST.search(line) for line in lines) if start_file else None,
    )


def _decided_without_cbc(model: LinearModel) -> SolverOutcome | None:
    """The outcome of a model with no columns, or with a row or column whose bounds cross; None otherwise."""
    if model.num_cols == 0:
        if np.any((model.row_lower > 0) | (model.row_upper < 0)):
            return SolverOutcome(SolveStatus.INFEASIBLE, "cbc", None, None, None, 0.0,
                                 "a row without columns has 0 outside its bounds")
        return SolverOutcome(SolveStatus.OPTIMAL, "cbc", model.offset, model.offset, np.zeros(0), 0.0)
    bad_rows = np.flatnonzero(model.row_lower > model.row_upper)
    bad_cols = np.flatnonzero(model.col_lower > model.col_upper)
    if bad_rows.size or bad_cols.size:
        what = f"row {model.describe_row(int(bad_rows[0]))}" if bad_rows.size else f"column {int(bad_cols[0])}"
        return SolverOutcome(SolveStatus.INFEASIBLE, "cbc", None, None, None, 0.0,
                             f"{what} has lower bound > upper bound")
    return None


def _write_mip_start(model: LinearModel, options: SolveOptions, work: Path) -> str | None:
    """CBC's MIP-start file of ``options.warm_start`` (integer columns, rounded), or None without a usable one."""
    if options.warm_start is None:
        return None
    ws = np.asarray(options.warm_start, float)
    if ws.shape != (model.num_cols,) or not np.all(np.isfinite(ws)):
        return None
    cols = np.flatnonzero(model.integrality)
    text = ["Feasible - objective value 0"]
    text += [f"{j} C{j} {format(v, '.17g')}" for j, v in zip(cols.tolist(), np.round(ws[cols]).tolist())]
    (work / "start.txt").write_text("\n".join(text) + "\n")
    return "start.txt"


def _read_solution(work: Path, n: int, notes: list[str]) -> tuple[str | None, np.ndarray | None]:
    """(CBC's status line, the column values): exact doubles from the binary solution file, else the text one."""
    sol_txt = work / "solution.txt"
    try:
        head = sol_txt.read_text().splitlines()[:1]
    except OSError:
        head = []
    if not head:
        return None, None
    x = _read_binary_solution(work / "solution.bin", n)
    if x is None:
        x = _read_text_solution(sol_txt, n)
        if x is not None:
            notes.append("column values read from CBC's text solution (8 significant digits)")
    return head[0].strip(), x


def _status_of(status_line: str, lines: list[str], is_mip: bool, notes: list[str]) -> SolveStatus | None:
    """The status CBC's solution file states (a stop names its reason in ``notes``); None when not understood."""
    word = status_line.split()[0] if status_line.split() else ""
    if word == "Optimal":
        return SolveStatus.OPTIMAL
    if word == "Infeasible" or status_line.startswith("Integer infeasible"):
        return SolveStatus.INFEASIBLE
    if word == "Unbounded":
        if is_mip:
            notes.append("CBC reports the linear relaxation unbounded")
        return SolveStatus.UNBOUNDED
    if word != "Stopped":
        return None
    reported = re.search(rf"objective value {_FLOAT}", status_line)
    has_incumbent = is_mip and "no integer solution" not in status_line and reported is not None
    summary = [ln.strip()[len("Result - Stopped on "):] for ln in lines if ln.strip().startswith("Result - Stopped on ")]
    why = status_line.split(" - ")[0].split(" (")[0].removeprefix("Stopped ").strip()
    # the log's summary names a node limit ("Stopped on node limit") that the solution file calls "iterations"
    notes.append("stopped: " + (f"{summary[-1]} reached" if summary else _STOP_REASONS.get(why, why)))
    return SolveStatus.FEASIBLE if has_incumbent or not is_mip else SolveStatus.NO_SOLUTION


def _checked_point(model: LinearModel, x: np.ndarray | None, status: SolveStatus, reported: re.Match | None,
                   sign: float, notes: list[str]) -> tuple[SolveStatus, float | None, np.ndarray | None, str]:
    """(status, objective, point, error): the objective is recomputed from the point, which must satisfy the
    model; a disagreement with CBC's own figure is never optimal; a violating point is an error when CBC
    called it optimal and no solution otherwise."""
    if status not in (SolveStatus.OPTIMAL, SolveStatus.FEASIBLE):
        return status, None, None, ""
    if x is not None and _point_ok(model, x):
        objective = float(model.cost @ x) + float(model.offset)
        said = sign * float(reported.group(1)) + float(model.offset) if reported else None
        if said is not None and abs(objective - said) > 1e-6 * max(1.0, abs(objective)):
            notes.append(f"CBC's reported objective {said:.10g} disagrees with its point ({objective:.10g})")
            if status == SolveStatus.OPTIMAL:
                status = SolveStatus.FEASIBLE
        return status, objective, x, ""
    if status == SolveStatus.OPTIMAL:
        violation = model.max_violation(x) if x is not None and x.shape == (model.num_cols,) else float("nan")
        return status, None, None, f"CBC reported optimal, but its point violates the model by {violation:.3g}"
    return SolveStatus.NO_SOLUTION, None, None, ""


def _bound_of(model: LinearModel, lines: list[str], status: SolveStatus, objective: float | None, is_mip: bool,
              sign: float) -> float | None:
    """The best bound: the objective after a completed search (or of an LP), else CBC's logged bound, never
    better than the incumbent."""
    if not is_mip:
        return objective if status == SolveStatus.OPTIMAL else None
    if status not in (SolveStatus.OPTIMAL, SolveStatus.FEASIBLE, SolveStatus.NO_SOLUTION):
        return None
    if status == SolveStatus.OPTIMAL and any(_RE_COMPLETED.search(line) for line in lines):
        return objective  # a completed search proves its incumbent optimal (within the gap tolerances)
    raw = _parse_bound(lines)
    if raw is None:
        return objective if status == SolveStatus.OPTIMAL else None
    if objective is not None:
        raw = min(raw, sign * (objective - float(model.offset)))
    return sign * raw + float(model.offset)


_RE_NODE_COUNT = re.compile(r"^Enumerated nodes:\s+(\d+)")


def _node_count(lines: list[str]) -> int | None:
    for line in reversed(lines):
        m = _RE_NODE_COUNT.search(line.strip())
        if m:
            return int(m.group(1))
    return None
