"""GrammarLimits: over-limit inputs are refused before compiling, naming the limit and where;
real schemas are never refused; grammars nested past Python's recursion limit still compile."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest

from formcast.errors import CompileBudgetError, GrammarLimitError
from formcast.grammar.limits import GrammarLimits, check_grammar_size
from formcast.grammar.spec import GrammarRecipe, GrammarSpec

DATA = Path(__file__).resolve().parents[3] / "shared" / "data" / "jsonschemabench"


def refused(kind: str, source: object, **limits: int) -> GrammarLimitError:
    with pytest.raises(GrammarLimitError) as info:
        check_grammar_size(kind, source, GrammarLimits(**limits))
    return info.value


def test_regex_repeat_count_names_the_offset():
    error = refused("regex", "ab[0-9]{1,1000000}")
    assert error.limit_name == "max_repeat_count"
    assert error.position == 7  # the counter
    assert str(error).endswith("(at position 7)")
    assert "1,000,000" in str(error) and "max_repeat_count=100,000" in str(error)
    check_grammar_size("regex", "ab[0-9]{1,100000}", GrammarLimits())  # at the limit: fine
    assert refused("regex", "(?:x{5}){3}", max_repeat_count=4).limit_name == "max_repeat_count"


def test_regex_and_pattern_lengths():
    assert refused("regex", "a" * 101, max_pattern_chars=100).limit_name == "max_pattern_chars"
    assert refused("regex", "a" * 101, max_source_chars=100).limit_name == "max_source_chars"
    schema = {"type": "object", "properties": {"code": {"type": "string", "pattern": "a{5000}"}}}
    error = refused("json_schema", schema, max_repeat_count=4999)
    assert "'pattern' at /properties/code" in str(error)
    keys = {"type": "object", "patternProperties": {"^x{9}$": {}}}
    assert "patternProperties" in str(refused("json_schema", keys, max_repeat_count=8))


def test_schema_properties_enum_and_size():
    many = {f"p{i}": {"type": "integer"} for i in range(11)}
    nested = {"type": "object", "properties": {"inner": {"type": "object", "properties": many}}}
    error = refused("json_schema", nested, max_object_properties=10)
    assert error.limit_name == "max_object_properties"
    assert "/properties/inner" in str(error) and "11" in str(error)
    enum = {"anyOf": [{"enum": list(range(6))}]}
    assert "'enum' at /anyOf/0" in str(refused("json_schema", enum, max_choices=5))
    deep = {"items": {"items": {"items": {"items": {}}}}}
    assert refused("json_schema", deep, max_subschemas=3).limit_name == "max_subschemas"
    assert refused("json_schema", {"title": "x" * 50}, max_source_chars=40).limit_name == (
        "max_source_chars"
    )


def test_choices_and_lark():
    assert refused("choice", ["a", "b", "c"], max_choices=2).limit_name == "max_choices"
    assert refused("choice", ["aaaa", "bbbb"], max_source_chars=7).limit_name == "max_source_chars"
    assert refused("lark", 'start: "x"' * 10, max_source_chars=50).limit_name == (
        "max_source_chars"
    )


def test_malformed_input_is_left_to_the_compiler():
    # the compiler gives these their own error with a position / pointer; limits pass them
    check_grammar_size("regex", "(a", GrammarLimits())
    check_grammar_size("json_schema", {"properties": "x", "pattern": "("}, GrammarLimits())


def test_limits_themselves_are_checked():
    with pytest.raises(GrammarLimitError, match="max_choices"):
        GrammarLimits(max_choices=0)
    with pytest.raises(GrammarLimitError, match="compile_timeout_s"):
        GrammarLimits(compile_timeout_s=True)


def test_recipes_rebuild_their_spec():
    for spec in (
        GrammarSpec.regex(r"\d+", ascii=True),
        GrammarSpec.json_schema({"type": "integer"}),
        GrammarSpec.choice(["a", "b"]),
        GrammarSpec.lark('start: "x"'),
    ):
        assert isinstance(spec.recipe, GrammarRecipe)
        assert spec.recipe.spec().key == spec.key


def test_no_benchmark_schema_is_refused():
    """The defaults are far from what real schemas do: every JSONSchemaBench schema passes."""
    num_schemas = 0
    for path in sorted(DATA.glob("*.jsonl")):
        for line in path.open(encoding="utf-8"):  # not splitlines(): strings hold U+2028
            check_grammar_size("json_schema", json.loads(line)["schema"], GrammarLimits())
            num_schemas += 1
    assert num_schemas > 5000


def test_optional_properties_past_the_recursion_limit_compile_exactly(smollm2_vocab):
    """600 optional properties nest the grammar tree ~1,800 deep: it compiles on a deep stack
    (it used to fail with Python's recursion limit) and is exact on instances."""
    names = [f"p{i}" for i in range(600)]
    schema = {
        "type": "object",
        "properties": {name: {"type": "integer"} for name in names},
        "additionalProperties": False,
    }
    grammar = GrammarSpec.json_schema(schema).compile_fn(smollm2_vocab)
    validator = jsonschema.Draft202012Validator(schema)

    def accepts(text: str) -> bool:
        matcher = grammar.matcher()
        return matcher.accept_bytes(text.encode()) and matcher.is_accepting()

    for instance in ({}, {"p0": 1}, {"p599": 2}, {"p3": 1, "p400": -5, "p599": 0}):
        assert validator.is_valid(instance)
        assert accepts(json.dumps(instance, separators=(",", ":"))), instance
    out_of_order = '{"p400":1,"p3":2}'  # declared order is the grammar's order
    assert not accepts(out_of_order)
    assert not accepts('{"p600":1}') and not validator.is_valid({"p600": 1})
    assert not accepts('{"p1":"x"}')


def test_too_deep_even_for_the_deep_stack_is_a_budget_error(monkeypatch):
    import formcast.grammar.spec as spec_module

    monkeypatch.setattr(spec_module, "_DEEP_RECURSION_LIMIT", 2_000)

    def recurse(depth: int) -> int:
        return depth if depth > 10**6 else recurse(depth + 1)

    with pytest.raises(CompileBudgetError, match=re.escape("recursion depth of 2,000")):
        spec_module._guarded(lambda: recurse(0))
