"""An agent that may call several tools in one action, run concurrently.

With ``parallel_tool_calls=True`` an action is a call, a final answer, or
``{"tool_calls": [...]}``: several calls (each constrained to its tool's signature) that the
agent runs in threads and answers in one message. Here the tools are slow lookups (a weather
service and a clock with a simulated latency), so asking for several cities at once saves time.

Run: ``python examples/parallel_tools.py``
"""

from __future__ import annotations

import time
from typing import Annotated, Literal

from pydantic import Field

import formcast

City = Literal["Paris", "Tokyo", "Lima", "Oslo"]
WEATHER = {"Paris": "12 C, rain", "Tokyo": "18 C, clear", "Lima": "22 C, fog", "Oslo": "-3 C, snow"}
UTC_OFFSET = {"Paris": 1, "Tokyo": 9, "Lima": -5, "Oslo": 1}
LATENCY_S = 0.2


def get_weather(city: City) -> str:
    """The current weather in a city."""
    time.sleep(LATENCY_S)
    return WEATHER[city]


def local_hour(city: City, utc_hour: Annotated[int, Field(ge=0, le=23)]) -> int:
    """The local hour in a city when it is utc_hour o'clock UTC."""
    time.sleep(LATENCY_S)
    return (utc_hour + UTC_OFFSET[city]) % 24


TASKS = ["What is the weather in Paris and in Tokyo right now?"]


def main(model: formcast.Model | None = None, tasks: list[str] = TASKS, max_steps: int = 3):
    """Run the agent on every task; returns the `formcast.AgentResult` list."""
    model = model or formcast.load()
    agent = formcast.Agent(
        model,
        [get_weather, local_hour],
        answer_type=Annotated[str, Field(max_length=80)],
        parallel_tool_calls=True,
        max_parallel_calls=4,
        max_steps=max_steps,
        temperature=0,
        max_tokens=200,
    )
    results = [agent.run(task) for task in tasks]
    for task, result in zip(tasks, results, strict=True):
        print(f"Task: {task}\n{result.transcript()}\n")
    return results


if __name__ == "__main__":
    main()
