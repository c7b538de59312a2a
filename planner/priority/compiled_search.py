"""numba kernels of the branch-and-bound (`planner.priority.exact`) at b_max ≥ 2 (imported lazily).

`branch_and_bound` is `exact._ParametricSearch.visit`'s depth-first search, iterative and compiled:
the same tests in the same order (Lagrangian node bound, n_UB / t_LB, dominance memo), the same
children in the same order, hence the same nodes, incumbents and proofs (tested against `visit`).
It runs in chunks of nodes and keeps its whole state in arrays, so the caller checks the time and
node limits between chunks and reads the stack for `open_bounds` after a stop.

`expand_batches` / `_expand_into` generate the children of a node — the batches of 1..b_max remaining
jobs within the token capacity, with the arithmetic of `exact._ParametricSearch.children` — and,
when a Lagrangian table is given, drop every non-leaf child whose Lagrangian node bound
(`lagrangian.LagrangianBound.node_bound`) is ≤ the tolerance: that child's visit would end at that
same test, which depends on nothing that changes during the search (λ₀ and μ are fixed), so dropping
it changes no result; it spares the visit (at N = 30, b_max = 2, ~90 % of all visits ended there) and,
with the leader screen of `_expand_into`, most of the enumeration (31,930 batches per node at
b_max = 4, N = 30).  `_canonical_sort` puts the kept children in ``children``'s order.

`batched_waiting_bound` is `exact.batched_waiting_bound` (same arithmetic), compiled.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from planner.priority.compiled import max_on_time, size_sequence_waiting_bound


@njit(cache=True)
def _combinations(r, size):
    count = 1
    for k in range(size):
        count = count * (r - k) // (k + 1)
    return count


@njit(cache=True)
def _batch_count(r, b_max):
    width = 0
    for size in range(1, min(b_max, r) + 1):
        width += _combinations(r, size)
    return width


@njit(cache=True, inline="always")
def _emit(kept, idx, size, keys, longest_out, members, new_wait, new_met, new_total, bounded,
          remaining, wait, met, total, lam, execs, slack, tokens, capacity,
          use_bound, lam0, step, to_go, multipliers, jobs, tolerance, mu_all):
    """Evaluate the batch ``remaining[idx[:size]]`` (as `exact._ParametricSearch.children`) and store it
    at ``kept`` unless it breaks the token capacity or the Lagrangian test prunes it; returns the new count."""
    r = remaining.size
    col = size - 1
    if capacity < np.inf:
        used = 0
        for k in range(size):
            used += tokens[remaining[idx[k]]]
        if used > capacity:
            return kept
    gained = 0
    execs_sum = 0.0
    longest = -np.inf
    for k in range(size):
        job = remaining[idx[k]]
        e = execs[job, col]
        execs_sum += e
        longest = max(longest, e)
        if wait <= slack[job, col]:
            gained += 1
    added = size * wait + execs_sum
    child_wait = wait + longest
    child_met = met + gained
    child_total = total + added
    checked = False
    if use_bound and r - size > 0:
        mu_left = mu_all
        for k in range(size):
            mu_left -= multipliers[remaining[idx[k]]]
        placed = jobs - (r - size)
        bucket = min(int(child_wait // step), to_go.shape[1] - 1)
        left = to_go.shape[0] - 1 - placed
        value = child_met - lam0 * (child_total + left * child_wait) + to_go[placed, bucket] + mu_left
        if value <= tolerance:
            return kept
        checked = True
    bounded[kept] = checked
    keys[kept] = lam * added - gained
    longest_out[kept] = longest
    for k in range(members.shape[1]):
        members[kept, k] = remaining[idx[k]] if k < size else -1
    new_wait[kept] = child_wait
    new_met[kept] = child_met
    new_total[kept] = child_total
    return kept + 1


#: The leader screen of `_expand_into` skips a batch only when its bound is this far below the
#: tolerance (its sum runs in another order than the exact test's; the exact test decides the rest).
SCREEN_MARGIN = 1e-6


@njit(cache=True)
def _expand_into(offset, keys, longest_out, members, new_wait, new_met, new_total, bounded, idx,
                 remaining, wait, met, total, lam, execs, slack, tokens, capacity, b_max,
                 use_bound, lam0, step, to_go, multipliers, jobs, tolerance):
    """Write the kept children of a node at ``offset``; returns how many.  The order is fixed later by
    `_canonical_sort`.  Without the Lagrangian test every batch is enumerated (lexicographic positions).
    With it, per batch size the batches are enumerated by their *leader* (the member last in the order
    (execution time, index) at that size, i.e. one that sets the batch's duration): the test's value is

        A + B(leader) + Σ_{j ∈ batch} reward_j,   reward_j = [wait ≤ slack_j] − λ₀·e_j − μ_j,
        A = met − λ₀·(total + |R|·wait) + Σ_R μ,   B(l) = to_go[placed, ⌊(wait + e_l)/Δ⌋] − λ₀·left·e_l,

    so a leader whose best batch (its own reward plus the best size − 1 rewards among the jobs before
    it) is below the tolerance is skipped whole, and the other members are chosen by a depth-first
    walk over those jobs in decreasing reward that stops once even the best completion falls below.
    Every batch it skips fails the exact test (up to `SCREEN_MARGIN`), so the kept set is the same."""
    r = remaining.size
    kept = offset
    mu_all = 0.0
    if use_bound:
        for k in range(r):
            mu_all += multipliers[remaining[k]]
    top = min(b_max, r)
    if not use_bound:
        for size in range(1, top + 1):
            for k in range(size):
                idx[k] = k
            while True:
                kept = _emit(kept, idx, size, keys, longest_out, members, new_wait, new_met, new_total, bounded,
                             remaining, wait, met, total, lam, execs, slack, tokens, capacity,
                             use_bound, lam0, step, to_go, multipliers, jobs, tolerance, mu_all)
                k = size - 1
                while k >= 0 and idx[k] == r - size + k:
                    k -= 1
                if k < 0:
                    break
                idx[k] += 1
                for k2 in range(k + 1, size):
                    idx[k2] = idx[k2 - 1] + 1
        return kept - offset
    base = met - lam0 * (total + r * wait) + mu_all
    reward = np.empty(r)
    by_time = np.empty(r, dtype=np.int64)
    pool = np.empty(r, dtype=np.int64)
    rank_of = np.empty(r, dtype=np.int64)
    chosen = np.empty(b_max, dtype=np.int64)
    for size in range(1, top + 1):
        col = size - 1
        if size == r:  # the leaf batch (all that is left): no test applies
            for k in range(size):
                idx[k] = k
            kept = _emit(kept, idx, size, keys, longest_out, members, new_wait, new_met, new_total, bounded,
                         remaining, wait, met, total, lam, execs, slack, tokens, capacity,
                         use_bound, lam0, step, to_go, multipliers, jobs, tolerance, mu_all)
            continue
        left = r - size
        placed = jobs - left
        times = np.empty(r)
        for k in range(r):
            job = remaining[k]
            times[k] = execs[job, col]
            reward[k] = (1.0 if wait <= slack[job, col] else 0.0) - lam0 * execs[job, col] - multipliers[job]
        order = np.argsort(times, kind="mergesort")  # by (time, position): ties by index
        for k in range(r):
            by_time[k] = order[k]
            rank_of[order[k]] = k
        by_reward = np.argsort(-reward[:r], kind="mergesort")  # best reward first
        need = size - 1
        for rank in range(need, r):
            leader = by_time[rank]
            lead_time = times[leader]
            bucket = min(int((wait + lead_time) // step), to_go.shape[1] - 1)
            head = base + to_go[placed, bucket] - lam0 * left * lead_time + reward[leader]
            # the jobs before the leader (in time order), best reward first
            count = 0
            if need > 0:
                for k in range(r):
                    position = by_reward[k]
                    if rank_of[position] < rank:
                        pool[count] = position
                        count += 1
            else:
                count = rank
            # best completion of `need` members from pool position p onwards: the next `need` rewards
            best = head
            for k in range(need):
                best += reward[pool[k]]
            if best <= tolerance - SCREEN_MARGIN:
                continue
            if need == 0:
                idx[0] = leader
                kept = _emit(kept, idx, size, keys, longest_out, members, new_wait, new_met, new_total, bounded,
                             remaining, wait, met, total, lam, execs, slack, tokens, capacity,
                             use_bound, lam0, step, to_go, multipliers, jobs, tolerance, mu_all)
                continue
            # depth-first choice of `need` pool positions p_0 < p_1 < … with the running reward bound
            depth = 0
            chosen[0] = -1
            partial = np.zeros(b_max + 1)
            while depth >= 0:
                chosen[depth] += 1
                p = chosen[depth]
                if p > count - (need - depth):
                    depth -= 1
                    continue
                optimistic = head + partial[depth]
                for k in range(p, p + need - depth):
                    optimistic += reward[pool[k]]
                if optimistic <= tolerance - SCREEN_MARGIN:
                    depth -= 1  # later positions have smaller rewards: no better completion here
                    continue
                partial[depth + 1] = partial[depth] + reward[pool[p]]
                if depth + 1 == need:
                    # members = the chosen pool jobs and the leader, ascending positions in `remaining`
                    for k in range(need):
                        idx[k] = pool[chosen[k]]
                    idx[need] = leader
                    for a in range(1, size):  # insertion sort of the size positions
                        v = idx[a]
                        b = a - 1
                        while b >= 0 and idx[b] > v:
                            idx[b + 1] = idx[b]
                            b -= 1
                        idx[b + 1] = v
                    kept = _emit(kept, idx, size, keys, longest_out, members, new_wait, new_met, new_total,
                                 bounded, remaining, wait, met, total, lam, execs, slack, tokens, capacity,
                                 use_bound, lam0, step, to_go, multipliers, jobs, tolerance, mu_all)
                else:
                    depth += 1
                    chosen[depth] = p
    return kept - offset


@njit(cache=True)
def _canonical_sort(start, count, keys, longest, members, new_wait, new_met, new_total, bounded):
    """Sort entries start … start+count−1 by (key, longest, size, members): the order in which
    ``list.sort`` on (key, longest) leaves `exact._ParametricSearch.children` (stable on batches
    generated by size, then lexicographically) — whatever order they were written in."""
    if count <= 1:
        return
    end = start + count
    width = members.shape[1]
    order = np.arange(count)
    for column in range(width - 1, -1, -1):
        values = members[start:end, column][order]
        order = order[np.argsort(values, kind="mergesort")]
    sizes = np.zeros(count, dtype=np.int64)
    for k in range(count):
        for column in range(width):
            if members[start + k, column] >= 0:
                sizes[k] += 1
    order = order[np.argsort(sizes[order], kind="mergesort")]
    order = order[np.argsort(longest[start:end][order], kind="mergesort")]
    order = order[np.argsort(keys[start:end][order], kind="mergesort")]
    order = order + start
    keys[start:end] = keys[order]
    longest[start:end] = longest[order]
    members[start:end] = members[order]
    new_wait[start:end] = new_wait[order]
    new_met[start:end] = new_met[order]
    new_total[start:end] = new_total[order]
    bounded[start:end] = bounded[order]


@njit(cache=True)
def expand_batches(remaining, wait, met, total, lam, execs, slack, tokens, capacity, b_max,
                   use_bound, lam0, step, to_go, multipliers, jobs, tolerance):
    """Children of a node in search order: (keys, longest, members (k × b_max, −1 padded), new_wait,
    new_met, new_total, bounded) with ``bounded[k]`` = True when the Lagrangian test already passed."""
    width = _batch_count(remaining.size, b_max)
    keys = np.empty(width)
    longest_out = np.empty(width)
    members = np.full((width, b_max), -1, dtype=np.int64)
    new_wait = np.empty(width)
    new_met = np.empty(width, dtype=np.int64)
    new_total = np.empty(width)
    bounded = np.zeros(width, dtype=np.bool_)
    kept = _expand_into(0, keys, longest_out, members, new_wait, new_met, new_total, bounded,
                        np.empty(b_max, dtype=np.int64),
                        remaining, wait, met, total, lam, execs, slack, tokens, capacity, b_max,
                        use_bound, lam0, step, to_go, multipliers, jobs, tolerance)
    _canonical_sort(0, kept, keys, longest_out, members, new_wait, new_met, new_total, bounded)
    return (keys[:kept], longest_out[:kept], members[:kept], new_wait[:kept], new_met[:kept],
            new_total[:kept], bounded[:kept])


@njit(cache=True)
def batched_waiting_bound(mins, b_max):
    """`exact.batched_waiting_bound` (``mins`` ascending), compiled with the same arithmetic."""
    r = mins.size
    if r <= 1:
        return 0.0
    best = np.inf
    for q in range(-(-r // b_max), r + 1):
        floor_q = 0.0
        value = 0.0
        for k in range(q):
            rank = r - (q - k - 1) * b_max - 1
            m_k = mins[k]
            duration = mins[rank] if rank >= 0 and mins[rank] > m_k else m_k
            behind = r - (k + 1) * b_max
            behind = max(behind, q - k - 1)
            value += duration * behind
            floor_q += m_k * (q - k - 1)
        best = min(best, value)
        if floor_q >= best:
            break
    return best


@njit(cache=True)
def _node_survives(mask, wait, met, total, checked, lam, memo_size, memo, lab_wait, lab_met, lab_total, lab_next,
                   latency_cache, max_labels, b_max, use_bound, lam0, step, to_go, multipliers, tolerance,
                   min_exec, by_min_exec, latest_start, due, proc, by_due, scratch, mins_buf):
    """The tests of `exact._ParametricSearch.visit` for a non-leaf node, in its order and arithmetic:
    Lagrangian bound (unless ``checked``), n_UB / t_LB, then the dominance memo (inserting the
    node's label when it survives).  Returns (survives, memo_size)."""
    jobs = min_exec.size
    count = 0
    for i in range(jobs):
        if (mask >> i) & 1:
            count += 1
    if use_bound and not checked:
        mu_left = 0.0
        for i in range(jobs):
            if (mask >> i) & 1:
                mu_left += multipliers[i]
        placed = jobs - count
        bucket = min(int(wait // step), to_go.shape[1] - 1)
        left = to_go.shape[0] - 1 - placed
        if met - lam0 * (total + left * wait) + to_go[placed, bucket] + mu_left <= tolerance:
            return False, memo_size
    if mask in latency_cache:
        cached = latency_cache[mask]
    else:
        c = 0
        for k in range(jobs):
            i = by_min_exec[k]
            if (mask >> i) & 1:
                mins_buf[c] = min_exec[i]
                c += 1
        mins = mins_buf[:c]
        spent = 0.0
        for k in range(c):
            spent += mins[k]
        waiting = batched_waiting_bound(mins, b_max)
        sequence = size_sequence_waiting_bound(mins, b_max)
        waiting = max(waiting, sequence)
        cached = spent + waiting
        if len(latency_cache) < max_labels:
            latency_cache[mask] = cached
    more_latency = count * wait + cached
    more_met = max_on_time(mask, wait, latest_start, due, proc, by_due, b_max - 1, scratch)
    if met + more_met - lam * (total + more_latency) <= tolerance:
        return False, memo_size
    value = met - lam * total
    head = -1
    if mask in memo:
        head = memo[mask]
    label = head
    while label >= 0:
        if lab_wait[label] <= wait and lab_met[label] - lam * lab_total[label] >= value:
            return False, memo_size
        label = lab_next[label]
    if memo_size < max_labels:
        lab_wait[memo_size] = wait
        lab_met[memo_size] = met
        lab_total[memo_size] = total
        lab_next[memo_size] = head
        memo[mask] = memo_size
        memo_size += 1
    return True, memo_size


#: `branch_and_bound` return codes.
SEARCH_DONE, SEARCH_PAUSED = 0, 1
#: Slots of its integer state: depth, nodes, labels in the memo, a plan found, batches of that plan, root visited.
STATE_DEPTH, STATE_NODES, STATE_LABELS, STATE_FOUND, STATE_BATCHES, STATE_STARTED = 0, 1, 2, 3, 4, 5


@njit(cache=True)
def branch_and_bound(state, lam_state, frame_mask, frame_wait, frame_met, frame_total, frame_start, frame_end,
                     frame_next, keys, longest, members, new_wait, new_met, new_total, bounded,
                     memo, lab_wait, lab_met, lab_total, lab_next, latency_cache, max_labels,
                     execs, slack, tokens, capacity, b_max, use_bound, lam0, step, to_go, multipliers, tolerance,
                     min_exec, by_min_exec, latest_start, due, proc, by_due, best_order, best_sizes, budget):
    """The depth-first search of `exact._ParametricSearch.visit` at b_max ≥ 2, iteratively, until the
    tree is done or ``budget`` nodes have been counted (then it pauses with its whole state in the
    arrays passed in, and a later call resumes it).  ``lam_state`` = [λ, n, t of the best plan].
    Frame d holds a node (mask, wait, met, total) and its children (arena entries start … end−1,
    sorted, ``next`` the first not yet taken); a child is counted as a node when taken, before its
    tests, so a pause never loses one."""
    jobs = execs.shape[0]
    idx = np.empty(b_max, dtype=np.int64)
    scratch = np.empty(jobs)
    mins_buf = np.empty(jobs)
    remaining = np.empty(jobs, dtype=np.int64)
    lam = lam_state[0]
    depth = state[STATE_DEPTH]
    nodes = state[STATE_NODES]
    memo_size = state[STATE_LABELS]
    if state[STATE_STARTED] == 0:
        state[STATE_STARTED] = 1
        nodes += 1
        full = (np.int64(1) << jobs) - 1
        survives, memo_size = _node_survives(
            full, 0.0, 0, 0.0, False, lam, memo_size, memo, lab_wait, lab_met, lab_total, lab_next, latency_cache,
            max_labels, b_max, use_bound, lam0, step, to_go, multipliers, tolerance, min_exec, by_min_exec,
            latest_start, due, proc, by_due, scratch, mins_buf)
        if survives:
            for i in range(jobs):
                remaining[i] = i
            count = _expand_into(0, keys, longest, members, new_wait, new_met, new_total, bounded, idx,
                                 remaining, 0.0, 0, 0.0, lam, execs, slack, tokens, capacity, b_max,
                                 use_bound, lam0, step, to_go, multipliers, jobs, tolerance)
            _canonical_sort(0, count, keys, longest, members, new_wait, new_met, new_total, bounded)
            frame_mask[0] = full
            frame_wait[0] = 0.0
            frame_met[0] = 0
            frame_total[0] = 0.0
            frame_start[0] = 0
            frame_end[0] = count
            frame_next[0] = 0
            depth = 1
    status = SEARCH_DONE
    while depth > 0:
        f = depth - 1
        if frame_next[f] == frame_end[f]:
            depth -= 1
            continue
        if nodes >= budget:
            status = SEARCH_PAUSED
            break
        k = frame_next[f]
        frame_next[f] = k + 1
        nodes += 1
        mask = frame_mask[f]
        for m in range(b_max):
            j = members[k, m]
            if j >= 0:
                mask &= ~(np.int64(1) << j)
        wait, met, total = new_wait[k], new_met[k], new_total[k]
        if mask == 0:  # a complete plan: a new incumbent if it beats λ
            if met - lam * total > tolerance:
                placed = 0
                batches = 0
                for d in range(depth):
                    chosen = frame_next[d] - 1
                    size = 0
                    for m in range(b_max):
                        j = members[chosen, m]
                        if j >= 0:
                            best_order[placed] = j
                            placed += 1
                            size += 1
                    best_sizes[batches] = size
                    batches += 1
                lam_state[1] = met
                lam_state[2] = total
                lam = met / total
                state[STATE_FOUND] = 1
                state[STATE_BATCHES] = batches
            continue
        survives, memo_size = _node_survives(
            mask, wait, met, total, bounded[k], lam, memo_size, memo, lab_wait, lab_met, lab_total, lab_next,
            latency_cache, max_labels, b_max, use_bound, lam0, step, to_go, multipliers, tolerance, min_exec,
            by_min_exec, latest_start, due, proc, by_due, scratch, mins_buf)
        if not survives:
            continue
        r = 0
        for i in range(jobs):
            if (mask >> i) & 1:
                remaining[r] = i
                r += 1
        top = frame_end[f]
        count = _expand_into(top, keys, longest, members, new_wait, new_met, new_total, bounded, idx,
                             remaining[:r], wait, met, total, lam, execs, slack, tokens, capacity, b_max,
                             use_bound, lam0, step, to_go, multipliers, jobs, tolerance)
        _canonical_sort(top, count, keys, longest, members, new_wait, new_met, new_total, bounded)
        frame_mask[depth] = mask
        frame_wait[depth] = wait
        frame_met[depth] = met
        frame_total[depth] = total
        frame_start[depth] = top
        frame_end[depth] = top + count
        frame_next[depth] = top
        depth += 1
    lam_state[0] = lam
    state[STATE_DEPTH] = depth
    state[STATE_NODES] = nodes
    state[STATE_LABELS] = memo_size
    return status
