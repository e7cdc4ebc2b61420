"""``formcast.cfg(model, lark_text)``: text in the language of a Lark context-free grammar."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from formcast.errors import UsageError
from formcast.generator import Generator
from formcast.grammar import Vocabulary
from formcast.model import Model


def lark_compiler() -> Any:
    """``compile_lark`` from the grammar layer (imported lazily: the CFG path is heavier)."""
    try:
        from formcast.grammar import compile_lark
    except ImportError:
        try:
            from formcast.grammar.lark_grammar import compile_lark
        except ImportError as exc:
            raise UsageError(
                "formcast.cfg needs formcast.grammar.compile_lark, which this build lacks"
            ) from exc
    return compile_lark


class CfgGenerator(Generator):
    """Generates sentences of a Lark grammar; calls return the text."""

    def __init__(self, model: Model, grammar: str, **sampling: Any) -> None:
        if not isinstance(grammar, str):
            raise UsageError(
                f"formcast.cfg expects Lark grammar text, got {type(grammar).__name__}"
            )
        super().__init__(model, **sampling)
        self.lark_text = grammar
        self.description = "cfg grammar"
        _ = self.grammar

    def _grammar_key(self) -> Hashable:
        return ("lark", self.lark_text)

    def _build_grammar(self, vocab: Vocabulary) -> Any:
        return lark_compiler()(self.lark_text, vocab)


def cfg(model: Model, grammar: str, **sampling: Any) -> CfgGenerator:
    """Constrain the output to the language of a Lark grammar (``start`` rule); returns text.

    Examples
    --------
    >>> arithmetic = formcast.cfg(model, '''
    ...     start: expr
    ...     expr: NUMBER | expr ("+" | "*") expr | "(" expr ")"
    ...     %import common.NUMBER
    ... ''', max_tokens=24)
    >>> arithmetic("Write a sum.")
    '(1+2)*3'
    """
    return CfgGenerator(model, grammar, **sampling)
