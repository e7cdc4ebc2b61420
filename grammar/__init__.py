"""formcast.grammar: grammars (regex, JSON Schema, Lark) -> automata -> per-state token masks."""

from formcast.grammar.bitmask import (
    allocate_token_bitmask,
    apply_token_bitmask_inplace,
    apply_token_bitmask_inplace_torch,
    apply_token_bitmask_inplace_triton,
)
from formcast.grammar.byte_dfa import ByteDFA
from formcast.grammar.cfg_compiled import CompiledCFG
from formcast.grammar.cfg_matcher import CfgMatcher
from formcast.grammar.compile import (
    compile_choice,
    compile_dfa,
    compile_regex,
    regex_to_dfa,
    regex_to_python,
)
from formcast.grammar.compiled_grammar import CompiledGrammar
from formcast.grammar.gbnf_grammar import compile_gbnf
from formcast.grammar.json_schema import (
    compile_json_schema,
    compile_type,
    json_schema_to_regex,
    parse_as,
    schema_of,
)
from formcast.grammar.lark_grammar import compile_lark
from formcast.grammar.matcher import Matcher
from formcast.grammar.vocabulary import Vocabulary

__all__ = [
    "ByteDFA",
    "CfgMatcher",
    "CompiledCFG",
    "CompiledGrammar",
    "Matcher",
    "Vocabulary",
    "allocate_token_bitmask",
    "apply_token_bitmask_inplace",
    "apply_token_bitmask_inplace_torch",
    "apply_token_bitmask_inplace_triton",
    "compile_choice",
    "compile_gbnf",
    "compile_json_schema",
    "compile_lark",
    "compile_type",
    "json_schema_to_regex",
    "parse_as",
    "schema_of",
    "compile_dfa",
    "compile_regex",
    "regex_to_dfa",
    "regex_to_python",
]
