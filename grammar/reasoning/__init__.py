"""formcast.grammar.reasoning: free thoughts between two tags, then any grammar's answer."""

from formcast.grammar.reasoning.config import EFFORT_BUDGETS, ReasoningConfig, effort_budget
from formcast.grammar.reasoning.grammar import ReasoningGrammar, ReasoningMatcher
from formcast.grammar.reasoning.splitter import ReasoningSplitter

__all__ = [
    "EFFORT_BUDGETS",
    "ReasoningConfig",
    "ReasoningGrammar",
    "ReasoningMatcher",
    "ReasoningSplitter",
    "effort_budget",
]
