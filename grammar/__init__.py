"""formcast.grammar: grammars (regex, JSON Schema, Lark) -> automata -> per-state token masks."""

from formcast.grammar.vocabulary import Vocabulary

__all__ = ["Vocabulary"]
