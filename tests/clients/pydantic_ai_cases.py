"""pydantic-ai against a formcast server (run with the frameworks client venv's python).

Cases: ``tool_output`` (``Agent(output_type=Person)``: pydantic-ai's default, the output is
a call of its ``final_result`` tool) and ``native_output`` (``NativeOutput(Person)``:
``response_format`` json_schema). ``output_retries=0``: the first answer must validate.
"""

from __future__ import annotations

from typing import Any

from clients_shared import MAX_TOKENS, PROMPT, Person, run_case, server
from pydantic_ai import Agent, NativeOutput
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider


def _run(output_type: Any) -> dict[str, Any]:
    base_url, model_name = server()
    provider = OpenAIProvider(base_url=base_url, api_key="unused")
    agent = Agent(
        OpenAIChatModel(model_name, provider=provider),
        output_type=output_type,
        retries=0,
        model_settings={"max_tokens": MAX_TOKENS, "temperature": 0.0, "timeout": 300},
    )
    result = agent.run_sync(PROMPT)
    parts = [type(part).__name__ for message in result.all_messages() for part in message.parts]
    return {
        "type": type(result.output).__name__,
        "result": result.output.model_dump(mode="json"),
        "parts": parts,
    }


CASES = {
    "tool_output": lambda: _run(Person),
    "native_output": lambda: _run(NativeOutput(Person)),
}

if __name__ == "__main__":
    run_case(CASES, ["pydantic-ai-slim", "openai"])
