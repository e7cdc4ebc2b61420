"""Hypothesis strategies for the fuzzers: JSON Schemas, regexes, Lark grammars, request bodies.

Every strategy mixes inputs that should compile with inputs that must be refused:

- `json_schemas`: well-formed schemas built from the keywords real schemas use (``type``,
  ``properties``, ``required``, ``additionalProperties``, ``items``, ``prefixItems``, ``enum``,
  ``const``, ``anyOf`` / ``oneOf`` / ``allOf``, ``$ref`` / ``$defs`` (recursive ones too),
  ``pattern``, ``format``, string / number / array / object bounds, ``patternProperties``),
  nested; and the same schemas with one mutation: a keyword given a value of the wrong type
  (``properties: "x"``, ``minimum: "zero"``), a dangling ``$ref``, a bad pattern, a subschema
  replaced by a non-schema, a huge number, an odd key (lone surrogates, controls).
- `regexes`: syntax trees printed as Python regex text (groups, classes, counted repeats,
  lazy quantifiers, flags, lookarounds and backreferences that formcast refuses), plus random
  strings over a regex alphabet, most of them invalid.
- `lark_grammars`: small generated Lark grammars (rules, string and regex terminals,
  ``* + ?``, ``~n``, ``%import common``, ``%ignore``) and the same texts mutated (a character
  deleted or inserted, two tokens swapped, a token duplicated).
- `chat_bodies` / `completion_bodies`: request bodies for ``/v1/chat/completions`` and
  ``/v1/completions``, valid-looking and broken (wrong types, missing and extra fields, huge
  values, nested junk in ``messages`` / ``tools`` / ``response_format``), some of them sent as
  raw bytes that are not JSON or not UTF-8.

Sizes are kept small (a few properties, counts in the tens) so one example compiles in a
fraction of a second on the real vocabulary; huge values appear where they must be refused
or bounded by a budget, not by compiling them in full.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import strategies as st

# ---------------------------------------------------------------------------- shared values

# Characters SmolLM2's tokens cannot write: its byte-level vocabulary has no token holding the
# bytes 0x04 0x06 0x13 0x14 0x16 0x1d 0xf1 0xf2 (0xf1 / 0xf2 lead U+40000..U+BFFFF).
UNWRITABLE = ["\x04", "\x1d", "\U00040000", "\U000abcde"]
# Text in schemas and Lark grammars leaves U+40000..U+BFFFF out: on the context-free route
# (recursive or large schemas, Lark) a string that needs them compiles, and generation then
# reaches a state where no token is allowed (DeadEndError, which fails every request of the
# engine step). Fixed on the regex route (compile_dfa cuts the DFA down to what the
# vocabulary can write: `regexes` and the choice fuzzer keep these characters), not yet on
# the context-free route (``GrammarSpec.lark('start: "a" "\U00040000"')`` dead-ends after
# "a"). JSON escapes the control bytes, so only U+40000..U+BFFFF is left out.
WRITABLE_CHARS = st.one_of(
    st.characters(max_codepoint=0x3FFFF, exclude_categories=("Cs",)),
    st.characters(min_codepoint=0xC0000),
)


def texts(min_size: int = 0, max_size: int = 5) -> st.SearchStrategy[str]:
    """Text of characters the vocabulary can write (see `WRITABLE_CHARS`)."""
    return st.text(alphabet=WRITABLE_CHARS, min_size=min_size, max_size=max_size)


# property names: plain, unicode, with JSON escapes, empty
KEYS = st.one_of(
    st.sampled_from(["a", "b", "id", "name", "x y", "", "é", "键", 'a"b', "a\\b", "\n", "$ref"]),
    texts(max_size=4),
)
SMALL_INTS = st.integers(-20, 20)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    SMALL_INTS,
    st.sampled_from([0.5, -1.25, 3.0, 1e-3]),
    texts(max_size=5),
)
JSON_VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(texts(max_size=3), inner, max_size=3)
    ),
    max_leaves=6,
)
# anything at all, for keyword values of the wrong type
JUNK = st.one_of(
    JSON_VALUES,
    st.sampled_from(
        ["x", "zero", "", -1, 2.5, 10**400, -(10**400), 1e308, float("inf"), float("nan"), []]
    ),
    st.sampled_from([{"type": "nope"}, {"$ref": 5}, [{"type": "string"}, 3], {"": {}}]),
)

# ECMA-262 patterns a schema may carry (valid ones, and a few formcast or ECMA refuse)
GOOD_PATTERNS = [
    "^[a-z]+$", "^\\d{3}-\\d{4}$", "a|b", "^x+y?$", "[A-Z]", "^[^\\s]*$", "^(ab)*$",
    "\\w+@\\w+\\.com", "^.{2,5}$", "\\p{L}", "^[\\u00e9-\\u00ff]$",
]  # fmt: skip
BAD_PATTERNS = ["[", "(", "a{2,1}", "(?<=a)b", "\\1(a)", "*", "a**", "(?P<n>a)", "\\", "[z-a]"]
FORMATS = [
    "date", "date-time", "time", "email", "uuid", "ipv4", "ipv6", "uri", "hostname",
    "duration", "regex", "no-such-format",
]  # fmt: skip


# ------------------------------------------------------------------------------ JSON Schema


def _strings() -> st.SearchStrategy[dict]:
    return st.fixed_dictionaries(
        {"type": st.just("string")},
        optional={
            "minLength": st.integers(0, 4),
            "maxLength": st.integers(0, 12),
            "pattern": st.sampled_from(GOOD_PATTERNS),
            "format": st.sampled_from(FORMATS),
        },
    )


def _numbers() -> st.SearchStrategy[dict]:
    bound = st.one_of(SMALL_INTS, st.sampled_from([-2.5, 0.5, 1.75, 100]))
    return st.fixed_dictionaries(
        {"type": st.sampled_from(["integer", "number"])},
        optional={
            "minimum": bound,
            "maximum": bound,
            "exclusiveMinimum": bound,
            "exclusiveMaximum": bound,
            "multipleOf": st.sampled_from([1, 2, 3, 0.5, 0.25, 10]),
        },
    )


_LEAVES = st.one_of(
    _strings(),
    _numbers(),
    st.sampled_from(
        [{"type": "boolean"}, {"type": "null"}, {}, True, False, {"type": ["string", "null"]}]
    ),
    st.builds(lambda values: {"enum": values}, st.lists(SCALARS, min_size=1, max_size=4)),
    st.builds(lambda value: {"const": value}, JSON_VALUES),
)


def _objects(children: st.SearchStrategy) -> st.SearchStrategy[dict]:
    @st.composite
    def build(draw: st.DrawFn) -> dict:
        properties = draw(st.dictionaries(KEYS, children, max_size=3))
        schema: dict[str, Any] = {"type": "object", "properties": properties}
        names = list(properties)
        if names or draw(st.booleans()):
            required = draw(st.lists(st.sampled_from(names or ["missing"]), unique=True))
            schema["required"] = required
        if draw(st.booleans()):
            schema["additionalProperties"] = draw(st.one_of(st.booleans(), children))
        if draw(st.integers(0, 4)) == 0:
            pattern = draw(st.sampled_from(["^a", "b$", "^[a-c]+$", "^x_"]))
            schema["patternProperties"] = {pattern: draw(children)}
        if draw(st.integers(0, 4)) == 0:
            schema["minProperties"] = draw(st.integers(0, 2))
            schema["maxProperties"] = draw(st.integers(0, 4))
        return schema

    return build()


def _arrays(children: st.SearchStrategy) -> st.SearchStrategy[dict]:
    return st.fixed_dictionaries(
        {"type": st.just("array")},
        optional={
            "items": st.one_of(children, st.booleans()),
            "prefixItems": st.lists(children, max_size=2),
            "minItems": st.integers(0, 3),
            "maxItems": st.integers(0, 5),
            "uniqueItems": st.booleans(),
        },
    )


def _combinators(children: st.SearchStrategy) -> st.SearchStrategy[dict]:
    return st.builds(
        lambda keyword, branches: {keyword: branches},
        st.sampled_from(["anyOf", "oneOf", "allOf"]),
        st.lists(children, min_size=1, max_size=3),
    )


def _nested(children: st.SearchStrategy) -> st.SearchStrategy:
    return st.one_of(_objects(children), _arrays(children), _combinators(children))


# a recursive definition: a linked list / tree node
_RECURSIVE_DEFS = {
    "node": {
        "type": "object",
        "properties": {
            "value": {"type": "integer"},
            "next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]},
        },
        "required": ["value"],
    }
}


@st.composite
def well_formed_schemas(draw: st.DrawFn) -> dict | bool:
    """A schema built from real keywords, possibly with ``$defs`` referenced by ``$ref``."""
    defs = draw(
        st.dictionaries(
            st.sampled_from(["A", "B", "item", "x y", "é"]), _LEAVES | _nested(_LEAVES), max_size=2
        )
    )
    if draw(st.integers(0, 5)) == 0:
        defs.update(_RECURSIVE_DEFS)
    refs = [{"$ref": "#/$defs/" + name.replace("~", "~0").replace("/", "~1")} for name in defs]
    leaves = _LEAVES | st.sampled_from(refs) if refs else _LEAVES
    body = draw(st.recursive(leaves, _nested, max_leaves=8))
    if not defs:
        return body
    if not isinstance(body, dict):
        body = {"anyOf": [body, refs[0]]}
    return {**body, "$defs": defs}


# keywords formcast reads, for the wrong-type mutation
SCHEMA_KEYWORDS = [
    "type", "properties", "required", "additionalProperties", "items", "prefixItems", "enum",
    "const", "anyOf", "oneOf", "allOf", "$ref", "$defs", "pattern", "format", "minLength",
    "maxLength", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
    "minItems", "maxItems", "patternProperties", "minProperties", "maxProperties",
    "uniqueItems", "not", "contains", "if", "then", "else", "propertyNames", "nullable",
    "dependentRequired", "dependentSchemas", "additionalItems", "definitions",
]  # fmt: skip
# named wrong values, each one a case a real client sent or could send
WRONG_VALUES = {
    "properties": ["x", ["a"], 3],
    "minimum": ["zero", None, [0]],
    "required": [5, "ab", [1, 2], {"a": True}],
    "items": [3, "string", None],
    "type": ["str", [], ["integer", 5], 7],
    "enum": [5, "a", {}],
    "pattern": [5, ["a"]],
    "multipleOf": [0, -1, "2"],
    "maxLength": [-1, 2.5, "3"],
    "$ref": [5, "#/nowhere", "#/$defs/missing", "other.json#/x", "#/properties/%%"],
    "anyOf": [[], {}, "x", [3]],
    "additionalProperties": ["no", 0],
    "prefixItems": [{}, "x"],
}
# huge but well-typed values: refused, bounded by a budget, or compiled (small languages)
HUGE_VALUES = {
    "maxLength": [10**6, 10**12, 10**400],
    "minLength": [10**5, 10**400],
    "maxItems": [10**6, 10**400],
    "minItems": [10**4],
    "minimum": [1e308, -(10**400), 10**30],
    "maximum": [-1e308, 10**400],
    "multipleOf": [1e-300, 1e-10, 10**40, 1e308],
    "exclusiveMaximum": [5e-324],
    "maxProperties": [10**9],
    "enum": [list(range(2000))],
}


def _dict_paths(node: Any, path: tuple = ()) -> list[tuple]:
    """Paths (tuples of keys / indices) to every dict in ``node``."""
    found = [path] if isinstance(node, dict) else []
    if isinstance(node, dict):
        for key, child in node.items():
            found += _dict_paths(child, (*path, key))
    elif isinstance(node, list):
        for index, child in enumerate(node):
            found += _dict_paths(child, (*path, index))
    return found


def _at(node: Any, path: tuple) -> Any:
    for step in path:
        node = node[step]
    return node


@st.composite
def malformed_schemas(draw: st.DrawFn) -> Any:
    """A well-formed schema with one thing broken (or not a schema at all)."""
    kind = draw(
        st.sampled_from(
            ["wrong_type", "named_wrong", "huge", "bad_pattern", "replace", "odd_key", "root"]
        )
    )
    if kind == "root":  # not a schema: a list, a number, a string, null
        return draw(st.one_of(st.lists(JSON_VALUES, max_size=2), SCALARS, st.just([{}])))
    schema = copy.deepcopy(draw(well_formed_schemas()))
    if not isinstance(schema, dict):
        schema = {"anyOf": [schema]}
    path = draw(st.sampled_from(_dict_paths(schema)))
    target = _at(schema, path)
    if kind == "wrong_type":
        target[draw(st.sampled_from(SCHEMA_KEYWORDS))] = draw(JUNK)
    elif kind == "named_wrong":
        keyword = draw(st.sampled_from(sorted(WRONG_VALUES)))
        target[keyword] = draw(st.sampled_from(WRONG_VALUES[keyword]))
    elif kind == "huge":
        keyword = draw(st.sampled_from(sorted(HUGE_VALUES)))
        target[keyword] = draw(st.sampled_from(HUGE_VALUES[keyword]))
        if keyword in ("maxLength", "minLength"):
            target.setdefault("type", "string")
    elif kind == "bad_pattern":
        bad = draw(st.sampled_from(BAD_PATTERNS))
        if draw(st.booleans()):
            target["pattern"] = bad
        else:
            target["patternProperties"] = {bad: {}}
    elif kind == "replace" and path:
        parent = _at(schema, path[:-1])
        parent[path[-1]] = draw(st.one_of(SCALARS, st.lists(SCALARS, max_size=2)))
    else:  # odd_key (or "replace" at the root): keys JSON and UTF-8 may not carry
        key = draw(st.sampled_from(["\ud800", "a\x00b", "\udfff\ud800", "\u2028", "\U0010ffff"]))
        target.setdefault("properties", {})
        if isinstance(target["properties"], dict):
            target["properties"][key] = {"type": "string"}
            target["required"] = [key]
        else:
            target["properties"] = {key: {}}
    return schema


def json_schemas() -> st.SearchStrategy[Any]:
    """Well-formed and malformed schemas, about half each."""
    return st.one_of(well_formed_schemas(), malformed_schemas())


# ----------------------------------------------------------------------------------- regexes

# atoms formcast compiles, and atoms it refuses or that need a byte the vocabulary lacks
_REGEX_ATOMS = [
    "a", "b", "é", "键", "\\d", "\\w", "\\s", "\\D", "\\W", ".", "[a-z]", "[^abc]", "[0-9_-]",
    "\\.", "\\n", "\\t", "\\u00e9", "\\x41", "[\\d\\s]", "", "[^\\W\\d]", "\\\\",
]  # fmt: skip
_BAD_REGEX_ATOMS = [
    "\\N{DIGIT ONE}", "[[:alpha:]]", "\\b", "\\B", "\\1", "(?=a)", "(?!b)", "(?<=c)", "(?<!d)",
    "^", "$", "\\A", "\\Z", "\\p{L}", *UNWRITABLE, "[\\x04-\\x06]", "[\\U00040000-\\U000bffff]",
    "a\\x1d|b",
]  # fmt: skip
_QUANTIFIERS = ["*", "+", "?", "*?", "+?", "??", "{2}", "{1,3}", "{0,}", "{,2}", "{2,5}?", "{0}"]
_BAD_QUANTIFIERS = ["{3,1}", "{100000}", "{1,1000000}", "*+", "{}", "{99999999999999999999}"]
_GROUPS = ["({})", "(?:{})", "(?i:{})", "(?s:{})", "(?#c){}"]
_BAD_GROUPS = ["(?>{})", "(?x){}", "(?P=name){}", "(?({}))", "(?P<name>{})"]


def _pick(draw: st.DrawFn, good: list[str], bad: list[str], allow_bad: bool) -> str:
    """From ``good``; if ``allow_bad``, from ``bad`` one time in six."""
    is_bad = allow_bad and draw(st.integers(0, 5)) == 0
    return draw(st.sampled_from(bad if is_bad else good))


@st.composite
def _regex_tree(draw: st.DrawFn, allow_bad: bool, depth: int = 3) -> str:
    """A regex syntax tree, printed: alternation of concatenations of quantified atoms; with
    ``allow_bad``, some of its parts are syntax formcast refuses."""
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        return _pick(draw, _REGEX_ATOMS, _BAD_REGEX_ATOMS, allow_bad)
    num_branches = draw(st.integers(1, 3))
    branches = []
    for _ in range(num_branches):
        parts = []
        for _ in range(draw(st.integers(1, 3))):
            part = draw(_regex_tree(allow_bad, depth - 1))
            if draw(st.integers(0, 2)) == 0:
                part = _pick(draw, _GROUPS, _BAD_GROUPS, allow_bad).format(part)
            if draw(st.integers(0, 2)) == 0:
                quantifier = _pick(draw, _QUANTIFIERS, _BAD_QUANTIFIERS, allow_bad)
                part = (part if len(part) <= 1 else f"(?:{part})") + quantifier
            parts.append(part)
        branches.append("".join(parts))
    return "|".join(branches)


REGEX_ALPHABET = "ab.*+?|()[]{}^$\\-,0123456789dswDSWpPLn:?<>=!#éx "


def regexes() -> st.SearchStrategy[str]:
    """Regex syntax trees printed as text (valid, with refused parts, with a global flag) and
    random regex-alphabet strings (mostly invalid)."""
    return st.one_of(
        _regex_tree(allow_bad=False),
        _regex_tree(allow_bad=True),
        st.text(alphabet=REGEX_ALPHABET, max_size=16),
        st.builds(
            lambda tree, flags: flags + tree,
            _regex_tree(allow_bad=False),
            st.sampled_from(["(?i)", "(?a)", "(?s)", "(?m)", "(?u)", "(?L)", "(?z)"]),
        ),
    )


# ------------------------------------------------------------------------------ Lark grammars

_LARK_TERMINALS = [
    '"a"', '"b"', '"hello"', '"\\n"', '"é"', '/[0-9]+/', '/[a-z]+/i', '/\\w+/', '"("', '")"',
    '/a|ab/', '"x"i', 'NUMBER', 'WORD', 'ESCAPED_STRING', 'WS',
]  # fmt: skip
# refused: a lookbehind, an empty literal, a malformed regex, an undefined terminal
_BAD_LARK_TERMINALS = ["/(?<=a)b/", '""', "/[/", "UNDEFINED", "/\\1/"]
_LARK_OPS = ["", "", "*", "+", "?", "~2", "~1..3", "~0"]


@st.composite
def _lark_source(draw: st.DrawFn) -> str:
    allow_bad = draw(st.booleans())
    num_rules = draw(st.integers(1, 4))
    names = ["start"] + [f"r{k}" for k in range(1, num_rules)]
    lines = []
    for index, name in enumerate(names):
        # Rules reference later rules only, never back: no recursion. Recursive ambiguous
        # grammars hit an open bug, mask time growing about tenfold per word generated:
        # `start: (WS? (start WORD)* "(")?` (with common.WORD, common.WS) takes 0.05, 0.3,
        # 0.8, 7 s for the masks after 4..7 random tokens, then minutes, stalling the
        # engine step (the CFG mask runtime's Earley exploration; no mask-time budget).
        # Recursion stays covered by the recursive JSON schemas (`_RECURSIVE_DEFS`).
        later = names[index + 1 :]
        alternatives = []
        for k in range(draw(st.integers(1, 3))):
            items = []
            if k == 0 and index + 1 < len(names):
                items.append(names[index + 1])  # every rule is reachable from start
            for _ in range(draw(st.integers(1, 3))):
                terminal = _pick(draw, _LARK_TERMINALS, _BAD_LARK_TERMINALS, allow_bad)
                item = draw(st.one_of(st.just(terminal), st.sampled_from(later or [terminal])))
                if draw(st.integers(0, 3)) == 0:
                    item = f"({item} {draw(st.sampled_from(_LARK_TERMINALS))})"
                if draw(st.integers(0, 4)) == 0:
                    items.append(f"[{item}]")  # (lark refuses `[x]?`: "Rules defined twice")
                else:
                    items.append(item + draw(st.sampled_from(_LARK_OPS)))
            alternatives.append(" ".join(items))
        prefix = draw(st.sampled_from(["", "", "?", "!"])) if index else ""
        lines.append(f"{prefix}{name}: " + " | ".join(alternatives))
    if draw(st.integers(0, 5)) != 0:  # (without: NUMBER, WORD ... are undefined)
        lines.append("%import common.NUMBER\n%import common.WORD\n%import common.WS")
        lines.append("%import common.ESCAPED_STRING")
        if draw(st.booleans()):
            lines.append("%ignore WS")
    return "\n".join(lines) + "\n"


@st.composite
def _mutated(draw: st.DrawFn, source: st.SearchStrategy[str]) -> str:
    text = draw(source)
    if not text:
        return text
    kind = draw(st.sampled_from(["delete", "insert", "swap", "duplicate"]))
    if kind in ("delete", "insert"):
        at = draw(st.integers(0, len(text) - 1))
        if kind == "delete":
            return text[:at] + text[at + 1 :]
        return text[:at] + draw(st.sampled_from(list(':|"/()[]*+?%~.\n\\ ab'))) + text[at:]
    tokens = text.split(" ")
    i = draw(st.integers(0, len(tokens) - 1))
    j = draw(st.integers(0, len(tokens) - 1))
    if kind == "swap":
        tokens[i], tokens[j] = tokens[j], tokens[i]
    else:
        tokens.insert(j, tokens[i])
    return " ".join(tokens)


def lark_grammars() -> st.SearchStrategy[str]:
    """Generated small Lark grammars, and the same mutated."""
    return st.one_of(_lark_source(), _mutated(_lark_source()))


# ----------------------------------------------------------------------------- request bodies

MODEL = "smollm2-135m"
# max_tokens is always present, small or a value that must be refused. Left out: null and a
# body without it, which mean "no limit" and generate to the context's end (1,000 tokens on
# CPU, half a minute), telling the fuzzer nothing a short generation does not.
GOOD_MAX_TOKENS = st.integers(1, 6)
MAX_TOKENS = st.one_of(GOOD_MAX_TOKENS, st.sampled_from([0, -1, 10**9, 2**63, 1.5, "4", True, [4]]))


def _good_messages() -> st.SearchStrategy[list]:
    message = st.fixed_dictionaries(
        {"role": st.sampled_from(["system", "user", "assistant"]), "content": texts(max_size=30)}
    )
    last = st.fixed_dictionaries({"role": st.just("user"), "content": texts(1, 30)})
    return st.builds(lambda head, tail: [*head, tail], st.lists(message, max_size=2), last)


def _messages() -> st.SearchStrategy[list]:
    text_part = st.fixed_dictionaries({"type": st.just("text"), "text": st.text(max_size=20)})
    content = st.one_of(
        st.text(max_size=40),
        st.lists(text_part, max_size=2),
        st.none(),
        JUNK,
        st.just([{"type": "image_url", "image_url": {"url": "http://x"}}]),
    )
    call = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    message = st.fixed_dictionaries(
        {
            "role": st.sampled_from(["system", "user", "assistant", "tool", "developer", "bot"]),
            "content": content,
        },
        optional={
            "name": st.one_of(st.text(max_size=5), JUNK),
            "tool_calls": st.one_of(JUNK, st.just([call])),
            "tool_call_id": st.text(max_size=5),
            "extra": JUNK,
        },
    )
    return st.one_of(_good_messages(), st.lists(message, max_size=3), JUNK)


def _schema_format(schemas: st.SearchStrategy) -> st.SearchStrategy[dict]:
    return st.builds(
        lambda schema, name, strict: {
            "type": "json_schema",
            "json_schema": {"name": name, "schema": schema, "strict": strict},
        },
        schemas,
        st.sampled_from(["t", "answer"]),
        st.sampled_from([True, False]),
    )


def _response_formats() -> st.SearchStrategy[Any]:
    junk_format = st.builds(
        lambda fields: {"type": "json_schema", "json_schema": fields},
        st.dictionaries(st.sampled_from(["name", "schema", "strict", "x"]), JUNK),
    )
    return st.one_of(
        _schema_format(json_schemas()),
        junk_format,
        st.sampled_from([{"type": "json_schema"}, {"type": "xml"}, {"type": "text", "x": 1}]),
        JUNK,
    )


def _tool(parameters: st.SearchStrategy) -> st.SearchStrategy[dict]:
    function = st.fixed_dictionaries(
        {"name": st.sampled_from(["get_weather", "f", "lookup_2"]), "parameters": parameters},
        optional={"description": texts(max_size=10), "strict": st.booleans()},
    )
    return st.fixed_dictionaries({"type": st.just("function"), "function": function})


def _tools() -> st.SearchStrategy[Any]:
    junk_tool = st.fixed_dictionaries(
        {
            "type": st.sampled_from(["function", "retrieval"]),
            "function": st.dictionaries(
                st.sampled_from(["name", "parameters", "description", "x"]), JUNK
            ),
        }
    )
    return st.lists(st.one_of(_tool(json_schemas()), junk_tool, JUNK), max_size=2)


def _good_object_schemas() -> st.SearchStrategy[dict]:
    """Object schemas, as tools' parameters and most response formats have."""
    return st.builds(
        lambda schema: schema if schema.get("type") == "object" else {
            "type": "object", "properties": {"value": schema}, "required": ["value"],
        },
        well_formed_schemas().filter(lambda schema: isinstance(schema, dict)),
    )  # fmt: skip


_GOOD_GRAMMAR_FIELDS = {
    "response_format": st.one_of(
        _schema_format(_good_object_schemas()), st.just({"type": "json_object"})
    ),
    "regex": regexes(),
    "choice": st.lists(texts(1, 6), min_size=1, max_size=4),
    "grammar": lark_grammars(),
}


def _good_sampling_fields() -> dict[str, st.SearchStrategy]:
    """Optional fields shared by both endpoints, with values a client would send."""
    return {
        "temperature": st.floats(0, 2),
        "top_p": st.floats(0.05, 1),
        "n": st.integers(1, 3),
        "stream": st.booleans(),
        "stream_options": st.just({"include_usage": True}),
        "stop": st.one_of(texts(1, 3), st.lists(texts(1, 3), max_size=4)),
        "presence_penalty": st.floats(-2, 2),
        "frequency_penalty": st.floats(-2, 2),
        "logit_bias": st.dictionaries(
            st.sampled_from(["0", "1", "49151", "300"]), st.floats(-100, 100), max_size=2
        ),
        "seed": st.integers(0, 2**31),
        "top_k": st.integers(1, 50),
        "min_p": st.floats(0, 1),
        "repetition_penalty": st.floats(0.8, 1.5),
        "min_tokens": st.integers(0, 2),
        "ignore_eos": st.booleans(),
        "stop_token_ids": st.lists(st.integers(0, 49_151), max_size=2),
        "user": texts(max_size=5),
    }


def _sampling_fields() -> dict[str, st.SearchStrategy]:
    """Optional fields shared by both endpoints: plausible, out-of-range and ill-typed values."""
    number = st.one_of(st.floats(-2, 3), st.sampled_from([float("nan"), 1e309, "0.5", None]))
    count = st.one_of(st.integers(-2, 3), st.sampled_from([10**6, 2**64, "2", 1.0, None]))
    return {
        "temperature": number,
        "top_p": number,
        "n": count,
        "stream": st.one_of(st.booleans(), JUNK),
        "stream_options": st.one_of(st.just({"include_usage": True}), JUNK),
        "stop": st.one_of(st.text(max_size=3), st.lists(st.text(max_size=3), max_size=6), JUNK),
        "presence_penalty": number,
        "frequency_penalty": number,
        "logit_bias": st.one_of(
            st.dictionaries(st.sampled_from(["0", "1", "49151", "99999", "-1", "x"]), number),
            JUNK,
        ),
        "seed": st.one_of(st.integers(-(2**70), 2**70), JUNK),
        "top_k": count,
        "min_p": number,
        "repetition_penalty": number,
        "min_tokens": count,
        "ignore_eos": st.one_of(st.booleans(), JUNK),
        "stop_token_ids": st.one_of(st.lists(st.integers(-5, 10**6), max_size=3), JUNK),
        "regex": st.one_of(regexes(), JUNK),
        "choice": st.one_of(st.lists(st.text(max_size=6), max_size=4), JUNK),
        "grammar": st.one_of(lark_grammars(), JUNK),
        "no_such_field": JUNK,
    }


def _body(required: dict, good: dict, good_grammars: dict, broken: dict) -> st.SearchStrategy[dict]:
    """Half the bodies are plausible: every ``required`` field from its first (good)
    strategy, some ``good`` fields, at most one grammar field. The other half are broken:
    ``required`` fields from their second strategy (each dropped now and then; max_tokens
    never, see `MAX_TOKENS`) and some ``broken`` fields. A third of the plausible ones
    stream."""

    @st.composite
    def build(draw: st.DrawFn) -> dict:
        is_plausible = draw(st.booleans())
        body = {}
        for name, (good_value, any_value) in required.items():
            if is_plausible:
                body[name] = draw(good_value)
            elif name == "max_tokens" or draw(st.integers(0, 15)) != 0:
                body[name] = draw(any_value)
        optional = good if is_plausible else broken
        for name in draw(st.lists(st.sampled_from(sorted(optional)), max_size=3, unique=True)):
            body[name] = draw(optional[name])
        if is_plausible and draw(st.booleans()):
            name = draw(st.sampled_from(sorted(good_grammars)))
            body[name] = draw(good_grammars[name])
        if is_plausible and draw(st.integers(0, 2)) == 0:
            body["stream"] = True
        return body

    return build()


_MODELS = st.one_of(st.just(MODEL), st.just(MODEL), JUNK)


def chat_bodies() -> st.SearchStrategy[dict]:
    """Bodies for ``/v1/chat/completions``."""
    required = {
        "model": (st.just(MODEL), _MODELS),
        "messages": (_good_messages(), _messages()),
        "max_tokens": (GOOD_MAX_TOKENS, MAX_TOKENS),
    }
    good = {
        **_good_sampling_fields(),
        "logprobs": st.booleans(),
        "top_logprobs": st.integers(0, 5),
        "parallel_tool_calls": st.booleans(),
    }
    good_grammars = {
        **_GOOD_GRAMMAR_FIELDS,
        "tools": st.lists(_tool(_good_object_schemas()), min_size=1, max_size=2),
    }
    broken = {
        **_sampling_fields(),
        "response_format": _response_formats(),
        "tools": st.one_of(_tools(), JUNK),
        "tool_choice": st.one_of(
            st.sampled_from(["none", "auto", "required", "any"]),
            st.just({"type": "function", "function": {"name": "get_weather"}}),
            JUNK,
        ),
        "logprobs": st.one_of(st.booleans(), JUNK),
        "top_logprobs": st.one_of(st.integers(-1, 25), JUNK),
        "max_completion_tokens": MAX_TOKENS,
        "parallel_tool_calls": st.one_of(st.booleans(), JUNK),
        "audio": JUNK,
        "functions": JUNK,
        "modalities": st.one_of(st.just(["text"]), JUNK),
    }
    return _body(required, good, good_grammars, broken)


def completion_bodies() -> st.SearchStrategy[dict]:
    """Bodies for ``/v1/completions``."""
    good_prompt = st.one_of(
        texts(1, 30),
        st.lists(texts(1, 10), min_size=1, max_size=3),
        st.lists(st.integers(0, 49_151), min_size=1, max_size=8),
        st.lists(st.lists(st.integers(0, 49_151), min_size=1, max_size=4), min_size=1, max_size=2),
    )
    prompt = st.one_of(
        good_prompt,
        st.lists(st.integers(-3, 60_000), min_size=1, max_size=8),
        st.sampled_from(["", [], [[]], [""], "word " * 2000, [7] * 5000]),
        JUNK,
    )
    required = {
        "model": (st.just(MODEL), _MODELS),
        "prompt": (good_prompt, prompt),
        "max_tokens": (GOOD_MAX_TOKENS, MAX_TOKENS),
    }
    good = {
        **_good_sampling_fields(),
        "logprobs": st.integers(0, 5),
        "echo": st.booleans(),
    }
    broken = {
        **_sampling_fields(),
        "logprobs": st.one_of(st.integers(-1, 8), JUNK),
        "echo": st.one_of(st.booleans(), JUNK),
        "best_of": st.one_of(st.integers(0, 3), JUNK),
        "suffix": st.one_of(st.text(max_size=3), JUNK),
        "response_format": _response_formats(),
    }
    return _body(required, good, _GOOD_GRAMMAR_FIELDS, broken)


def raw_body(body: dict, how: str) -> bytes:
    """``body`` sent as bytes that are valid JSON or not: ``how`` says which damage."""
    text = json.dumps(body, allow_nan=True)
    data = text.encode("utf-8", "surrogatepass")
    if how == "json":
        return data
    if how == "truncated":
        return data[: len(data) // 2]
    if how == "bad_utf8":  # an invalid UTF-8 sequence inside the first string value
        quote = data.find(b'"', data.find(b":"))
        return data[: quote + 1] + b"\xff\xfe\xc3" + data[quote + 1 :]
    if how == "nested":  # deep nesting in a field the schema reads
        depth = 50_000
        return data[:-1] + b', "metadata": ' + b"[" * depth + b"]" * depth + b"}"
    if how == "not_object":
        return b"[" + data + b"]"
    raise ValueError(f"unknown damage {how!r}")


RAW_DAMAGE = ["json", "json", "json", "json", "truncated", "bad_utf8", "nested", "not_object"]
