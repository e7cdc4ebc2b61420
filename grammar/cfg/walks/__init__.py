"""formcast.grammar.cfg.walks — the lexer's mask-speed machinery: trie and DFA walks, numba kernels."""

from formcast.grammar.cfg.walks.dfa_walk import DfaWalker, SharedWalks

__all__ = ["DfaWalker", "SharedWalks"]
