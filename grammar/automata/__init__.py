"""formcast.grammar.automata — stage 2: syntax tree -> byte NFA -> minimal byte DFA."""

from formcast.grammar.automata.budget import CompileBudget
from formcast.grammar.automata.byte_dfa import ByteDFA, determinize
from formcast.grammar.automata.byte_nfa import ByteNFA
from formcast.grammar.automata.chain_keys import ChainKeys
from formcast.grammar.automata.minimizer import minimize
from formcast.grammar.automata.nfa_builder import build_nfa, counted_chain_dfa

__all__ = [
    "ByteDFA",
    "ByteNFA",
    "ChainKeys",
    "CompileBudget",
    "build_nfa",
    "counted_chain_dfa",
    "determinize",
    "minimize",
]
