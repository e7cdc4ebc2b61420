"""instructor against a formcast server (run with the instructor client venv's python).

Cases: ``json_schema`` (Mode.JSON_SCHEMA: ``response_format`` json_schema), ``tools``
(Mode.TOOLS: one forced tool call whose arguments are the model), ``partial_json_schema`` and
``partial_tools`` (``create_partial`` streaming in each mode: every partial snapshot).
One attempt each (``max_retries=0``: instructor 1.x counts retries after the first attempt):
a retry would hide an invalid first answer.
"""

from __future__ import annotations

from typing import Any

import instructor
import openai
from clients_shared import MAX_TOKENS, PROMPT, Person, run_case, server


def _client(mode: instructor.Mode) -> Any:
    base_url, _ = server()
    raw = openai.OpenAI(base_url=base_url, api_key="unused", max_retries=0, timeout=300)
    return instructor.from_openai(raw, mode=mode)


def _create(mode: instructor.Mode) -> dict[str, Any]:
    person = _client(mode).chat.completions.create(
        model=server()[1],
        response_model=Person,
        messages=[{"role": "user", "content": PROMPT}],
        max_tokens=MAX_TOKENS,
        temperature=0,
        max_retries=0,
    )
    return {"type": type(person).__name__, "result": person.model_dump(mode="json")}


def _partial(mode: instructor.Mode) -> dict[str, Any]:
    stream = _client(mode).chat.completions.create_partial(
        model=server()[1],
        response_model=Person,
        messages=[{"role": "user", "content": PROMPT}],
        max_tokens=MAX_TOKENS,
        temperature=0,
        max_retries=0,
        # instructor validates the completed snapshot with model_validate(dict, strict=True),
        # where a JSON string is not an Enum instance: strict=False (JSON mode would accept it)
        strict=False,
    )
    snapshots = [snapshot.model_dump(mode="json") for snapshot in stream]
    return {"snapshots": snapshots}


CASES = {
    "json_schema": lambda: _create(instructor.Mode.JSON_SCHEMA),
    "tools": lambda: _create(instructor.Mode.TOOLS),
    "partial_json_schema": lambda: _partial(instructor.Mode.JSON_SCHEMA),
    "partial_tools": lambda: _partial(instructor.Mode.TOOLS),
}

if __name__ == "__main__":
    run_case(CASES, ["instructor", "openai"])
