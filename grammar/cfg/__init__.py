"""formcast.grammar.cfg — stage 4: rules, parsers, lexer, runtime; Lark and GBNF front ends."""

from formcast.grammar.cfg.compiled import CfgTuning, CompiledCFG, compile_cfg
from formcast.grammar.cfg.gbnf_frontend import compile_gbnf
from formcast.grammar.cfg.lark_frontend import compile_lark
from formcast.grammar.cfg.matcher import CfgMatcher
from formcast.grammar.cfg.rules import CfgGrammar

__all__ = [
    "CfgGrammar",
    "CfgMatcher",
    "CfgTuning",
    "CompiledCFG",
    "compile_cfg",
    "compile_gbnf",
    "compile_lark",
]
