"""formcast.grammar.index — stage 3: byte DFA x vocabulary -> token index, CompiledGrammar, DfaMatcher."""

from formcast.grammar.index.compile import compile_choice, compile_dfa, compile_regex, regex_to_dfa
from formcast.grammar.index.compiled_grammar import CompiledGrammar
from formcast.grammar.index.grammar_cache import GrammarCache
from formcast.grammar.index.matcher import DfaMatcher
from formcast.grammar.index.token_index import TokenIndex
from formcast.grammar.index.vocabulary import Vocabulary

__all__ = [
    "CompiledGrammar",
    "GrammarCache",
    "DfaMatcher",
    "TokenIndex",
    "Vocabulary",
    "compile_choice",
    "compile_dfa",
    "compile_regex",
    "regex_to_dfa",
]
