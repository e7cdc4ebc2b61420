"""formcast: exact structured generation.

>>> import formcast
>>> model = formcast.load()                       # the embedded SmolLM2-135M-Instruct
>>> formcast.json(model, Person)("John is 32.")   # -> Person(name='John', age=32)
>>> formcast.choice(model, ["yes", "no"])("Is the sky blue?")
>>> formcast.regex(model, r"\\d{3}-\\d{4}")("A phone number:")

Typed calls (`json`, `regex`, `choice`, `cfg`, `text`) return generators with ``__call__``,
``.batch(prompts)`` and ``.stream(prompt)``; `function` turns a typed Python signature into a
generation; `Agent` runs tools whose calls are constrained to their schemas.

Names are resolved lazily (PEP 562): every layer imports ``formcast.errors``, which must not
pull in the engine, so importing this package itself stays light.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "Agent": "formcast.agent",
    "AgentResult": "formcast.agent",
    "AgentStep": "formcast.agent",
    "CfgGenerator": "formcast.cfg_generator",
    "ChoiceGenerator": "formcast.choice_generator",
    "FormcastError": "formcast.errors",
    "Generator": "formcast.generator",
    "GrammarError": "formcast.errors",
    "IncompleteOutputError": "formcast.errors",
    "JsonGenerator": "formcast.json_generator",
    "Model": "formcast.model",
    "OutputError": "formcast.errors",
    "Reasoned": "formcast.generator",
    "ReasoningConfig": "formcast.grammar.reasoning",
    "RegexGenerator": "formcast.regex_generator",
    "SamplingParams": "formcast.samplers",
    "SchemaError": "formcast.errors",
    "Tool": "formcast.agent_tool",
    "TypedFunction": "formcast.typed_function",
    "UsageError": "formcast.errors",
    "cfg": "formcast.cfg_generator",
    "choice": "formcast.choice_generator",
    "function": "formcast.typed_function",
    "json": "formcast.json_generator",
    "load": "formcast.model",
    "parse_partial_json": "formcast.partial_json",
    "regex": "formcast.regex_generator",
    "text": "formcast.generator",
    "tool": "formcast.agent_tool",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'formcast' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # resolve once
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
