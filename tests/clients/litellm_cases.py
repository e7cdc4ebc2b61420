"""litellm against a formcast server (run with the frameworks client venv's python).

Case ``response_format``: ``litellm.completion(model="openai/<name>", api_base=...,
response_format=Person)``; litellm turns the model into a ``json_schema`` response format
(the request body it sent is recorded by a pre-call hook, so the test can check that it did
not fall back to asking in the prompt) and the reply's content is parsed here with
``Person.model_validate_json``.
"""

from __future__ import annotations

import os
from typing import Any

# litellm fetches its model price map from the internet at import unless told not to
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import litellm  # noqa: E402
from clients_shared import MAX_TOKENS, PROMPT, Person, run_case, server  # noqa: E402
from litellm.integrations.custom_logger import CustomLogger  # noqa: E402


class RequestRecorder(CustomLogger):
    """Keeps the body of each request litellm sends."""

    def __init__(self) -> None:
        super().__init__()
        self.bodies: list[dict[str, Any]] = []

    def log_pre_api_call(self, model: str, messages: Any, kwargs: dict[str, Any]) -> None:
        self.bodies.append(kwargs["additional_args"]["complete_input_dict"])


def response_format() -> dict[str, Any]:
    base_url, model_name = server()
    recorder = RequestRecorder()
    litellm.callbacks = [recorder]
    response = litellm.completion(
        model=f"openai/{model_name}",
        api_base=base_url,
        api_key="unused",
        messages=[{"role": "user", "content": PROMPT}],
        response_format=Person,
        max_tokens=MAX_TOKENS,
        temperature=0,
        num_retries=0,
        timeout=300,
    )
    content = response.choices[0].message.content
    person = Person.model_validate_json(content)
    return {
        "type": type(person).__name__,
        "result": person.model_dump(mode="json"),
        "content": content,
        "sent_response_format": [body.get("response_format") for body in recorder.bodies],
    }


CASES = {"response_format": response_format}

if __name__ == "__main__":
    run_case(CASES, ["litellm", "openai"])
