"""numba-compiled kernels of the queueing family: the min-cost assignment with duals and the local search.

This module imports numba at module level, so it is imported lazily (inside `planner.queueing.bounds`
and `planner.queueing.local_search`): the CLI pays numba's import only when the certified pipeline
runs.  Every kernel is ``@njit(cache=True)``: the first call in a fresh environment compiles
(seconds), later processes load the machine code from numba's cache.

* `assignment_with_duals`: the shortest-augmenting-path Hungarian method for a dense
  ``rows × columns`` cost matrix (rows ≤ columns; every row assigned, every column at most once).
  Besides the assignment it returns the dual potentials ``row_dual`` / ``column_dual`` with
  ``row_dual[i] + column_dual[j] ≤ cost[i, j]`` (equality on assigned cells) and
  ``column_dual[j] ≤ 0``, ``= 0`` on columns no row uses: a dual-feasible solution of the
  assignment LP, so ``Σ row_dual + Σ column_dual`` = the optimum = a lower bound, and
  ``cost − row_dual − column_dual ≥ 0`` are reduced costs (used for reduced-cost fixing).
* `queue_cost` / `local_search` (the move evaluations `insertion_change` / `replacement_change` are
  O(1) from a per-queue profile unless the move can change a lateness, and are inlined at compile
  time, ``inline="always"``: a call passing many array views costs more than the evaluation): the sum of estimates of one queue (start, or completion, replayed
  from the busy time with a swap whenever the model changes — the validator's rule) plus
  ``LATENESS_WEIGHT`` × the summed lateness, and a first-improvement descent over two move types
  (relocate one group anywhere, exchange two groups of different queues) until no move improves.
  The caller re-scores the returned plan with the independent validator.
"""

from __future__ import annotations

import numpy as np
from numba import njit

#: Weight of one second of SLO violation against one second of estimated start in the descent.
LATENESS_WEIGHT = 1e4
#: A descent move must lower the summed queue cost by more than this share of Σ |queue cost| (and by
#: more than 1e-9) to count as an improvement: below it the "gain" is floating-point rounding.
IMPROVEMENT_TOLERANCE = 1e-12


@njit(cache=True)
def assignment_with_duals(cost):
    """Min-cost assignment of every row to a distinct column; returns (column of each row, row duals,
    column duals, steps): ``steps`` = columns scanned (Σ over the Dijkstra iterations of ``columns``),
    the deterministic work count of `planner.queueing.effort`."""
    rows, columns = cost.shape
    infinity = 1e300
    row_potential = np.zeros(rows + 1)
    column_potential = np.zeros(columns + 1)
    row_of_column = np.zeros(columns + 1, np.int64)  # 1-based row, 0 = free
    previous_column = np.zeros(columns + 1, np.int64)
    shortest = np.empty(columns + 1)
    visited = np.zeros(columns + 1, np.bool_)
    steps = 0
    for row in range(1, rows + 1):
        row_of_column[0] = row
        current = 0
        shortest[:] = infinity
        visited[:] = False
        while True:
            steps += columns
            visited[current] = True
            source_row = row_of_column[current]
            delta = infinity
            next_column = 0
            for j in range(1, columns + 1):
                if not visited[j]:
                    reduced = cost[source_row - 1, j - 1] - row_potential[source_row] - column_potential[j]
                    if reduced < shortest[j]:
                        shortest[j] = reduced
                        previous_column[j] = current
                    if shortest[j] < delta:
                        delta = shortest[j]
                        next_column = j
            for j in range(columns + 1):
                if visited[j]:
                    row_potential[row_of_column[j]] += delta
                    column_potential[j] -= delta
                else:
                    shortest[j] -= delta
            current = next_column
            if row_of_column[current] == 0:
                break
        while True:
            back = previous_column[current]
            row_of_column[current] = row_of_column[back]
            current = back
            if current == 0:
                break
    column_of_row = np.empty(rows, np.int64)
    for j in range(1, columns + 1):
        if row_of_column[j] > 0:
            column_of_row[row_of_column[j] - 1] = j - 1
    return column_of_row, row_potential[1:].copy(), column_potential[1:].copy(), steps


@njit(cache=True)
def queue_cost(sequence, length, queue, work, own, slo, swap, busy, loaded, model_of):
    """Σ estimate + LATENESS_WEIGHT·Σ lateness of ``sequence[:length]`` on ``queue``."""
    clock = busy[queue]
    current = loaded[queue]
    total = 0.0
    late = 0.0
    for k in range(length):
        group = sequence[k]
        if model_of[group] != current:
            clock += swap[queue]
            current = model_of[group]
        estimate = clock + own[queue, group]
        total += estimate
        if estimate > slo[group]:
            late += estimate - slo[group]
        clock += work[queue, group]
    return total + LATENESS_WEIGHT * late


@njit(cache=True)
def _insert(target, source, length, position, group):
    """``target`` = ``source[:length]`` with ``group`` inserted at ``position``."""
    k = 0
    for q in range(length + 1):
        if q == position:
            target[k] = group
            k += 1
        if q < length:
            target[k] = source[q]
            k += 1


@njit(cache=True)
def queue_profile(sequence, length, queue, work, own, slo, swap, busy, loaded, model_of,
                  clock_before, model_before, slack, suffix_min_slack, suffix_late):
    """Per-position data of one queue for O(1) insertion costs (arrays of size ≥ length + 1).

    ``clock_before[p]`` / ``model_before[p]``: the clock and the loaded model when position p is
    reached (before its swap); ``slack[k] = slo − estimate`` of position k; the suffix minimum of the
    slack and the suffix sum of the lateness from position p on.  Returns `queue_cost`.
    """
    clock = busy[queue]
    current = loaded[queue]
    total = 0.0
    late = 0.0
    for k in range(length):
        group = sequence[k]
        clock_before[k] = clock
        model_before[k] = current
        if model_of[group] != current:
            clock += swap[queue]
            current = model_of[group]
        estimate = clock + own[queue, group]
        total += estimate
        slack[k] = slo[group] - estimate
        if slack[k] < 0.0:
            late -= slack[k]
        clock += work[queue, group]
    clock_before[length] = clock
    model_before[length] = current
    suffix_min_slack[length] = 1e300
    suffix_late[length] = 0.0
    for k in range(length - 1, -1, -1):
        suffix_min_slack[k] = min(suffix_min_slack[k + 1], slack[k])
        suffix_late[k] = suffix_late[k + 1] + (-slack[k] if slack[k] < 0.0 else 0.0)
    return total + LATENESS_WEIGHT * late


@njit(cache=True, inline="always")
def insertion_change(sequence, length, position, group, queue, work, own, slo, swap, model_of,
                     clock_before, model_before, slack, suffix_min_slack, cutoff, counter):
    """Change of `queue_cost` when ``group`` is inserted at ``position`` (profile of the queue given).

    The group starts at ``clock_before[p]`` (+ a swap if its model differs from the one loaded
    there); every later group shifts by ``δ = W_i + S·(swap_i + swap_next_new − swap_next_old) ≥ 0``,
    so Σ estimate grows by ``estimate_i + δ·(length − p)``; lateness changes only where ``δ`` exceeds
    the slack (checked against the suffix minimum, scanned only then).  When even the least added
    lateness, ``min(δ, δ − min slack)``, puts the change at or above ``cutoff`` (a move that cannot
    win) the scan is skipped and that lower bound is returned.  Work counts (`planner.queueing.effort`):
    ``counter[0]`` += 1 (an evaluation), ``counter[1]`` += the positions scanned.
    """
    counter[0] += 1
    s = swap[queue]
    switch = model_of[group] != model_before[position]
    start = clock_before[position] + (s if switch else 0.0)
    estimate = start + own[queue, group]
    change = estimate
    late = estimate - slo[group] if estimate > slo[group] else 0.0
    if position < length:
        following = model_of[sequence[position]]
        old = 1.0 if following != model_before[position] else 0.0
        new = 1.0 if following != model_of[group] else 0.0
        shift = work[queue, group] + s * ((1.0 if switch else 0.0) + new - old)
        change += shift * (length - position)
        if shift > suffix_min_slack[position]:
            least = min(shift, shift - suffix_min_slack[position])
            if change + LATENESS_WEIGHT * (late + least) >= cutoff:
                return change + LATENESS_WEIGHT * (late + least)
            counter[1] += length - position
            for k in range(position, length):
                before = -slack[k] if slack[k] < 0.0 else 0.0
                after = shift - slack[k]
                late += max(0.0, after) - before
    return change + LATENESS_WEIGHT * late


@njit(cache=True, inline="always")
def replacement_change(sequence, length, position, group, queue, work, own, slo, swap, model_of,
                       clock_before, model_before, slack, suffix_min_slack, suffix_late, cutoff, counter):
    """Change of `queue_cost` when the group at ``position`` is replaced by ``group`` (profile given).

    Same bookkeeping as `insertion_change`: the new group starts at ``clock_before[p]`` (+ swap); the
    later groups shift by ``δ`` = the change of the finish time of position p plus the change of the
    swap into position p + 1; lateness is rescanned only when ``δ`` can change it.  ``counter`` as in
    `insertion_change`.
    """
    counter[0] += 1
    s = swap[queue]
    old = sequence[position]
    switch = model_of[group] != model_before[position]
    start = clock_before[position] + (s if switch else 0.0)
    estimate = start + own[queue, group]
    change = estimate - (slo[old] - slack[position])
    late = (estimate - slo[group] if estimate > slo[group] else 0.0) - (-slack[position] if slack[position] < 0.0 else 0.0)
    if position + 1 < length:
        following = model_of[sequence[position + 1]]
        old_switch = 1.0 if following != model_of[old] else 0.0
        new_switch = 1.0 if following != model_of[group] else 0.0
        shift = start + work[queue, group] - clock_before[position + 1] + s * (new_switch - old_switch)
        change += shift * (length - position - 1)
        rescan = False
        if shift > suffix_min_slack[position + 1]:
            least = min(shift, shift - suffix_min_slack[position + 1])
            if shift > 0.0 and change + LATENESS_WEIGHT * (late + least) >= cutoff:
                return change + LATENESS_WEIGHT * (late + least)  # a lower bound: every later position gains ≥ 0
            rescan = True
        elif shift < 0.0 and suffix_late[position + 1] > 0.0:
            rescan = True
        if rescan:
            counter[1] += length - position - 1
            for k in range(position + 1, length):
                before = -slack[k] if slack[k] < 0.0 else 0.0
                after = shift - slack[k]
                late += max(0.0, after) - before
    return change + LATENESS_WEIGHT * late


@njit(cache=True)
def local_search(sequences, lengths, work, own, slo, swap, busy, loaded, model_of, allowed, max_passes, exchange, counter,
                 budget=-1.0, evaluation_cost=0.0, scan_cost=0.0, relative_tolerance=IMPROVEMENT_TOLERANCE):
    """Relocate / exchange descent on ``sequences`` (modified in place); returns the number of passes.

    A move counts as an improvement only if it lowers the summed `queue_cost` by more than
    ``max(1e-9, relative_tolerance · Σ |queue cost|)`` (recomputed every pass): at estimates of
    ~10¹¹ s the costs reach ~10¹⁶ (× `LATENESS_WEIGHT`), where rounding alone makes moves "improve"
    by a few units and the first-improvement scan would cycle forever.  With ``budget ≥ 0`` the
    descent stops (keeping the plan so far) once its work, ``evaluation_cost · counter[0] +
    scan_cost · counter[1]`` (the nominal seconds of `planner.queueing.effort`), reaches ``budget``;
    it checks before each group it tries to relocate and each group it tries to exchange.
    Returns the passes run, negated when the budget stopped the descent.

    Work counts (`planner.queueing.effort`): ``counter[0]`` = move evaluations, ``counter[1]`` =
    positions rescanned for lateness, ``counter[2]`` = positions of the queue profiles built."""
    queues, size = sequences.shape[0], sequences.shape[1] + 1
    cost = np.empty(queues)
    clock_before = np.empty((queues, size))
    model_before = np.empty((queues, size), np.int64)
    slack = np.empty((queues, size))
    suffix_min_slack = np.empty((queues, size))
    suffix_late = np.empty((queues, size))
    for g in range(queues):
        counter[2] += lengths[g] + 1
        cost[g] = queue_profile(sequences[g], lengths[g], g, work, own, slo, swap, busy, loaded, model_of, clock_before[g],
                                model_before[g], slack[g], suffix_min_slack[g], suffix_late[g])
    removed = np.empty(size, np.int64)
    trial = np.empty(size, np.int64)
    own_clock = np.empty(size)
    own_model = np.empty(size, np.int64)
    own_slack = np.empty(size)
    own_min = np.empty(size)
    own_late = np.empty(size)
    improved = True
    passes = 0
    stopped = False
    while improved and passes < max_passes and not stopped:
        improved = False
        passes += 1
        scale = 0.0
        for g in range(queues):
            scale += abs(cost[g])
        tolerance = max(1e-9, relative_tolerance * scale)
        for a in range(queues):  # relocate: best position over all queues, first improving group
            if stopped:
                break
            k = 0
            while k < lengths[a]:
                if budget >= 0.0 and evaluation_cost * counter[0] + scan_cost * counter[1] >= budget:
                    stopped = True
                    break
                group = sequences[a, k]
                n = 0
                for q in range(lengths[a]):
                    if q != k:
                        removed[n] = sequences[a, q]
                        n += 1
                counter[2] += lengths[a] + 1
                cost_a = queue_profile(removed, n, a, work, own, slo, swap, busy, loaded, model_of, own_clock, own_model,
                                       own_slack, own_min, own_late)
                best, best_queue, best_position = -tolerance, -1, -1
                for b in range(queues):
                    if not allowed[b, group]:
                        continue
                    if b == a:
                        for position in range(n + 1):
                            if position == k:
                                continue
                            change = cost_a - cost[a] + insertion_change(
                                removed, n, position, group, a, work, own, slo, swap, model_of, own_clock, own_model,
                                own_slack, own_min, best - (cost_a - cost[a]), counter)
                            if change < best:
                                best, best_queue, best_position = change, b, position
                    else:
                        base = cost_a - cost[a]
                        for position in range(lengths[b] + 1):
                            change = base + insertion_change(sequences[b], lengths[b], position, group, b, work, own, slo,
                                                             swap, model_of, clock_before[b], model_before[b], slack[b],
                                                             suffix_min_slack[b], best - base, counter)
                            if change < best:
                                best, best_queue, best_position = change, b, position
                if best_queue < 0:
                    k += 1
                    continue
                improved = True
                b = best_queue
                if b == a:
                    _insert(trial, removed, n, best_position, group)
                    for q in range(n + 1):
                        sequences[a, q] = trial[q]
                else:
                    for q in range(n):
                        sequences[a, q] = removed[q]
                    lengths[a] = n
                    _insert(trial, sequences[b], lengths[b], best_position, group)
                    lengths[b] += 1
                    for q in range(lengths[b]):
                        sequences[b, q] = trial[q]
                for g in (a, b):
                    counter[2] += lengths[g] + 1
                    cost[g] = queue_profile(sequences[g], lengths[g], g, work, own, slo, swap, busy, loaded, model_of,
                                            clock_before[g], model_before[g], slack[g], suffix_min_slack[g], suffix_late[g])
        for a in range(queues if exchange and not stopped else 0):  # exchange two groups of different queues (each takes the other's position)
            for k in range(lengths[a]):
                if budget >= 0.0 and evaluation_cost * counter[0] + scan_cost * counter[1] >= budget:
                    stopped = True
                    break
                for b in range(a + 1, queues):
                    for m in range(lengths[b]):
                        first, second = sequences[a, k], sequences[b, m]
                        if not allowed[b, first] or not allowed[a, second]:
                            continue
                        change_a = replacement_change(sequences[a], lengths[a], k, second, a, work, own, slo, swap, model_of,
                                                      clock_before[a], model_before[a], slack[a], suffix_min_slack[a],
                                                      suffix_late[a], 1e300, counter)
                        change_b = replacement_change(sequences[b], lengths[b], m, first, b, work, own, slo, swap, model_of,
                                                      clock_before[b], model_before[b], slack[b], suffix_min_slack[b],
                                                      suffix_late[b], -tolerance - change_a, counter)
                        if change_a + change_b < -tolerance:
                            sequences[a, k], sequences[b, m] = second, first
                            improved = True
                            for g in (a, b):
                                counter[2] += lengths[g] + 1
                                cost[g] = queue_profile(sequences[g], lengths[g], g, work, own, slo, swap, busy, loaded,
                                                        model_of, clock_before[g], model_before[g], slack[g],
                                                        suffix_min_slack[g], suffix_late[g])
            if stopped:
                break
    return -passes if stopped else passes
