"""``formcast.cfg(model, lark_text)``: text in the language of a Lark context-free grammar."""

from __future__ import annotations

from typing import Any

from formcast.errors import UsageError
from formcast.generator import Generator
from formcast.grammar import GrammarSpec
from formcast.model import Model


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

    def _grammar_spec(self) -> GrammarSpec:
        return GrammarSpec.lark(self.lark_text)


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
