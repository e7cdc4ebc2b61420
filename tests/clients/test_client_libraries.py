"""instructor, langchain-openai, pydantic-ai and litellm against `formcast serve` on loopback.

Each test runs one case of a ``*_cases.py`` script in its client venv (see conftest.py) and
validates what the library returned against the pydantic model it was asked for (structure,
not values: the model is SmolLM2-135M). Every case makes one attempt (retries off), so a
first answer the library cannot use fails the test.
"""

from __future__ import annotations

from typing import Any

import pytest
from clients_shared import Person, WeatherQuery

pytestmark = pytest.mark.slow

STRUCTURED_CASES = [
    ("instructor", "instructor_cases.py", "json_schema"),
    ("instructor", "instructor_cases.py", "tools"),
    ("frameworks", "langchain_cases.py", "json_schema"),
    ("frameworks", "langchain_cases.py", "function_calling"),
]


def assert_person(payload: dict[str, Any]) -> None:
    """The library returned a ``Person``, and its fields validate as one."""
    assert payload["type"] == "Person", payload
    person = Person.model_validate(payload["result"])
    assert person.model_dump(mode="json") == payload["result"]


@pytest.mark.parametrize(
    ("group", "script", "case"),
    STRUCTURED_CASES,
    ids=[f"{script.removesuffix('_cases.py')}-{case}" for _, script, case in STRUCTURED_CASES],
)
def test_structured_output_validates(clients, group, script, case):
    assert_person(clients.run(group, script, case))


@pytest.mark.parametrize(
    ("case", "answer_part", "other_part"),
    [("tool_output", "ToolCallPart", "TextPart"), ("native_output", "TextPart", "ToolCallPart")],
)
def test_pydantic_ai_output_modes(clients, case, answer_part, other_part):
    payload = clients.run("frameworks", "pydantic_ai_cases.py", case)
    assert_person(payload)
    # tool output: the answer is a call of the output tool; native: the answer is text; and
    # the first answer was accepted (no retry prompt)
    parts = payload["parts"]
    assert answer_part in parts and other_part not in parts, parts
    assert "RetryPromptPart" not in parts, parts


def test_litellm_response_format_model(clients):
    payload = clients.run("frameworks", "litellm_cases.py", "response_format")
    assert_person(payload)
    # litellm sent the model as a json_schema response format (its $defs included), not as
    # an instruction in the prompt
    (sent,) = payload["sent_response_format"]
    assert sent["type"] == "json_schema", sent
    assert set(sent["json_schema"]["schema"]["$defs"]) == {"Address", "Priority"}, sent


def test_langchain_bind_tools_makes_a_valid_call(clients):
    payload = clients.run("frameworks", "langchain_cases.py", "bind_tools")
    assert payload["invalid_tool_calls"] == 0, payload
    # tool_choice="any" is "required": one call or, parallel_tool_calls being true by default
    # (as in OpenAI's API), several, each valid
    names = [call["name"] for call in payload["tool_calls"]]
    assert names and set(names) == {"get_weather"}, payload
    for call in payload["tool_calls"]:
        WeatherQuery.model_validate(call["args"])


def _is_prefix_of(partial: Any, final: Any) -> bool:
    """A streamed snapshot is consistent with the final object: every field it has is
    missing (None), equal, or a prefix of the final value (strings and integers grow)."""
    if partial is None:
        return True
    if isinstance(final, dict):
        return isinstance(partial, dict) and all(
            _is_prefix_of(value, final.get(key)) for key, value in partial.items()
        )
    if isinstance(final, str):
        return isinstance(partial, str) and final.startswith(partial)
    if isinstance(final, int):
        return isinstance(partial, int) and str(final).startswith(str(partial))
    return partial == final


@pytest.mark.parametrize(
    ("case", "min_snapshots"),
    # JSON_SCHEMA content and TOOLS-mode tool-call arguments both stream token by token
    # (see formcast.server.chat_completion), so instructor sees growing snapshots in both
    [("partial_json_schema", 3), ("partial_tools", 3)],
)
def test_instructor_create_partial_streams_snapshots(clients, case, min_snapshots):
    snapshots = clients.run("instructor", "instructor_cases.py", case)["snapshots"]
    distinct = [s for k, s in enumerate(snapshots) if k == 0 or s != snapshots[k - 1]]
    assert len(distinct) >= min_snapshots, snapshots
    final = Person.model_validate(snapshots[-1]).model_dump(mode="json")
    assert final == snapshots[-1]
    if min_snapshots > 1:  # earlier snapshots are incomplete
        assert any(None in (s["name"], s["age"], s["priority"]) for s in snapshots[:-1])
    for snapshot in snapshots:  # and each is a prefix of the final object
        assert _is_prefix_of(snapshot, final), (snapshot, final)
