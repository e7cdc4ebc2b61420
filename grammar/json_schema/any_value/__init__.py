"""formcast.grammar.json_schema.any_value — unconstrained JSON values nested without bound."""

from formcast.grammar.json_schema.any_value.grammar import AnyValueGrammar
from formcast.grammar.json_schema.any_value.matcher import AnyValueMatcher

__all__ = ["AnyValueGrammar", "AnyValueMatcher"]
