"""The regex compiler compiles a plain ``$ref`` target once per context and shares the tree.

Oracle: the same compiler with ``share_refs=False`` (every use compiled again). The trees
must be equal node for node and the regex characters counted towards ``max_built_chars``
(which picks the auto route) must be the same, in compact and indented layouts (where a
target's text depends on its depth) and where a target is matched exactly (``propertyNames``).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from formcast.errors import CompileBudgetError
from formcast.grammar.json_schema.compiler import SchemaCompiler
from formcast.grammar.json_schema.layout import make_layout
from formcast.grammar.json_schema.sources import schema_of


def _compiled(schema: dict, *, share_refs: bool, **layout) -> tuple[object, int]:
    compiler = SchemaCompiler(
        schema_of(schema), layout=make_layout(**layout), strict=False, share_refs=share_refs
    )
    tree = compiler.compile(compiler.root, "")
    return tree, compiler.num_built_chars


_LEAVES = [
    {"type": "integer", "minimum": 0},
    {"type": "string", "maxLength": 5},
    {"type": "string", "pattern": "^[a-c]+$", "maxLength": 6},
    {"enum": ["x", 1, None]},
    {"type": "boolean"},
]


@st.composite
def ref_dags(draw):
    """Definitions that reference earlier ones (several times each), a root that uses them
    as property values, array items and property names."""
    defs: dict[str, dict] = {"s0": {"type": "string", "pattern": "^[a-z]{1,4}$"}}
    num_defs = draw(st.integers(1, 4))
    for i in range(num_defs):
        props = {}
        for j in range(draw(st.integers(1, 4))):
            earlier = [f"d{k}" for k in range(i)]
            choice = draw(st.sampled_from(["leaf", "ref", "items"] if earlier else ["leaf"]))
            if choice == "leaf":
                props[f"p{j}"] = draw(st.sampled_from(_LEAVES))
            elif choice == "ref":
                props[f"p{j}"] = {"$ref": f"#/$defs/{draw(st.sampled_from(earlier))}"}
            else:
                ref = {"$ref": f"#/$defs/{draw(st.sampled_from(earlier))}"}
                props[f"p{j}"] = {"type": "array", "items": ref, "maxItems": 2}
        defs[f"d{i}"] = {
            "type": "object",
            "properties": props,
            "required": draw(st.sampled_from([[], ["p0"]])),
            "additionalProperties": draw(st.booleans()),
        }
    uses = draw(st.lists(st.integers(0, num_defs - 1), min_size=1, max_size=5))
    root = {
        "$defs": defs,
        "type": "object",
        "properties": {f"u{k}": {"$ref": f"#/$defs/d{i}"} for k, i in enumerate(uses)},
        "additionalProperties": {"$ref": f"#/$defs/d{uses[0]}"},
    }
    if draw(st.booleans()):
        root["propertyNames"] = {"$ref": "#/$defs/s0"}
    return root


@given(schema=ref_dags(), layout=st.sampled_from([{}, {"indent": 2}, {"whitespace": "none"}]))
@settings(max_examples=60, deadline=None)
def test_shared_ref_trees_equal_trees_compiled_at_every_use(schema, layout):
    shared, shared_chars = _compiled(schema, share_refs=True, **layout)
    again, again_chars = _compiled(schema, share_refs=False, **layout)
    assert shared == again
    assert shared_chars == again_chars


def test_an_indented_target_is_compiled_per_depth():
    item = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    schema = {
        "$defs": {"item": item},
        "type": "object",
        "properties": {
            "top": {"$ref": "#/$defs/item"},
            "nested": {
                "type": "object",
                "properties": {"inner": {"$ref": "#/$defs/item"}},
                "required": ["inner"],
            },
        },
        "required": ["top", "nested"],
    }
    shared, _ = _compiled(schema, share_refs=True, indent=2)
    again, _ = _compiled(schema, share_refs=False, indent=2)
    assert shared == again


def test_a_shared_target_still_counts_towards_the_built_budget():
    item = {"type": "object", "properties": {f"k{i}": {"type": "integer"} for i in range(8)}}
    schema = {
        "$defs": {"item": item},
        "type": "object",
        "properties": {f"p{i}": {"$ref": "#/$defs/item"} for i in range(12)},
    }
    _, num_chars = _compiled(schema, share_refs=False)
    for share_refs in (True, False):
        compiler = SchemaCompiler(
            schema_of(schema),
            strict=False,
            max_built_chars=num_chars - 1,
            share_refs=share_refs,
        )
        with pytest.raises(CompileBudgetError, match="characters of sub-results"):
            compiler.compile(compiler.root, "")
