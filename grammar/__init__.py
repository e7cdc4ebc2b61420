"""formcast.grammar: regex -> automata -> index -> cfg -> json_schema, per-state token masks."""

from formcast.bitmask import (
    allocate_token_bitmask,
    apply_token_bitmask_inplace,
    apply_token_bitmask_inplace_cpu,
    apply_token_bitmask_inplace_torch,
    apply_token_bitmask_inplace_triton,
)
from formcast.grammar.automata.byte_dfa import ByteDFA
from formcast.grammar.cfg.compiled import CompiledCFG
from formcast.grammar.cfg.gbnf_frontend import compile_gbnf
from formcast.grammar.cfg.lark_frontend import compile_lark
from formcast.grammar.cfg.matcher import CfgMatcher
from formcast.grammar.index.compile import (
    compile_choice,
    compile_dfa,
    compile_regex,
    regex_to_dfa,
    regex_to_python,
)
from formcast.grammar.index.compiled_grammar import CompiledGrammar
from formcast.grammar.index.matcher import DfaMatcher
from formcast.grammar.index.vocabulary import Vocabulary
from formcast.grammar.json_schema.any_value.grammar import AnyValueGrammar
from formcast.grammar.json_schema.compile import (
    compile_json_schema,
    compile_type,
    json_schema_to_regex,
    parse_as,
    schema_of,
)
from formcast.grammar.protocol import Grammar, MaskHook, Matcher
from formcast.grammar.spec import GrammarSpec

__all__ = [
    "ByteDFA",
    "CfgMatcher",
    "CompiledCFG",
    "CompiledGrammar",
    "AnyValueGrammar",
    "DfaMatcher",
    "Grammar",
    "GrammarSpec",
    "MaskHook",
    "Matcher",
    "Vocabulary",
    "allocate_token_bitmask",
    "apply_token_bitmask_inplace",
    "apply_token_bitmask_inplace_cpu",
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
