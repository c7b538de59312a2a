"""`planner.core.phases`: the one pipeline driver (order, early stop, skipped phases, timing, interrupt)."""
from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from planner.core import interrupt
from planner.core.phases import Phase, phase_names, run_phases


@dataclass
class _State:
    log: list[str] = field(default_factory=list)
    skip_b: bool = False
    stop_at: str = "c"
    phase_seconds: dict[str, float] = field(default_factory=dict)


def _step(name: str):
    def run(state: _State):
        state.log.append(name)
        return f"done at {name}" if state.stop_at == name else None
    return run


PHASES = [Phase("a", _step("a")), Phase("b", _step("b"), when=lambda s: not s.skip_b), Phase("c", _step("c")),
          Phase("d", _step("d"))]


def test_phases_run_in_order_until_one_returns_and_are_timed():
    state = _State()
    assert run_phases(PHASES, state) == "done at c"
    assert state.log == ["a", "b", "c"]
    assert list(state.phase_seconds) == ["a", "b", "c"] and all(v >= 0 for v in state.phase_seconds.values())
    assert phase_names(PHASES) == ["a", "b", "c", "d"]


def test_a_phase_whose_condition_is_false_is_skipped_and_not_timed():
    state = _State(skip_b=True, stop_at="d")
    assert run_phases(PHASES, state) == "done at d"
    assert state.log == ["a", "c", "d"] and "b" not in state.phase_seconds


def test_a_pipeline_without_a_final_value_is_an_error():
    with pytest.raises(RuntimeError, match="without a result"):
        run_phases(PHASES, _State(stop_at="none"))


def test_an_interrupt_request_stops_at_the_next_phase_boundary(monkeypatch):
    state = _State()

    def press_ctrl_c(s: _State):
        s.log.append("a")
        monkeypatch.setattr(interrupt, "_REQUESTED", type("E", (), {"is_set": staticmethod(lambda: True)})())

    with pytest.raises(KeyboardInterrupt):
        run_phases([Phase("a", press_ctrl_c), Phase("b", _step("b"))], state)
    assert state.log == ["a"]
