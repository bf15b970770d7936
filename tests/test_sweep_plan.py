"""The sweep plan's one definition (agent/bench/plan.py): defaults, limits, one-line errors,
and the console's SweepPlan reading the same ones."""

from __future__ import annotations

import pytest

from dsv4tui.agent.bench import plan as sweep_plan
from dsv4tui.core.config import SweepPlan


def test_defaults_are_the_configs() -> None:
    assert SweepPlan().model_dump(mode="json") == sweep_plan.defaults()
    assert sweep_plan.make({}) == sweep_plan.defaults()


@pytest.mark.parametrize(("given", "message"), [
    ({"nope": 1}, "unknown keys nope"),
    ({"levels": [], "rates": []}, "levels: at least one C:n level or one rate:n level"),
    ({"levels": [[8, 4]]}, "levels: 8:4: n must be at least C"),
    ({"rates": [[0, 10]]}, "rates: [0, 10] is not [rate, n]"),
    ({"input_len": 0}, "input_len must be an integer >= 1"),
    ({"seed": 1.5}, "seed must be an integer >= 0 or null"),
    ({"stall_timeout_s": 0}, "stall_timeout_s must be > 0"),
    ({"max_error_rate": 2}, "max_error_rate must be between 0 and 1"),
    ({"temperature": -1}, "temperature must be >= 0"),
    ({"allow_busy": "yes"}, "allow_busy must be true or false"),
    ({"endpoint": "x"}, "endpoint must be chat or completions"),
    ({"goodput": {"ttft_ms": 0}}, "goodput must map ttft_ms, tpot_ms, e2el_ms"),
    ({"dataset_prompts": [["", 3]]}, "dataset_prompts[0] is not [prompt, output_len or null]"),
])
def test_a_bad_plan_says_what_is_wrong_in_one_line(given: dict, message: str) -> None:
    with pytest.raises(ValueError) as err:
        sweep_plan.make(given)
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_the_config_refuses_what_the_agent_refuses() -> None:
    """A limit written once: the console's model takes the agent's."""
    for key, f in sweep_plan.FIELDS.items():
        if f.kind in ("int", "num") and f.low is not None:
            with pytest.raises(ValueError):
                SweepPlan.model_validate({key: f.low - 1})
