"""A seeded sample of the bad-input corpus (`benchmarks/fuzz_corpus.py`), run as real subprocesses.

Every variant must end in exit 0 (with ``--json``: one JSON object on stdout) or in a non-zero exit
with exactly one stderr line — never a traceback, a hang (30 s guard) or a memory blow-up (2 GiB
address-space cap).  The whole corpus is run by ``benchmarks/fuzz_run.py``; this is its smoke test.
"""

from __future__ import annotations

import dataclasses
import random
import sys
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest

from support import REPO

sys.path.insert(0, str(REPO / "benchmarks"))
from fuzz_corpus import CATEGORIES, build_corpus, write_corpus  # noqa: E402
from fuzz_run import run_one  # noqa: E402

SEED = 0
SAMPLE = 100
TIMEOUT_S = 30.0
MEMORY_BYTES = 2 << 30


@pytest.fixture(scope="module")
def corpus() -> list:
    return build_corpus(SEED)


#: Capacity bases whose valid variants run several fleet searches (size classes, several models): their
#: input handling is covered by their own bad-input tests and by the whole corpus in the benchmark.
SLOW_BASES = ("instances/capacity/llama2-70b-sharegpt-size-classes.yaml",
              "instances/capacity/two-models-shared-inventory.yaml")


def _sample(variants: list) -> list:
    rng = random.Random(22)
    variants = [v for v in variants if v.base not in SLOW_BASES]
    assert len(variants) >= 1000
    by_category = {c: [v for v in variants if v.category == c] for c in CATEGORIES}
    picked = []
    for c in CATEGORIES:  # every category, then the rest at random
        picked += rng.sample(by_category[c], min(4, len(by_category[c])))
    taken = {v.id for v in picked}
    rest = [v for v in variants if v.id not in taken]
    picked += rng.sample(rest, SAMPLE - len(picked))
    # a shorter solve than the benchmark's (the point is the input handling); copies: the corpus is shared
    return [dataclasses.replace(v, argv=[("2" if k and v.argv[k - 1] == "--time-limit" else a)
                                         for k, a in enumerate(v.argv)]) for v in picked]


def test_the_corpus_is_deterministic_and_covers_every_family_and_category(corpus):
    first, second = corpus, build_corpus(SEED)
    assert len(first) >= 1000
    assert [(v.id, v.mutation, v.argv, v.files) for v in first] == [(v.id, v.mutation, v.argv, v.files) for v in second]
    assert set(Counter(v.category for v in first)) == set(CATEGORIES)
    assert set(Counter(v.family for v in first)) == {"placement", "batching", "priority", "queueing", "deployment",
                                                      "routing", "capacity"}
    other = build_corpus(SEED + 1)
    assert [(v.mutation, v.files) for v in other] != [(v.mutation, v.files) for v in first]  # the seed matters


def test_a_seeded_sample_of_the_corpus_is_exit_0_or_one_line(corpus, tmp_path):
    sample = _sample(corpus)
    write_corpus(sample, tmp_path)

    def run(v):  # noqa: ANN001, ANN202
        return v, run_one(tmp_path / v.id, v.argv, TIMEOUT_S, MEMORY_BYTES, "--json" in v.argv)

    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(run, sample))
    bad = [f"{v.id} ({v.mutation}): {r['outcome']}: {' | '.join(r['stderr_tail'])[:300]}"
           for v, r in results if r["outcome"] not in ("exit 0", "one-line error")]
    assert not bad, "\n".join(bad)
    outcomes = Counter(r["outcome"] for _, r in results)
    assert outcomes["one-line error"] > 0 and outcomes["exit 0"] > 0, outcomes  # both kinds are exercised
