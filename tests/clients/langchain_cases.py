"""langchain-openai against a formcast server (run with the frameworks client venv's python).

Cases: ``json_schema`` and ``function_calling`` (``ChatOpenAI.with_structured_output`` with
each method), ``bind_tools`` (a tool forced with ``tool_choice="any"``: the reply's
``tool_calls``). No retries (``max_retries=0``).
"""

from __future__ import annotations

from typing import Any

from clients_shared import (
    MAX_TOKENS,
    PROMPT,
    WEATHER_PROMPT,
    Person,
    WeatherQuery,
    run_case,
    server,
)
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI


def _chat() -> ChatOpenAI:
    base_url, model_name = server()
    return ChatOpenAI(
        model=model_name,
        base_url=base_url,
        api_key="unused",
        temperature=0,
        max_tokens=MAX_TOKENS,
        max_retries=0,
        timeout=300,
    )


def _structured(method: str) -> dict[str, Any]:
    person = _chat().with_structured_output(Person, method=method).invoke(PROMPT)
    return {"type": type(person).__name__, "result": person.model_dump(mode="json")}


@tool(args_schema=WeatherQuery)
def get_weather(city: str, unit: str) -> str:
    """Current weather in a city."""
    return f"sunny in {city} ({unit})"


def bind_tools() -> dict[str, Any]:
    message = _chat().bind_tools([get_weather], tool_choice="any").invoke(WEATHER_PROMPT)
    calls = [{"name": call["name"], "args": call["args"]} for call in message.tool_calls]
    return {"tool_calls": calls, "invalid_tool_calls": len(message.invalid_tool_calls)}


CASES = {
    "json_schema": lambda: _structured("json_schema"),
    "function_calling": lambda: _structured("function_calling"),
    "bind_tools": bind_tools,
}

if __name__ == "__main__":
    run_case(CASES, ["langchain-openai", "langchain-core", "openai"])
