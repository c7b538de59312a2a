"""The one request type (`planner.core.types.Request`) and its planned form (`PlannedRequest`)."""

from __future__ import annotations

import math

import pytest
from pydantic import ValidationError

from planner.core.io import MAX_REQUEST_TOKENS
from planner.core.types import PlannedRequest, Request, Workload

BASE = {"request_id": "r1", "arrival_s": 0.5, "input_tokens": 10, "output_tokens": 3}


def test_units_are_in_the_field_names_and_a_planned_request_is_a_request():
    assert set(Request.model_fields) == {"request_id", "arrival_s", "input_tokens", "output_tokens"}
    planned = PlannedRequest(**BASE, predicted_output_tokens=5, slo_class="chat")
    assert isinstance(planned, Request)
    assert set(PlannedRequest.model_fields) - set(Request.model_fields) == {"predicted_output_tokens", "slo_class"}
    plain = planned.as_request()
    assert type(plain) is Request and plain.model_dump() == BASE
    assert plain.kv_need == 10 + 3 - 1


@pytest.mark.parametrize("field, value", [
    ("input_tokens", True), ("output_tokens", False), ("input_tokens", 0),
    ("output_tokens", MAX_REQUEST_TOKENS + 1), ("arrival_s", -1.0), ("arrival_s", math.nan),
    ("arrival_s", math.inf), ("arrival_s", True), ("request_id", ""),
])
def test_bad_values_are_refused_naming_the_field(field, value):
    with pytest.raises(ValidationError) as err:
        Request(**{**BASE, field: value})
    assert err.value.errors()[0]["loc"][0] == field


def test_a_planned_request_needs_its_prediction_and_a_plain_one_refuses_it():
    with pytest.raises(ValidationError) as err:
        PlannedRequest(**BASE)
    assert err.value.errors()[0]["loc"][0] == "predicted_output_tokens"
    with pytest.raises(ValidationError) as err:
        Request(**BASE, predicted_output_tokens=4)  # extra keys are errors, never silently dropped
    assert err.value.errors()[0]["loc"][0] == "predicted_output_tokens"
    assert MAX_REQUEST_TOKENS == PlannedRequest(**BASE, predicted_output_tokens=MAX_REQUEST_TOKENS).predicted_output_tokens


def test_a_workload_holds_planned_requests_with_unique_ids():
    r = PlannedRequest(**BASE, predicted_output_tokens=4)
    assert Workload(requests=(r,)).predicted_output_tokens.tolist() == [4]
    with pytest.raises(ValidationError, match="duplicate request_id"):
        Workload(requests=(r, r))
