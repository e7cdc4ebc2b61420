"""Unconstrained values nested without bound on the regex route (``AnyValueGrammar``).

Oracles: ``jsonschema`` (validity of whole documents), ``json.loads`` (mutated texts that are
not JSON must be rejected) and the structural route ``route="cfg"`` (exact, built
independently) for the full-vocabulary mask at every step of a document.
"""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from formcast.errors import SchemaError
from formcast.grammar.index.compiled_grammar import CompiledGrammar
from formcast.grammar.json_schema.any_value.grammar import AnyValueGrammar
from formcast.grammar.json_schema.compile import compile_json_schema, json_schema_to_regex
from tests.grammar.schema_oracle import validator

OBJECT = {"type": "object", "properties": {"a": {"type": "integer"}, "b": True}, "required": ["a"]}
# a typed container and an unconstrained value at the same place: two readings of "{"
AMBIGUOUS = {
    "anyOf": [
        {
            "type": "object",
            "properties": {"x": {"type": "string"}},
            "required": ["x"],
            "additionalProperties": False,
        },
        {},
    ]
}
ARRAY = {"type": "array", "items": {}, "maxItems": 3}
SCHEMAS = {"object": OBJECT, "true": True, "ambiguous": AMBIGUOUS, "array": ARRAY}


def nested(depth: int, seed: int):
    """A value with containers nested exactly ``depth`` deep (objects and arrays mixed)."""
    rng = random.Random(seed)
    value = rng.choice([1, 's}]\\"[{', None, -2.5e3, "", True])
    for level in range(depth):
        if rng.random() < 0.5:
            value = [value] if rng.random() < 0.5 else [rng.randint(0, 9), value, "],["]
        else:
            value = {f"k{level}": value} if rng.random() < 0.5 else {'}},{"': 0, "v": value}
    return value


DOCUMENTS = [{"a": 1, "b": nested(d, d), "c": nested(d, 10 + d)} for d in range(1, 9)]
DOCUMENTS += [nested(d, 20 + d) for d in range(1, 9)]
DOCUMENTS += [{"a": 2}, {"x": "s"}, {"x": "s", "y": [{}]}, [[[]], {}], [], {}, "str", 5]
DOCUMENTS += [[1, [2], {"q": [[[[[[[[1]]]]]]]]}], [1, 2, 3, 4]]

LAYOUTS = {
    "compact": ({}, {"separators": (",", ":")}),
    "compact_spaces": ({}, {}),
    "none": ({"whitespace": "none"}, {"separators": (",", ":")}),
    "spaced": ({"whitespace": "spaced"}, {}),
    "flexible": ({"whitespace": "flexible", "max_whitespace": 3}, {"separators": (" ,  ", " : ")}),
    "indent": ({"indent": 2}, {"indent": 2}),
}


@pytest.fixture(scope="module")
def grammars(smollm2_vocab):
    found: dict = {}

    def get(schema_name: str, layout: str, route: str = "auto"):
        key = (schema_name, layout, route)
        if key not in found:
            options = LAYOUTS[layout][0]
            found[key] = compile_json_schema(
                SCHEMAS[schema_name], smollm2_vocab, strict=False, route=route, **options
            )
        return found[key]

    return get


def segmentations(tokenizer, text: str, seed: int) -> list[list[int]]:
    """The canonical token ids of ``text`` and two random segmentations (pieces encoded
    separately, so token boundaries fall elsewhere, e.g. inside ``}},{"``)."""
    out = [tokenizer.encode(text, add_special_tokens=False)]
    rng = random.Random(seed)
    for _ in range(2):
        cuts = sorted(rng.sample(range(1, len(text)), min(len(text) - 1, len(text) // 3)))
        pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
        out.append([t for p in pieces for t in tokenizer.encode(p, add_special_tokens=False)])
    return out


def walk(grammar, ids) -> bool:
    """Accept ``ids``; every accepted token must also be set in the mask it was chosen from."""
    m = grammar.matcher()
    for t in ids:
        is_allowed = bool((int(m.packed_row()[t >> 5]) >> (t & 31)) & 1)
        is_accepted = m.accept_token(t)
        assert is_allowed == is_accepted
        if not is_accepted:
            return False
    return m.is_accepting()


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("schema_name", list(SCHEMAS))
def test_nested_documents_token_by_token(schema_name, layout, grammars, smollm2_tokenizer):
    grammar = grammars(schema_name, layout)
    assert isinstance(grammar, AnyValueGrammar)
    oracle = validator(SCHEMAS[schema_name])
    dumps = LAYOUTS[layout][1]
    for k, doc in enumerate(DOCUMENTS):
        text = json.dumps(doc, ensure_ascii=False, **dumps)
        for ids in segmentations(smollm2_tokenizer, text, k):
            assert walk(grammar, ids) == oracle.is_valid(doc), (layout, text)


@pytest.mark.parametrize("layout", ["compact", "none", "spaced", "flexible"])
@pytest.mark.parametrize("schema_name", ["object", "ambiguous"])
def test_masks_equal_structural_route(schema_name, layout, grammars, smollm2_tokenizer):
    """Every token of the vocabulary, at every step: allowed here iff allowed by the CFG."""
    grammar = grammars(schema_name, layout)
    reference = grammars(schema_name, layout, "cfg")
    dumps = LAYOUTS[layout][1]
    docs = [DOCUMENTS[3], DOCUMENTS[10], {"x": "}", "y": [[{"z": []}], "]"]}]
    for doc in docs:
        text = json.dumps(doc, ensure_ascii=False, **dumps)
        m, r = grammar.matcher(), reference.matcher()
        for t in smollm2_tokenizer.encode(text, add_special_tokens=False):
            assert np.array_equal(m.allowed_token_ids(), r.allowed_token_ids()), text
            if not r.accept_token(t):
                break
            assert m.accept_token(t)
        assert m.is_accepting() == r.is_accepting()


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-999, 999) | st.text('ab}{][",\\:', max_size=4),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text('k}"', max_size=2), inner, max_size=3)
    ),
    max_leaves=12,
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(value=_JSON, cut=st.integers(0, 10**6), mutation=st.sampled_from(["drop", "dup", "swap"]))
def test_hypothesis_values_and_mutations(value, cut, mutation, grammars, smollm2_tokenizer):
    grammar = grammars("object", "none")
    doc = {"a": 7, "b": value, "zz": value}
    text = json.dumps(doc, ensure_ascii=False, separators=(",", ":"))
    assert walk(grammar, smollm2_tokenizer.encode(text, add_special_tokens=False))
    k = cut % len(text)
    bad = {
        "drop": text[:k] + text[k + 1 :],
        "dup": text[:k] + text[k] + text[k:],
        "swap": text[:k] + text[k + 1 : k + 2] + text[k : k + 1] + text[k + 2 :],
    }[mutation]
    try:
        parsed = json.loads(bad)
    except json.JSONDecodeError:
        is_valid = False
    else:
        if json.dumps(parsed, ensure_ascii=False, separators=(",", ":")) != bad:
            return  # other layout or a duplicate key: no verdict from the oracle
        is_valid = validator(OBJECT).is_valid(parsed)
    assert walk(grammar, smollm2_tokenizer.encode(bad, add_special_tokens=False)) == is_valid


def test_rollback_and_fork_across_frames(grammars, smollm2_tokenizer):
    grammar = grammars("object", "compact")
    text = json.dumps(DOCUMENTS[5], separators=(",", ":"))
    ids = smollm2_tokenizer.encode(text, add_special_tokens=False)
    m = grammar.matcher()
    rows, states = [], []
    for t in ids:
        rows.append(m.allowed_token_ids())
        states.append(m.state)
        assert m.accept_token(t)
    assert m.is_accepting() and m.num_accepted == len(ids)
    for back in (1, 3, len(ids)):
        other = m.fork()
        other.rollback(back)
        assert other.state == states[len(ids) - back]
        assert np.array_equal(other.allowed_token_ids(), rows[len(ids) - back])
        assert other.accept_tokens(ids[len(ids) - back :]) == back
        assert other.is_accepting()
    assert m.is_accepting()  # the original is untouched by its forks
    m.reset()
    assert m.num_accepted == 0 and np.array_equal(m.allowed_token_ids(), rows[0])
    eos = smollm2_tokenizer.eos_token_id
    assert not m.accept_token(eos)


def test_forced_bytes_stop_where_a_frame_can_open(smollm2_vocab):
    schema = {
        "type": "object",
        "properties": {"a": {"type": "object", "properties": {"b": True}, "required": ["b"]}},
        "required": ["a"],
        "additionalProperties": False,
    }
    g = compile_json_schema(schema, smollm2_vocab, whitespace="none")
    m = g.matcher()
    assert m.forced_bytes() == b'{"a":{"b":'
    assert m.accept_bytes(b'{"a":{"b":[')
    assert m.forced_bytes() == b""
    assert m.accept_bytes(b"1]")
    assert m.forced_bytes() == b"}}"  # pops the frame, then the schema's closing brackets
    assert m.accept_bytes(b"}}") and m.is_accepting() and m.is_terminated()
    indented = compile_json_schema(True, smollm2_vocab, indent=2).matcher()
    assert indented.accept_bytes(b"[\n  [")
    assert indented.forced_bytes() == b""  # "]" (empty) or a member
    assert indented.accept_bytes(b"\n")
    assert indented.forced_bytes() == b"    "  # a container at depth 1 (a frame) indents 4
    assert indented.accept_bytes(b"    1\n")
    assert indented.forced_bytes() == b"  ]"
    assert indented.accept_bytes(b"  ]\n]") and indented.is_terminated()


def test_marker_bytes_are_never_text(grammars, smollm2_vocab):
    m = grammars("object", "compact").matcher()
    assert m.accept_bytes(b'{"a":1,"b":')
    assert not m.accept_bytes(b"\x01")
    assert not m.accept_bytes(b"\x02\x01")
    bits = m.allowed_token_ids()
    for t in bits.tolist():
        assert b"\x01" not in smollm2_vocab.token_bytes[t]


def test_api_routes_and_bounds(smollm2_vocab):
    with pytest.raises(SchemaError, match="max_any_depth"):
        json_schema_to_regex(OBJECT, strict=False)
    assert "\\x01" not in json_schema_to_regex(OBJECT, strict=False, max_any_depth=2)
    assert isinstance(compile_json_schema(OBJECT, smollm2_vocab, route="regex", strict=False),
                      AnyValueGrammar)  # fmt: skip
    plain = {"type": "object", "properties": {"a": {"type": "integer"}}}
    assert isinstance(compile_json_schema(plain, smollm2_vocab), CompiledGrammar)
    bounded = compile_json_schema(OBJECT, smollm2_vocab, strict=False, max_any_depth=1)
    assert isinstance(bounded, CompiledGrammar)
    deep = b'{"a":1,"b":[[1]]}'
    assert not bounded.matcher().accept_bytes(deep)  # documented: deeper values are rejected
    assert compile_json_schema(OBJECT, smollm2_vocab, strict=False).matcher().accept_bytes(deep)
    with pytest.raises(SchemaError, match="indent"):
        compile_json_schema(OBJECT, smollm2_vocab, strict=False, indent=2, route="cfg")
    cfg = compile_json_schema(OBJECT, smollm2_vocab, strict=False, route="cfg").matcher()
    assert cfg.accept_bytes(b'{"a":1,"b":[[[[[{"c":[[]]}]]]]]}') and cfg.is_accepting()


def test_enum_checked_by_fullmatch_keeps_deep_values(smollm2_vocab):
    """An enum with sibling assertions checks its values by re.fullmatch: unconstrained parts
    of the siblings are bounded by the values' own depth there, not marked."""
    schema = {"type": "object", "enum": [{"a": [[[1]]]}, {"b": 2}, 3]}
    g = compile_json_schema(schema, smollm2_vocab, strict=False, whitespace="none")
    for text, ok in ((b'{"a":[[[1]]]}', True), (b'{"b":2}', True), (b"3", False)):
        m = g.matcher()
        assert (m.accept_bytes(text) and m.is_accepting()) == ok


def test_threads_share_one_grammar(smollm2_vocab, smollm2_tokenizer):
    """Matchers of one grammar in several threads (shared masks memo, per-thread scratch)."""
    from concurrent.futures import ThreadPoolExecutor

    grammar = compile_json_schema(OBJECT, smollm2_vocab, strict=False, cache=False)
    texts = [json.dumps(d, separators=(",", ":")) for d in DOCUMENTS[:8]]
    ids = [smollm2_tokenizer.encode(t, add_special_tokens=False) for t in texts]

    def masks(token_ids):
        m = grammar.matcher()
        out = []
        for t in token_ids:
            out.append(m.packed_row().copy())
            assert m.accept_token(t)
        return out

    expected = [masks(x) for x in ids]
    grammar._masks.clear()
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(masks, ids * 2))
    for a, b in zip(expected * 2, got, strict=True):
        assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))


def _needs_frames_reference(grammar: AnyValueGrammar) -> list[bool]:
    """Per schema state: does some probe token push a frame from it, or walk a marker byte
    with the automaton alone? Every probe from every state (no grouping), in Python."""
    from formcast.grammar.json_schema.any_value import frames

    cand = grammar.candidates
    flat, cell_base, auto_of, state_base, classes = grammar.machine.tables.arrays[:5]
    opt_lo = grammar.machine.tables.arrays[6]
    probes = [
        cand.probe_flat[cand.probe_lo[i] : cand.probe_lo[i + 1]].tolist()
        for i in range(len(cand.probe_lo) - 1)
    ]
    out = []
    for q in range(grammar.schema_grammar.num_states):
        needs = False
        for probe in probes:
            g, has_marker = q, False
            for byte in probe:
                if byte in (0x7B, 0x5B) and opt_lo[g] < opt_lo[g + 1]:
                    needs = True
                    break
                has_marker = has_marker or byte in (1, 2)
                g = frames._step(g, byte, flat, cell_base, auto_of, state_base, classes)
                if g < 0:
                    break
            needs = needs or (g >= 0 and has_marker)
            if needs:
                break
        out.append(needs)
    return out


@pytest.mark.parametrize(
    "schema",
    [
        OBJECT,
        AMBIGUOUS,
        {"type": "object", "properties": {"name": {"type": "string"}, "n": {"type": "number"}}},
        {"type": "array", "items": {"type": "object", "properties": {"k": {}}}, "maxItems": 2},
    ],
)
@pytest.mark.parametrize("whitespace", ["compact", "none"])  # ("none": only "{" can push)
def test_states_that_need_frames_equal_every_probe_from_every_state(
    smollm2_vocab, schema, whitespace
):
    grammar = compile_json_schema(
        schema, smollm2_vocab, strict=False, whitespace=whitespace, cache=False
    )
    assert isinstance(grammar, AnyValueGrammar)
    expected = _needs_frames_reference(grammar)
    assert [not plain for plain in grammar.is_plain_state] == expected
    assert any(expected) and not all(expected)
