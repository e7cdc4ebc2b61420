"""Dependency keywords (``dependentRequired``, ``dependentSchemas``, ``dependencies``): exact
languages against jsonschema on the regex and the structural route, per draft, in formcast's
layout; refusals with pointer; Hypothesis; token by token with the real SmolLM2 tokenizer."""

from __future__ import annotations

import functools
import itertools
import json
import random
import re
import warnings

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from formcast.errors import SchemaError
from formcast.grammar.json_schema import compile as json_schema
from formcast.grammar.json_schema.compile import compile_json_schema
from formcast.grammar.json_schema.dependencies import MAX_DEPENDENCY_BRANCHES
from formcast.grammar.json_schema.merge import merge
from formcast.grammar.json_schema.structural import compile_json_schema_cfg
from formcast.grammar.json_schema.values import property_order, serialize
from tests.grammar.schema_oracle import validator

# unconstrained values are scalars or empty containers (the test values' unconstrained parts
# are scalars): Python's re compiles these regexes in seconds instead of minutes
json_schema_to_regex = functools.partial(json_schema.json_schema_to_regex, max_any_depth=0)
DRAFT4 = "http://json-schema.org/draft-04/schema#"
DRAFT6 = "http://json-schema.org/draft-06/schema#"
DRAFT7 = "http://json-schema.org/draft-07/schema#"
DRAFT2019 = "https://json-schema.org/draft/2019-09/schema"


def _objects(names: str, fills: tuple = (0,)) -> list[dict]:
    """Every object over a subset of ``names``, keys in every order, values from ``fills``."""
    found = []
    for size in range(len(names) + 1):
        for keys in itertools.permutations(names, size):
            for fill in fills:
                found.append({k: fill if i % 2 == 0 else 1 for i, k in enumerate(keys)})
    return found


OBJECTS = _objects("abcx") + _objects("abc", ("s",))
NON_OBJECTS = [None, 0, 1.5, "s", []]


def check(schema, values, *, strict=False) -> tuple[int, int]:
    """Regex fullmatch of every value's formcast text <=> jsonschema validity; returns the
    numbers of valid and invalid values (a test asserts it saw both)."""
    rx = re.compile(json_schema_to_regex(schema, strict=strict))
    oracle = validator(schema)
    num_valid = num_invalid = 0
    for v in values:
        text = serialize(v, schema, schema)
        is_valid = oracle.is_valid(json.loads(text))
        assert bool(rx.fullmatch(text)) == is_valid, (schema, text, is_valid)
        num_valid += is_valid
        num_invalid += not is_valid
    return num_valid, num_invalid


def check_both(schema, values=OBJECTS):
    num_valid, num_invalid = check(schema, values)
    assert num_valid and num_invalid, (schema, num_valid, num_invalid)


def refused(schema, keyword, pointer="", **options):
    with pytest.raises(SchemaError) as info:
        json_schema_to_regex(schema, **options)
    assert (info.value.keyword, info.value.pointer) == (keyword, pointer), str(info.value)
    return info.value


# ---- dependentRequired / array-valued dependencies ----------------------------------------


def test_dependent_required_declared_names():
    props = {n: {"type": "integer"} for n in "abcx"}
    check_both({"type": "object", "properties": props, "dependentRequired": {"a": ["b"]}})
    # a chain and a cycle: a => b, c => a (so c => a and b), b => c (a, b, c together)
    check_both({"properties": props, "dependentRequired": {"a": ["b"], "c": ["a"]}})
    check_both({"properties": props, "dependentRequired": {"a": ["b"], "b": ["c"], "c": ["a"]}})
    # the dependent name declared before its trigger, and required triggers (no split)
    check_both({"properties": props, "dependentRequired": {"x": ["a", "c"]}, "required": ["x"]})
    check_both({"properties": props, "dependentRequired": {"a": []}, "required": ["b"]})


def test_dependent_required_undeclared_names():
    check_both({"type": "object", "dependentRequired": {"a": ["b", "x"]}})
    check_both({"dependentRequired": {"c": ["a"]}, "additionalProperties": {"type": "integer"}})
    check_both({"properties": {"b": {}}, "dependentRequired": {"x": ["c"], "a": ["b"]}})
    # names matched by patternProperties; a trigger no key may carry is vacuous
    check_both({"patternProperties": {"^[ab]$": {"type": "integer"}},
                "dependentRequired": {"a": ["x"], "x": ["c"]}})  # fmt: skip
    check_both({"properties": {"a": {}, "b": {}}, "additionalProperties": False,
                "dependentRequired": {"a": ["b"], "z": ["q"], "b": ["zz"]}})  # fmt: skip


def test_non_objects_are_unconstrained():
    schema = {"type": ["object", "integer", "string"], "minimum": 1,
              "dependentRequired": {"a": ["b"]}, "dependentSchemas": {"b": {"type": "string"}}}  # fmt: skip
    check_both(schema, OBJECTS + NON_OBJECTS)


# ---- dependentSchemas / schema-valued dependencies ------------------------------------------


def test_dependent_schemas():
    props = {"a": {}, "b": {"type": "integer"}}
    for dep in (
        {"required": ["c"]},
        {"properties": {"c": {"type": "string"}, "b": {"minimum": 1}}},
        {"properties": {"b": {}}, "additionalProperties": False},
        {"maxProperties": 1},
        {"not": {"required": ["b"]}},
        {"properties": {"x": False}},
        {"anyOf": [{"required": ["b"]}, {"required": ["c"]}]},
        False,
    ):
        check_both({"type": "object", "properties": props, "dependentSchemas": {"a": dep}})
    check({"dependentSchemas": {"a": True, "b": {"type": "string"}}}, OBJECTS + NON_OBJECTS)


def test_dependent_schemas_with_nested_dependencies():
    check_both({"dependentSchemas": {"a": {"dependentSchemas": {"b": {"required": ["c"]}}}}})
    check_both({"dependentSchemas": {"a": {"dependentRequired": {"b": ["x"]},
                                           "properties": {"c": {"type": "string"}}}},
                "dependentRequired": {"x": ["c"]}})  # fmt: skip


def test_both_keywords_on_one_trigger():
    check_both({"properties": {"a": {}, "b": {}},
                "dependentRequired": {"a": ["b"]},
                "dependentSchemas": {"a": {"properties": {"b": {"type": "integer"}}},
                                     "c": {"required": ["x"]}}})  # fmt: skip


def test_schema_reaching_itself_terminates():
    """``S_a = #``: for an object with ``a`` a validator recurses without end (no answer);
    without ``a`` formcast agrees with it, and the compile terminates."""
    schema = {"properties": {"b": {"type": "integer"}}, "dependentSchemas": {"a": {"$ref": "#"}},
              "dependentRequired": {"b": ["c"]}}  # fmt: skip
    check_both(schema, [v for v in OBJECTS if "a" not in v])
    rx = re.compile(json_schema_to_regex(schema, strict=False))
    assert rx.fullmatch('{"a":1}') and not rx.fullmatch('{"b":1,"a":1}')


# ---- drafts -------------------------------------------------------------------------------


@pytest.mark.parametrize("draft", [DRAFT4, DRAFT6, DRAFT7])
def test_legacy_dependencies_both_forms(draft):
    schema = {"$schema": draft, "properties": {"a": {}, "b": {}},
              "dependencies": {"a": ["b"], "b": {"properties": {"x": {"type": "string"}},
                                                 "dependencies": {"x": ["c"]}}}}  # fmt: skip
    check_both(schema, OBJECTS + NON_OBJECTS + [{"b": 1, "x": "s", "c": 0}])


def test_keywords_of_another_draft_are_ignored_as_jsonschema_ignores_them():
    violating = {"a": 1}
    for schema in (
        {"dependencies": {"a": ["b"]}},  # no $schema: 2020-12
        {"$schema": DRAFT2019, "dependencies": {"a": {"required": ["b"]}}},
        {"$schema": DRAFT7, "dependentRequired": {"a": ["b"]}},
        {"$schema": DRAFT4, "dependentSchemas": {"a": False}},
    ):
        assert validator(schema).is_valid(violating)
        check(schema, OBJECTS)
        assert re.fullmatch(json_schema_to_regex(schema, strict=False), '{"a":1}')
    # each draft's own keyword applies next to the ignored one
    check_both({"$schema": DRAFT2019, "dependencies": {"a": ["b"]},
                "dependentRequired": {"c": ["a"]}})  # fmt: skip
    check_both({"$schema": DRAFT7, "dependentRequired": {"c": ["a"]},
                "dependencies": {"a": ["b"]}})  # fmt: skip


# ---- combinations ---------------------------------------------------------------------------


def test_all_of_two_schemas_with_dependencies():
    check_both({"allOf": [{"dependentRequired": {"a": ["b"]}},
                          {"dependentRequired": {"a": ["c"]},
                           "dependentSchemas": {"b": {"maxProperties": 2}}}]})  # fmt: skip
    check_both({"allOf": [{"dependentSchemas": {"a": {"required": ["b"]}}},
                          {"dependentSchemas": {"a": {"properties": {"b": {"type": "string"}}}}},
                          {"properties": {"a": {}, "b": {}, "c": {}}}]})  # fmt: skip
    check_both({"$schema": DRAFT7, "allOf": [{"dependencies": {"a": ["b"]}},
                                             {"dependencies": {"a": {"required": ["c"]}}}]})  # fmt: skip


def test_any_of_enum_and_nested_objects():
    check_both({"anyOf": [{"required": ["a"]}, {"required": ["c"]}],
                "dependentRequired": {"a": ["b"], "c": ["x"]}})  # fmt: skip
    check_both({"enum": [{"a": 1}, {"a": 1, "b": 2}, {"b": 1}, 3], "dependentRequired": {"a": ["b"]}},
               OBJECTS + NON_OBJECTS + [{"a": 1, "b": 2}])  # fmt: skip
    inner = {"type": "object", "dependentRequired": {"a": ["b"]}}
    nested = {"properties": {"p": inner, "q": {"type": "array", "items": inner}},
              "dependentSchemas": {"p": {"properties": {"p": {"required": ["c"]}}}}}  # fmt: skip
    values = [{"p": o} for o in OBJECTS[:40]] + [{"q": [o]} for o in OBJECTS[:40]]
    check_both(nested, values + [{"p": {"c": 1}, "q": [{}, {"a": 1}]}])


def test_strict_closes_the_merged_object():
    """``strict``: an absent ``additionalProperties`` is ``false`` for the merged object of
    each case, so a name a dependency schema declares may appear when its trigger does."""
    schema = {"properties": {"a": {}, "b": {}}, "dependentRequired": {"a": ["b"]},
              "dependentSchemas": {"b": {"properties": {"x": {"type": "integer"}}}}}  # fmt: skip
    rx = re.compile(json_schema_to_regex(schema))  # strict
    for text, expected in [
        ("{}", True), ('{"b":1}', True), ('{"a":1,"b":1}', True), ('{"a":1}', False),
        ('{"b":1,"x":2}', True), ('{"x":2}', False), ('{"b":1,"x":"s"}', False),
        ('{"a":1,"b":1,"x":2}', True), ('{"b":1,"z":2}', False),
    ]:  # fmt: skip
        assert bool(rx.fullmatch(text)) == expected, text
    # a trigger no key may carry (undeclared, strict) leaves the object as it is
    assert re.fullmatch(json_schema_to_regex({"properties": {"a": {}},
                                              "dependentRequired": {"z": ["a"]}}), "{}")  # fmt: skip


# ---- layout ---------------------------------------------------------------------------------


def test_dependency_names_laid_out_after_declared_and_required_names():
    schema = {"properties": {"b": {}}, "required": ["r"],
              "dependentSchemas": {"t": {"properties": {"s": {}}}},
              "dependentRequired": {"a": ["d"]}}  # fmt: skip
    assert property_order(schema, schema) == ["b", "r", "t", "s", "a", "d"]
    value = {"z": 0, "d": 1, "a": 2, "s": 3, "t": 4, "r": 5, "b": 6}
    text = serialize(value, schema, schema)
    assert text == '{"b":6,"r":5,"t":4,"s":3,"a":2,"d":1,"z":0}'
    assert re.fullmatch(json_schema_to_regex(schema, strict=False), text)
    draft7 = {"$schema": DRAFT7, "dependentRequired": {"a": ["d"]}}  # ignored there
    assert property_order(draft7, draft7) == []


# ---- merge and keyword types ----------------------------------------------------------------


def test_merge_unites_dependencies_per_trigger():
    never = lambda pattern, name: False  # noqa: E731
    merged = merge(
        [{"dependentRequired": {"a": ["b"]}, "dependentSchemas": {"a": {"minProperties": 1}}},
         {"dependentRequired": {"a": ["c", "b"], "x": []}, "dependentSchemas": {"a": True}}],
        "", never,
    )  # fmt: skip
    assert merged["dependentRequired"] == {"a": ["b", "c"], "x": []}
    assert merged["dependentSchemas"] == {"a": {"minProperties": 1}}
    legacy = merge([{"dependencies": {"a": ["b"]}}, {"dependencies": {"a": {"maxProperties": 3}}}],
                   "", never)  # fmt: skip
    assert legacy["dependencies"] == {"a": {"allOf": [{"required": ["b"]}, {"maxProperties": 3}]}}


@pytest.mark.parametrize(
    ("schema", "keyword", "pointer"),
    [
        ({"dependentRequired": {"a": "b"}}, "dependentRequired", ""),
        ({"dependentRequired": {"a": [1]}}, "dependentRequired", ""),
        ({"dependentRequired": ["a"]}, "dependentRequired", ""),
        ({"dependentSchemas": {"a": 3}}, None, "/dependentSchemas/a"),  # as "properties"
        ({"$schema": DRAFT7, "dependencies": {"a": 3}}, "dependencies", ""),
        ({"$schema": DRAFT7, "dependencies": "a"}, "dependencies", ""),
        ({"properties": {"p": {"dependencies": {"a": [None]}}}}, "dependencies", "/properties/p"),
        ({"$schema": DRAFT7, "dependencies": {"a": {"minimum": "x"}}}, "minimum",
         "/dependencies/a"),
        ({"dependentSchemas": {"a~b": {"required": 1}}}, "required", "/dependentSchemas/a~0b"),
    ],
)  # fmt: skip
def test_malformed_values_name_keyword_and_pointer(schema, keyword, pointer):
    refused(schema, keyword, pointer)


# ---- the case-split budget ------------------------------------------------------------------


def test_independent_triggers_within_and_over_the_budget():
    assert MAX_DEPENDENCY_BRANCHES == 64
    names = "abcdefgh"
    six = {"dependentRequired": {n: ["z"] for n in names[:6]}}
    check_both(six, [{n: 1 for n in names[:k]} for k in range(7)] + [{"a": 1, "z": 1}])
    seven = {"dependentRequired": {n: ["z"] for n in names[:7]}}
    err = refused(seven, "dependentRequired", strict=False)
    assert "64" in str(err)
    nested = {"properties": {"p": {"dependentSchemas": {n: True for n in names}}}}
    refused(nested, "dependentSchemas", "/properties/p", strict=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rx = re.compile(json_schema_to_regex(seven, strict=False, lenient=True))
    assert any("dependentRequired" in str(w.message) for w in caught)
    assert rx.fullmatch('{"a":1}')  # lenient: the keyword dropped, a superset


def test_chained_triggers_prune_impossible_cases():
    """A chain ``k0 => k1 => ... => k9``: of the 2^10 presence sets only the 11 closed under
    the chain are cases, well within the budget."""
    chain = {f"k{i}": [f"k{i + 1}"] for i in range(9)}
    schema = {"properties": {f"k{i}": {} for i in range(10)}, "dependentRequired": chain}
    values = [{f"k{i}": 0 for i in range(lo, hi)} for lo in range(10) for hi in range(lo, 11)]
    check_both(schema, values)


# ---- the structural route -------------------------------------------------------------------

TREE = {
    "$defs": {
        "node": {
            "type": "object",
            "properties": {
                "name": {"type": "string", "maxLength": 4},
                "leaf": {"type": "boolean"},
                "children": {"type": "array", "items": {"$ref": "#/$defs/node"}},
            },
            "required": ["name"],
            "dependentRequired": {"leaf": ["name"], "children": ["leaf"]},
            "dependentSchemas": {"children": {"properties": {"leaf": {"const": False}}}},
        }
    },
    "$ref": "#/$defs/node",
}
TREE_VALUES = [
    {"name": "r"},
    {"name": "r", "leaf": True},
    {"name": "r", "leaf": False, "children": [{"name": "a", "leaf": True}, {"name": "b"}]},
    {"name": "r", "leaf": False, "children": [{"name": "a", "leaf": False, "children": []}]},
    {"name": "r", "children": []},
    {"name": "r", "leaf": True, "children": []},
    {"name": "r", "leaf": False, "children": [{"name": "a", "children": []}]},
    {"name": "r", "leaf": False, "children": [{"leaf": True}]},
]


def _accepts(grammar, text: str) -> bool:
    matcher = grammar.matcher()
    return matcher.accept_bytes(text.encode()) and matcher.is_accepting()


def test_recursive_tree_with_dependencies_on_the_structural_route(smollm2_vocab):
    grammar = compile_json_schema(TREE, smollm2_vocab, strict=False, cache=False)
    assert type(grammar).__name__ == "CompiledCFG"
    oracle = validator(TREE)
    outcomes = set()
    for value in TREE_VALUES:
        text = serialize(value, TREE, TREE)
        outcomes.add(oracle.is_valid(value))
        assert _accepts(grammar, text) == oracle.is_valid(value), text
    assert outcomes == {True, False}


def test_cut_sub_results_keep_the_language(smollm2_vocab):
    """A large object cut into nonterminals (small ``cut_chars``) against the oracle."""
    schema = {"$schema": DRAFT7, "properties": {n: {"type": "integer"} for n in "abcx"},
              "dependencies": {"a": ["b"], "c": {"required": ["x"],
                                                 "properties": {"x": {"maximum": 3}}}}}  # fmt: skip
    grammar = compile_json_schema_cfg(schema, smollm2_vocab, strict=False, cut_chars=40,
                                      cache=False)  # fmt: skip
    oracle = validator(schema)
    for value in _objects("abcx", (0, 7)):
        text = serialize(value, schema, schema)
        assert _accepts(grammar, text) == oracle.is_valid(value), text


# ---- Hypothesis -----------------------------------------------------------------------------

_NAMES = st.sampled_from(["a", "b", "c", "d"])
_DEP_SCHEMAS = st.sampled_from([
    True, False, {"required": ["c"]}, {"required": ["d", "a"]},
    {"properties": {"b": {"type": "integer"}}}, {"properties": {"d": False}},
    {"properties": {"c": {"type": "string"}}, "required": ["c"]}, {"not": {"required": ["b"]}},
    {"dependentRequired": {"b": ["a"]}}, {"additionalProperties": {"type": "integer"}},
])  # fmt: skip


@st.composite
def dependency_schemas(draw: st.DrawFn) -> dict:
    props = draw(st.dictionaries(_NAMES, st.sampled_from([{}, {"type": "integer"}]), max_size=3))
    schema: dict = {"type": "object", "properties": props}
    schema["required"] = [n for n in props if draw(st.booleans()) and draw(st.booleans())]
    schema["additionalProperties"] = draw(st.sampled_from([True, False, {"type": "integer"}]))
    required_by = draw(st.dictionaries(_NAMES, st.lists(_NAMES, max_size=2), max_size=3))
    schemas_by = draw(st.dictionaries(_NAMES, _DEP_SCHEMAS, max_size=2))
    if draw(st.booleans()):  # draft 7 spelling: both forms in one keyword
        schema["$schema"] = DRAFT7
        schema["dependencies"] = {**schemas_by, **required_by}
        for dep in schema["dependencies"].values():  # draft 7 has no dependentRequired
            if isinstance(dep, dict) and "dependentRequired" in dep:
                dep["dependencies"] = dep.pop("dependentRequired")
    else:
        schema["dependentRequired"] = required_by
        schema["dependentSchemas"] = schemas_by
    return schema


_INSTANCES = st.dictionaries(_NAMES, st.sampled_from([0, 5, "s", None]), max_size=4)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schema=dependency_schemas(), instances=st.lists(_INSTANCES, min_size=1, max_size=8))
def test_regex_matches_iff_valid(schema, instances):
    schema = json.loads(json.dumps(schema))  # no shared sub-dicts between draws
    try:
        rx = re.compile(json_schema_to_regex(schema, strict=False))
    except SchemaError as exc:
        if exc.keyword is not None:
            return  # a refusal (the keyword tests count them), not a wrong language
        rx = re.compile("(?!)")  # unsatisfiable schema: nothing may match
    oracle = validator(schema)
    for value in instances:
        text = serialize(value, schema, schema)
        assert bool(rx.fullmatch(text)) == oracle.is_valid(json.loads(text)), (schema, text)


# ---- token by token -------------------------------------------------------------------------

CONFIG = {
    "$schema": DRAFT7,
    "type": "object",
    "properties": {
        "host": {"type": "string", "maxLength": 12},
        "port": {"type": "integer", "minimum": 1, "maximum": 65535},
        "tls": {"type": "boolean"},
        "cert": {"type": "string", "maxLength": 8},
        "key": {"type": "string", "maxLength": 8},
    },
    "required": ["host"],
    "additionalProperties": False,
    "dependencies": {
        "cert": ["key"],
        "key": ["cert"],
        "tls": {"properties": {"port": {"enum": [443, 8443]}}, "required": ["port"]},
    },
}
CONFIG_VALID = [
    {"host": "example.org"},
    {"host": "h", "port": 80},
    {"host": "h", "tls": True, "port": 443},
    {"host": "h", "cert": "c.pem", "key": "k.pem"},
    {"host": "h", "port": 8443, "tls": False, "cert": "c", "key": "k"},
]
CONFIG_INVALID = [
    {"host": "h", "tls": True},
    {"host": "h", "tls": True, "port": 80},
    {"host": "h", "cert": "c.pem"},
    {"host": "h", "key": "k.pem"},
    {"host": "h", "port": 443, "tls": True, "key": "k"},
]


def test_instances_token_by_token(smollm2_vocab, smollm2_tokenizer):
    grammar = compile_json_schema(CONFIG, smollm2_vocab, cache=False)
    oracle = validator(CONFIG)
    for values, expected in ((CONFIG_VALID, True), (CONFIG_INVALID, False)):
        for value in values:
            text = serialize(value, CONFIG)
            assert oracle.is_valid(json.loads(text)) == expected
            matcher = grammar.matcher()
            accepted = True
            for token_id in smollm2_tokenizer.encode(text, add_special_tokens=False):
                if not matcher.accept_token(token_id):
                    accepted = False
                    break
            assert (accepted and matcher.is_accepting()) == expected, text


def test_random_walks_validate(smollm2_vocab):
    """Random token walks through the masks that end are valid instances, and the walks meet
    the dependencies (some reach ``tls`` / ``cert``, whose dependents then follow)."""
    grammar = compile_json_schema(CONFIG, smollm2_vocab, cache=False)
    oracle = validator(CONFIG)
    rng = random.Random(3)
    num_finished = 0
    for _ in range(12):
        matcher, token_ids = grammar.matcher(), []
        for _ in range(80):
            allowed = [t for t in matcher.allowed_token_ids().tolist()
                       if t not in smollm2_vocab.eos_token_ids]  # fmt: skip
            if not allowed or (matcher.is_accepting() and rng.random() < 0.2):
                break
            token_id = rng.choice(allowed)
            assert matcher.accept_token(token_id)
            token_ids.append(token_id)
        if matcher.is_accepting():
            text = b"".join(smollm2_vocab.token_bytes[t] for t in token_ids).decode("utf-8")
            assert oracle.is_valid(json.loads(text)), text
            num_finished += 1
    assert num_finished >= 3
