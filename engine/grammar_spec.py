"""GrammarSpec: a grammar a request asks for, compiled by the engine against its vocabulary.

A request's ``grammar=`` is either a ready `CompiledGrammar` or a spec: a hashable ``key``
(requests with equal keys share one compiled grammar) and ``compile_fn(vocab) ->
CompiledGrammar``, run in the engine's grammar thread pool so the request waits for it
without blocking the others. The constructors cover the grammar kinds formcast compiles; a
``dict`` with one of their names as its only key is accepted as shorthand
(``{"json_schema": {...}}``, ``{"regex": "..."}``, ``{"choice": [...]}``, ``{"lark": "..."}``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

from formcast.errors import RequestError
from formcast.grammar import CompiledGrammar, Vocabulary

CompileFn = Callable[[Vocabulary], CompiledGrammar]


@dataclass(frozen=True)
class GrammarSpec:
    """A not-yet-compiled grammar.

    Parameters
    ----------
    key : Hashable
        Identity of the grammar: specs with equal keys share one compilation.
    compile_fn : Callable[[Vocabulary], CompiledGrammar]
        Compiles the grammar over the engine's vocabulary (runs in a worker thread).
    description : str
        Short human-readable name used in error messages.
    """

    key: Hashable
    compile_fn: CompileFn = field(compare=False)
    description: str = field(default="", compare=False)

    @classmethod
    def regex(cls, pattern: str, **options: Any) -> GrammarSpec:
        """Output must fullmatch ``pattern`` (options go to ``compile_regex``)."""
        from formcast.grammar import compile_regex

        return cls(
            ("regex", pattern, _options_key(options)),
            lambda vocab: compile_regex(pattern, vocab, **options),
            f"regex {_short(pattern)}",
        )

    @classmethod
    def json_schema(cls, schema: Any, **options: Any) -> GrammarSpec:
        """Output is JSON valid against ``schema`` (options go to ``compile_json_schema``)."""
        from formcast.grammar.json_schema import compile_json_schema, schema_of

        schema = schema_of(schema)
        text = json.dumps(schema, ensure_ascii=False)  # key order kept: it fixes property order
        return cls(
            ("json_schema", text, _options_key(options)),
            lambda vocab: compile_json_schema(schema, vocab, **options),
            f"JSON schema {_short(text)}",
        )

    @classmethod
    def choice(cls, choices: Sequence[str], **options: Any) -> GrammarSpec:
        """Output is exactly one of ``choices``."""
        from formcast.grammar import compile_choice

        options_list = list(choices)
        return cls(
            ("choice", tuple(options_list), _options_key(options)),
            lambda vocab: compile_choice(options_list, vocab, **options),
            f"choice {_short(repr(options_list))}",
        )

    @classmethod
    def lark(cls, grammar_text: str, **options: Any) -> GrammarSpec:
        """Output is parsed by the Lark grammar ``grammar_text`` (options go to ``compile_lark``)."""
        try:
            from formcast.grammar.lark_grammar import compile_lark
        except ImportError as exc:  # pragma: no cover - the CFG path ships with formcast
            raise RequestError("Lark grammars need formcast.grammar.lark_grammar") from exc
        return cls(
            ("lark", grammar_text, _options_key(options)),
            lambda vocab: compile_lark(grammar_text, vocab, **options),
            f"Lark grammar {_short(grammar_text)}",
        )

    @classmethod
    def coerce(cls, grammar: Any) -> CompiledGrammar | GrammarSpec:
        """Accept a `CompiledGrammar`, a `GrammarSpec` or a one-key dict shorthand.

        Raises
        ------
        RequestError
            For anything else (names the type or the unknown key).
        """
        if isinstance(grammar, (CompiledGrammar, GrammarSpec)):
            return grammar
        if hasattr(grammar, "matcher") and hasattr(grammar, "vocab"):
            return grammar  # a compiled grammar of another kind (CFG) with the same interface
        if isinstance(grammar, dict) and len(grammar) == 1:
            ((kind, value),) = grammar.items()
            makers = {
                "json_schema": cls.json_schema,
                "regex": cls.regex,
                "choice": cls.choice,
                "lark": cls.lark,
            }
            if kind in makers:
                return makers[kind](value)
            raise RequestError(f"unknown grammar kind {kind!r}; expected one of {sorted(makers)}")
        raise RequestError(
            "grammar must be a CompiledGrammar, a GrammarSpec or a dict like "
            f"{{'json_schema': ...}}, got {type(grammar).__name__}"
        )

    def __str__(self) -> str:
        return self.description or repr(self.key)


def _options_key(options: dict[str, Any]) -> str:
    return json.dumps(options, sort_keys=True, default=repr)


def _short(text: str, limit: int = 60) -> str:
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")
