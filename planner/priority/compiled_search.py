"""numba kernels of the branch-and-bound (`planner.priority.exact`) at b_max ≥ 2 (imported lazily).

`expand_batches` generates the children of a node — every batch of 1..b_max remaining jobs within
the token capacity, in the order of ``itertools.combinations`` per size — with the same arithmetic as
`exact._ParametricSearch.children` (so the same keys, hence the same search order after the stable
sort), and, when a Lagrangian table is given, drops every non-leaf child whose Lagrangian node bound
(`lagrangian.LagrangianBound.node_bound`, same arithmetic) is ≤ the tolerance: that child would be
pruned by the same test as the first thing its visit does, and the test depends on nothing that
changes during the search (λ₀ and μ are fixed), so dropping it here changes no result — it only
spares the Python-level visit (at N = 30, b_max = 2, ~90 % of all visits ended there).

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


@njit(cache=True)
def _expand_into(offset, keys, longest_out, members, new_wait, new_met, new_total, bounded, idx,
                 remaining, wait, met, total, lam, execs, slack, tokens, capacity, b_max,
                 use_bound, lam0, step, to_go, multipliers, jobs, tolerance):
    """Write the kept children of a node at ``offset`` (generation order); returns how many."""
    r = remaining.size
    buckets = to_go.shape[1]
    kept = offset
    mu_all = 0.0
    if use_bound:
        for k in range(r):
            mu_all += multipliers[remaining[k]]
    for size in range(1, min(b_max, r) + 1):
        col = size - 1
        for k in range(size):
            idx[k] = k
        while True:
            fits = True
            if capacity < np.inf:
                used = 0
                for k in range(size):
                    used += tokens[remaining[idx[k]]]
                fits = used <= capacity
            if fits:
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
                keep = True
                checked = False
                if use_bound and r - size > 0:
                    mu_left = mu_all
                    for k in range(size):
                        mu_left -= multipliers[remaining[idx[k]]]
                    placed = jobs - (r - size)
                    bucket = min(int(child_wait // step), buckets - 1)
                    left = to_go.shape[0] - 1 - placed
                    value = child_met - lam0 * (child_total + left * child_wait) + to_go[placed, bucket] + mu_left
                    keep = value > tolerance
                    checked = True
                if keep:
                    bounded[kept] = checked
                    keys[kept] = lam * added - gained
                    longest_out[kept] = longest
                    for k in range(members.shape[1]):
                        members[kept, k] = remaining[idx[k]] if k < size else -1
                    new_wait[kept] = child_wait
                    new_met[kept] = child_met
                    new_total[kept] = child_total
                    kept += 1
            # next combination of positions (lexicographic, as itertools.combinations)
            k = size - 1
            while k >= 0 and idx[k] == r - size + k:
                k -= 1
            if k < 0:
                break
            idx[k] += 1
            for k2 in range(k + 1, size):
                idx[k2] = idx[k2 - 1] + 1
    return kept - offset


@njit(cache=True)
def expand_batches(remaining, wait, met, total, lam, execs, slack, tokens, capacity, b_max,
                   use_bound, lam0, step, to_go, multipliers, jobs, tolerance):
    """Children of a node: (keys, longest, members (k × b_max, −1 padded), new_wait, new_met,
    new_total, bounded) with ``bounded[k]`` = True when the Lagrangian test already passed."""
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
def _stable_sort_region(start, count, keys, longest, members, new_wait, new_met, new_total, bounded):
    """Sort entries start … start+count−1 by (key, longest), stably (as ``np.lexsort``)."""
    if count <= 1:
        return
    end = start + count
    first = np.argsort(longest[start:end], kind="mergesort")
    second = np.argsort(keys[start:end][first], kind="mergesort")
    order = first[second] + start
    keys[start:end] = keys[order]
    longest[start:end] = longest[order]
    members[start:end] = members[order]
    new_wait[start:end] = new_wait[order]
    new_met[start:end] = new_met[order]
    new_total[start:end] = new_total[order]
    bounded[start:end] = bounded[order]


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
            _stable_sort_region(0, count, keys, longest, members, new_wait, new_met, new_total, bounded)
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
        _stable_sort_region(top, count, keys, longest, members, new_wait, new_met, new_total, bounded)
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
