"""A JSON Schema corpus that stands for schemas in the wild (issue 24), written with a fixed seed.

The shared JSONSchemaBench splits are a sample we must not tune to; this corpus is built
independently of them: hand-written configuration-file shapes (Docker Compose, GitHub Actions,
OpenAPI 3 fragments, package manifests, tsconfig, ESLint, Kubernetes objects, CI pipelines,
LLM tool schemas with pydantic-like ``$defs``) in draft-07 and 2020-12 style, and seeded
generated schemas (large flat objects, long enums, deep ``$ref`` chains and DAGs, wide unions,
nested arrays of objects, recursive trees). None is copied from a published schema.

Instances: hand-written realistic ones, draws of hypothesis-jsonschema (seeded, generate
phase only, under a time limit) or of a small seeded sampler of the generated schemas' keywords,
and mutants of valid instances (drop a key, wrong type, out of range, extra property, duplicate
array item, broken pattern). Every label is the oracle's
(``tests.grammar.schema_oracle.validator(schema).is_valid``), never a mutation's intent.
Instances whose text a tokenizer would not give back (control, unassigned, private-use code
points, which hypothesis draws) or with floats in exponent notation are left out.
Deterministic given the seed, except that a hypothesis draw finishing near its time limit
(``HYPOTHESIS_LIMIT_S``, in a killed child process) can come out differently under heavy load;
each row has its own generator, so such a difference stays in its row.

Writes ``benchmarks/data/wild_corpus.jsonl`` in the row format of the shared splits
(``id, split, name, schema, tests=[{description, data, valid}], meta, description``), ``split``
being the origin family. Run by hand:

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/wild_corpus.py
"""

from __future__ import annotations

import copy
import json
import random
import string
import sys
import unicodedata
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.grammar.schema_oracle import validator  # noqa: E402

OUT = ROOT / "benchmarks" / "data" / "wild_corpus.jsonl"
SEED = 24
DRAFT7 = "http://json-schema.org/draft-07/schema#"
DRAFT2020 = "https://json-schema.org/draft/2020-12/schema"
# per schema; hypothesis-jsonschema inlines $refs (a DAG blows up). Draws that finish near the
# limit make the output depend on machine load: the limit is far above the usual draw time.
HYPOTHESIS_LIMIT_S = 20
NUM_DRAWS = 12  # hypothesis examples tried per schema, of which at most 2 are kept
MAX_TESTS = 8
ODD_CATEGORIES = {"Cc", "Cf", "Co", "Cs", "Cn"}

Json = Any


# ---------------------------------------------------------------------------------------------
# instances: a seeded sampler for the generated schemas' keyword subset, hypothesis draws,
# mutants; labels by the oracle
# ---------------------------------------------------------------------------------------------

WORDS = ["alpha", "beta", "gamma", "delta", "omega", "core", "edge", "node", "api", "web", "db"]
FORMAT_EXAMPLES = {
    "date-time": ["2024-05-17T08:30:00Z", "2023-12-01T23:59:59+02:00"],
    "date": ["2024-05-17", "1999-01-31"],
    "email": ["ops@example.com", "jane.doe+ci@example.org"],
    "uri": ["https://example.com/a/b?x=1", "http://localhost:8080/"],
    "uri-template": ["https://api.example.com/users/{id}", "/repos/{owner}/{repo}"],
    "uuid": ["3f1c2d9e-8a4b-4c6d-9e0f-1a2b3c4d5e6f"],
    "ipv4": ["10.0.0.1"],
    "hostname": ["db.internal.example"],
}


def _resolve(ref: str, root: Json) -> Json:
    node = root
    for part in ref.lstrip("#").split("/")[1:]:
        node = node[part.replace("~1", "/").replace("~0", "~")]
    return node


def sample(schema: Json, root: Json, rng: random.Random, depth: int = 0) -> Json:
    """A value of ``schema`` for the keyword subset the generated schemas use.

    Beyond ``depth`` 6 optional properties are skipped and arrays take their minimum length, so
    recursive schemas terminate; the caller labels the result with the oracle anyway.
    """
    if schema is True or schema == {}:
        return rng.choice([1, "x", None, True])
    if "$ref" in schema:
        return sample(_resolve(schema["$ref"], root), root, rng, depth)
    if "const" in schema:
        return copy.deepcopy(schema["const"])
    if "enum" in schema:
        return copy.deepcopy(rng.choice(schema["enum"]))
    for key in ("anyOf", "oneOf"):
        if key in schema:
            branches = schema[key]
            if depth > 6:  # the base case of a recursive union comes first by construction
                return sample(branches[0], root, rng, depth + 1)
            return sample(rng.choice(branches), root, rng, depth + 1)
    if "allOf" in schema:
        merged: dict = {"type": "object", "properties": {}, "required": []}
        for part in schema["allOf"]:
            part = _resolve(part["$ref"], root) if "$ref" in part else part
            merged["properties"].update(part.get("properties", {}))
            merged["required"] += part.get("required", [])
        return sample(merged, root, rng, depth)
    kind = schema.get("type", "object")
    if isinstance(kind, list):
        kind = rng.choice(kind)
    if kind == "null":
        return None
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "integer":
        lo, hi = schema.get("minimum", -1000), schema.get("maximum", 1000)
        step = schema.get("multipleOf", 1)
        return rng.randint(-(-lo // step), hi // step) * step
    if kind == "number":
        lo, hi = schema.get("minimum", -1000.0), schema.get("maximum", 1000.0)
        return round(rng.uniform(lo, hi), 2)
    if kind == "string":
        if "format" in schema:
            return rng.choice(FORMAT_EXAMPLES[schema["format"]])
        if "pattern" in schema:
            # a pattern without an example generator gets a word (the oracle labels it)
            return PATTERN_EXAMPLES.get(schema["pattern"], lambda r: r.choice(WORDS))(rng)
        lo, hi = schema.get("minLength", 0), min(schema.get("maxLength", 12), 12)
        return "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(lo, hi)))
    if kind == "array":
        if "prefixItems" in schema:
            return [sample(s, root, rng, depth + 1) for s in schema["prefixItems"]]
        lo = schema.get("minItems", 0)
        hi = lo if depth > 6 else min(schema.get("maxItems", lo + 3), lo + 3)
        items = [sample(schema.get("items", {}), root, rng, depth + 1) for _ in range(hi)]
        if schema.get("uniqueItems"):
            unique: list = []
            for item in items:
                if item not in unique:
                    unique.append(item)
            items = unique
        return items[: max(lo, rng.randint(lo, hi))] if hi > lo else items
    out = {}
    required = set(schema.get("required", []))
    for name, sub in schema.get("properties", {}).items():
        if name in required or (depth <= 6 and rng.random() < 0.35):
            out[name] = sample(sub, root, rng, depth + 1)
    return out


PATTERN_EXAMPLES: dict[str, Callable[[random.Random], str]] = {
    "^[a-z][a-z0-9_]{2,30}$": lambda r: r.choice(WORDS) + "_" + str(r.randint(0, 99)),
    "^[A-Z]{3}$": lambda r: "".join(r.choice(string.ascii_uppercase) for _ in range(3)),
    "^v[0-9]+\\.[0-9]+\\.[0-9]+$": lambda r: (
        f"v{r.randint(0, 9)}.{r.randint(0, 20)}.{r.randint(0, 9)}"
    ),
    "^[0-9a-f]{8}$": lambda r: "".join(r.choice("0123456789abcdef") for _ in range(8)),
    "^\\+?[0-9 -]{7,15}$": lambda r: "+49 30 " + str(r.randint(100000, 999999)),
    "^[0-9]+(-[0-9]+)?$": lambda r: f"{r.randint(1, 999)}-{r.randint(1000, 9999)}",
}


def _legacy_many_namespace() -> Any:
    """``cu.many`` with the ``more()`` protocol hypothesis-jsonschema 0.23 calls.

    Hypothesis 6.1xx replaced ``many.more()`` by iterating ``with many(...) as elements``;
    ``more()`` here enters the context on first use and steps the iterator, leaving the context
    when it stops (same draws, same span structure).
    """
    from types import SimpleNamespace

    from hypothesis.internal.conjecture import utils as cu

    stop = object()

    class LegacyMany(cu.many):
        def more(self) -> bool:
            if self._depth is None:
                self.__enter__()
                self._legacy_steps = iter(self)
            if next(self._legacy_steps, stop) is stop:
                self.__exit__(None)
                return False
            return True

    return SimpleNamespace(**{**vars(cu), "many": LegacyMany})


def _draw_in_child(schema: Json, seed: int, conn: Any) -> None:
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hyp_seed
    from hypothesis_jsonschema import _from_schema, from_schema

    _from_schema.cu = _legacy_many_namespace()
    drawn: list[Json] = []
    try:
        strategy = from_schema(schema)

        @hyp_seed(seed)
        @settings(
            max_examples=NUM_DRAWS,
            database=None,
            deadline=None,
            phases=[Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        @given(strategy)
        def collect(value):
            drawn.append(value)

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            collect()
        conn.send((drawn, ""))
    except Exception as exc:  # unsupported keyword, unsatisfiable, recursion
        conn.send((drawn, f"{type(exc).__name__}: {str(exc)[:120]}"))


def _hypothesis_draws(schema: Json, seed: int) -> list[Json]:
    """Up to ``NUM_DRAWS`` seeded hypothesis-jsonschema examples, drawn in a forked child
    killed after ``HYPOTHESIS_LIMIT_S`` (it inlines $refs, which can blow up); [] on failure."""
    import multiprocessing as mp

    ctx = mp.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_draw_in_child, args=(schema, seed, child))
    proc.start()
    drawn, error = [], "over the time limit"
    if parent.poll(HYPOTHESIS_LIMIT_S):
        drawn, error = parent.recv()
    proc.kill()
    proc.join()
    if error:
        print(f"    hypothesis: {error}", file=sys.stderr)
    return drawn


def _nodes(value: Json, path: tuple = ()) -> Iterator[tuple[tuple, Json]]:
    yield path, value
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _nodes(v, path + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _nodes(v, path + (i,))


def _replace(value: Json, path: tuple, new: Json) -> Json:
    if not path:
        return new
    out = copy.deepcopy(value)
    node = out
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = new
    return out


def _wrong_type(v: Json) -> Json:
    if isinstance(v, bool):
        return "true"
    if isinstance(v, (int, float)):
        return str(v)
    if isinstance(v, str):
        return 12345
    if v is None:
        return 0
    return [] if isinstance(v, dict) else {"item": 1}


def mutate(value: Json, rng: random.Random) -> tuple[str, Json] | None:
    """One random mutation of ``value``: (what was done, new value); None if it does not apply."""
    nodes = list(_nodes(value))
    kind = rng.choice(
        ["drop_key", "wrong_type", "out_of_range", "extra_property", "duplicate_item", "pattern"]
    )
    if kind == "drop_key":
        cands = [(p, n) for p, n in nodes if isinstance(n, dict) and n]
        if not cands:
            return None
        path, node = rng.choice(cands)
        smaller = dict(node)
        smaller.pop(rng.choice(sorted(smaller)))
        return f"drop a key at {list(path)}", _replace(value, path, smaller)
    if kind == "wrong_type":
        path, node = rng.choice(nodes)
        return f"wrong type at {list(path)}", _replace(value, path, _wrong_type(node))
    if kind == "out_of_range":
        cands = [
            (p, n)
            for p, n in nodes
            if (isinstance(n, (int, float)) and not isinstance(n, bool)) or isinstance(n, str)
        ]
        if not cands:
            return None
        path, node = rng.choice(cands)
        if isinstance(node, str):
            new = rng.choice(["", node * 40 + "x" * 300])
        else:
            new = rng.choice([-(10**7), 10**9, node + 0.5])
        return f"out of range at {list(path)}", _replace(value, path, new)
    if kind == "extra_property":
        cands = [(p, n) for p, n in nodes if isinstance(n, dict)]
        if not cands:
            return None
        path, node = rng.choice(cands)
        return f"extra property at {list(path)}", _replace(
            value, path, {**node, "unexpected_field": "surplus"}
        )
    if kind == "duplicate_item":
        cands = [(p, n) for p, n in nodes if isinstance(n, list) and n]
        if not cands:
            return None
        path, node = rng.choice(cands)
        return f"duplicate array item at {list(path)}", _replace(value, path, node + [node[0]])
    cands = [(p, n) for p, n in nodes if isinstance(n, str)]
    if not cands:
        return None
    path, node = rng.choice(cands)
    return f"broken pattern at {list(path)}", _replace(value, path, "Not A Match #!" + node[:3])


def _is_json(value: Json) -> bool:
    """JSON that round-trips, and whose text a tokenizer round-trips: NFC, and no control,
    format, private-use, surrogate or unassigned characters (hypothesis draws any code point;
    SmolLM2's tokenizer does not give back e.g. C1 controls or unassigned planes); no float in
    exponent notation (formcast, xgrammar and llguidance write bounded numbers as ``-?I(.F)?``,
    and ``serialize`` keeps Python's ``1e-05``: such a walk would measure the layout)."""
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False)
        if json.loads(text) != value:
            return False
    except (ValueError, TypeError):
        return False
    if not unicodedata.is_normalized("NFC", text):
        return False
    if any(isinstance(v, float) and "e" in repr(v) for _, v in _nodes(value)):
        return False  # 1e-63: bounded numbers are written without exponent (layout, all engines)
    return all(unicodedata.category(ch) not in ODD_CATEGORIES for ch in text)


def instances(
    schema: Json, hand: list[Json], rng: random.Random, seed: int, use_sampler: bool
) -> list[dict]:
    """3-8 tests: valid ones (hand-written, hypothesis, sampler) and mutants, oracle labels."""
    oracle = validator(schema)
    pool: list[tuple[str, Json]] = [("hand-written", v) for v in hand]
    draws = [d for d in _hypothesis_draws(schema, seed) if _is_json(d)]
    draws = [d for d in draws if oracle.is_valid(d)]
    # the larger draws say more than hypothesis's first, minimal ones
    draws.sort(key=lambda d: len(json.dumps(d)), reverse=True)
    pool += [("hypothesis-jsonschema draw", d) for d in draws[:2]]
    if use_sampler or not any(oracle.is_valid(v) for _, v in pool):
        for _ in range(3):
            pool.append(("seeded sampler", sample(schema, schema, rng)))
    tests: list[dict] = []
    seen: set[str] = set()

    def add(description: str, data: Json) -> None:
        key = json.dumps(data, sort_keys=True)
        if key in seen or not _is_json(data) or len(key) > 60_000:
            return
        seen.add(key)
        tests.append({"description": description, "data": data, "valid": oracle.is_valid(data)})

    for description, data in pool:
        add(description, data)
    valid_bases = [t["data"] for t in tests if t["valid"]][:4]
    tests = [t for t in tests if t["valid"]][:4] + [t for t in tests if not t["valid"]][:2]
    num_invalid_wanted = max(2, MAX_TESTS - len(tests) - 1)
    mutants: list[dict] = []
    for _ in range(60):
        if not valid_bases or len(mutants) >= num_invalid_wanted:
            break
        mutated = mutate(rng.choice(valid_bases), rng)
        if mutated is None:
            continue
        before = len(tests)
        add("mutant: " + mutated[0], mutated[1])
        if len(tests) > before:
            last = tests.pop()
            # keep mostly invalid mutants, and a valid one now and then
            if not last["valid"] or not any(m["valid"] for m in mutants):
                mutants.append(last)
    tests += mutants
    return tests[:MAX_TESTS]


# ---------------------------------------------------------------------------------------------
# generated families (seeded): sizes and shapes that real large schemas reach
# ---------------------------------------------------------------------------------------------


def _leaf(rng: random.Random, name: str) -> Json:
    """A property schema of a mixed type, with the bounds real flat schemas put on leaves."""
    pick = rng.randrange(12)
    if pick == 0:
        return {"type": "string", "maxLength": rng.choice([16, 64, 255, 1024])}
    if pick == 1:
        return {"type": ["string", "null"], "maxLength": rng.choice([32, 128])}
    if pick == 2:
        return {"type": "integer", "minimum": 0, "maximum": rng.choice([100, 65535, 2**31 - 1])}
    if pick == 3:
        return {"type": "number", "minimum": -90.0, "maximum": 90.0}
    if pick == 4:
        return {"type": "boolean"}
    if pick == 5:
        return {"enum": [f"{name}_{w}" for w in rng.sample(WORDS, rng.randint(2, 6))]}
    if pick == 6:
        return {"type": "string", "format": rng.choice(["date-time", "email", "uri", "date"])}
    if pick == 7:
        return {"type": "array", "items": {"type": "string", "maxLength": 32}, "maxItems": 10}
    if pick == 8:
        return {"type": "string", "pattern": rng.choice(sorted(PATTERN_EXAMPLES))}
    if pick == 9:
        return {"type": ["integer", "null"], "minimum": -1}
    if pick == 10:
        return {
            "type": "object",
            "properties": {"id": {"type": "integer"}, "label": {"type": "string"}},
            "required": ["id"],
            "additionalProperties": False,
        }
    return {"type": "string", "minLength": 1}


def gen_flat(rng: random.Random) -> list[tuple[str, Json, list[Json]]]:
    out = []
    for num_props, closed, draft in [(200, True, DRAFT7), (400, False, DRAFT2020),
                                     (700, True, DRAFT2020), (1000, False, DRAFT7)]:  # fmt: skip
        props = {}
        for i in range(num_props):
            name = f"{rng.choice(WORDS)}_{rng.choice(WORDS)}_{i}"
            props[name] = _leaf(rng, name)
        required = sorted(rng.sample(sorted(props), num_props // 20), key=list(props).index)
        schema = {"$schema": draft, "title": f"Event with {num_props} fields", "type": "object",
                  "properties": props, "required": required}  # fmt: skip
        if closed:
            schema["additionalProperties"] = False
        out.append((f"flat_{num_props}", schema, []))
    return out


def gen_enum(rng: random.Random) -> list[tuple[str, Json, list[Json]]]:
    def token(i: int) -> str:
        return f"{rng.choice(WORDS)}-{i:05d}-{''.join(rng.choices(string.ascii_lowercase, k=3))}"

    sku = [token(i) for i in range(500)]
    codes = sorted({"".join(rng.choices(string.ascii_uppercase, k=4)) for _ in range(1200)})
    mixed: list = [token(i) for i in range(2000)] + list(range(0, 1000, 2))
    rng.shuffle(mixed)
    big = [token(i) for i in range(5000)]
    return [
        ("enum_500_property", {"$schema": DRAFT7, "type": "object",
          "properties": {"sku": {"enum": sku}, "qty": {"type": "integer", "minimum": 1}},
          "required": ["sku", "qty"], "additionalProperties": False}, []),
        ("enum_1000_codes_unique_array", {"type": "object",
          "properties": {"codes": {"type": "array", "items": {"enum": codes[:1000]},
                                   "uniqueItems": True, "minItems": 1, "maxItems": 5}},
          "required": ["codes"]}, []),
        ("enum_2500_mixed_types", {"$schema": DRAFT2020, "enum": mixed}, []),
        ("enum_5000_top_level", {"$schema": DRAFT2020, "type": "object",
          "properties": {"product": {"type": "string", "enum": big},
                         "note": {"type": "string", "maxLength": 40}},
          "required": ["product"]}, []),
    ]  # fmt: skip


def gen_refs(rng: random.Random) -> list[tuple[str, Json, list[Json]]]:
    out = []
    for depth, draft in [(10, DRAFT7), (25, DRAFT2020), (40, DRAFT7)]:
        defs_key = "definitions" if draft == DRAFT7 else "$defs"
        defs = {}
        for i in range(depth):
            props = {f"field_{i}": _leaf(rng, f"f{i}")}
            if i + 1 < depth:
                props["child"] = {"$ref": f"#/{defs_key}/level_{i + 1}"}
            defs[f"level_{i}"] = {"type": "object", "properties": props,
                                  "required": sorted(props), "additionalProperties": False}  # fmt: skip
        out.append((f"ref_chain_{depth}", {"$schema": draft, defs_key: defs,
                                            "$ref": f"#/{defs_key}/level_0"}
                    if draft == DRAFT2020 else
                    {"$schema": draft, defs_key: defs, "type": "object",
                     "properties": {"root": {"$ref": f"#/{defs_key}/level_0"}},
                     "required": ["root"]}, []))  # fmt: skip
    for depth, width in [(12, 3), (30, 2)]:
        defs = {}
        for level in range(depth):
            for j in range(width):
                props: dict = {"name": {"type": "string", "maxLength": 20}}
                if level + 1 < depth:
                    for k in rng.sample(range(width), 2):
                        props[f"link_{k}"] = {"$ref": f"#/$defs/n{level + 1}_{k}"}
                defs[f"n{level}_{j}"] = {"type": "object", "properties": props,
                                         "required": ["name"]}  # fmt: skip
        out.append((f"ref_dag_{depth}x{width}", {"$schema": DRAFT2020, "$defs": defs,
                                                 "$ref": "#/$defs/n0_0"}, []))  # fmt: skip
    # pydantic inheritance: allOf of a $ref base and own properties, 15 classes deep
    defs = {"Base": {"type": "object", "properties": {"id": {"type": "integer", "minimum": 1},
                                                      "created": {"type": "string",
                                                                  "format": "date-time"}},
                     "required": ["id"]}}  # fmt: skip
    parent = "Base"
    for i in range(15):
        name = f"Derived{i}"
        defs[name] = {"allOf": [{"$ref": f"#/definitions/{parent}"},
                                {"type": "object", "properties": {f"attr_{i}": _leaf(rng, name)}}]}  # fmt: skip
        parent = name
    out.append(("allof_inheritance_15", {"$schema": DRAFT7, "definitions": defs,
                                         "$ref": f"#/definitions/{parent}"}, []))  # fmt: skip
    return out


def gen_unions(rng: random.Random) -> list[tuple[str, Json, list[Json]]]:
    def branch(kind: str) -> Json:
        props = {"kind": {"const": kind}}
        for j in range(rng.randint(1, 4)):
            props[f"{kind}_p{j}"] = _leaf(rng, kind)
        return {"type": "object", "properties": props, "required": ["kind"],
                "additionalProperties": False}  # fmt: skip

    wide_any = {"type": "object", "properties": {
        "events": {"type": "array", "maxItems": 4,
                   "items": {"anyOf": [branch(f"ev{i}") for i in range(20)]}}}}  # fmt: skip
    wide_one = {"$schema": DRAFT7, "oneOf": [branch(f"msg{i}") for i in range(50)]}
    scalar_any = {"type": "object", "properties": {"value": {"anyOf": [
        {"type": "string", "maxLength": 8}, {"type": "integer", "minimum": 0, "maximum": 99},
        {"type": "number", "exclusiveMinimum": 100}, {"type": "boolean"}, {"type": "null"},
        {"type": "array", "items": {"type": "integer"}, "maxItems": 3}]}},
        "required": ["value"]}  # fmt: skip
    # anyOf x anyOf: two independent choices over the same object
    cross = {"$schema": DRAFT2020, "type": "object",
             "properties": {"a": {"type": "integer"}, "b": {"type": "string"},
                            "c": {"type": "boolean"}, "d": {"type": "null"}},
             "allOf": [{"anyOf": [{"required": ["a"]}, {"required": ["b"]}]},
                       {"anyOf": [{"required": ["c"]}, {"required": ["d"]}]}],
             "additionalProperties": False}  # fmt: skip
    overlapping = {"$schema": DRAFT7, "type": "object", "properties": {"port": {"oneOf": [
        {"type": "integer", "minimum": 1, "maximum": 1024},
        {"type": "integer", "minimum": 1000, "maximum": 65535},
        {"type": "string", "pattern": "^[0-9]+(-[0-9]+)?$"}]}},
        "required": ["port"]}  # fmt: skip
    return [
        ("anyof_20_objects", wide_any, []),
        ("oneof_50_discriminated", wide_one, []),
        ("anyof_scalars", scalar_any, [{"value": 7}, {"value": None}, {"value": [1, 2]}]),
        ("anyof_x_anyof", cross, [{"a": 1, "c": True}, {"b": "x", "d": None}]),
        (
            "oneof_overlapping_ranges",
            overlapping,
            [{"port": 80}, {"port": 8080}, {"port": 1010}, {"port": "8000-8080"}],
        ),
    ]


def gen_arrays(rng: random.Random) -> list[tuple[str, Json, list[Json]]]:
    def nest(level: int) -> Json:
        props: dict = {"id": {"type": "string", "pattern": "^[0-9a-f]{8}$"},
                       "weight": {"type": "number", "minimum": 0, "maximum": 1}}  # fmt: skip
        if level < 4:
            props[f"children_l{level + 1}"] = {"type": "array", "items": nest(level + 1),
                                               "minItems": 1, "maxItems": 3}  # fmt: skip
        return {"type": "object", "properties": props, "required": sorted(props),
                "additionalProperties": False}  # fmt: skip

    tuple_schema = {"$schema": DRAFT2020, "type": "object", "properties": {
        "points": {"type": "array", "maxItems": 20, "items": {
            "type": "array", "prefixItems": [{"type": "number"}, {"type": "number"},
                                             {"type": "string", "maxLength": 10}],
            "items": False, "minItems": 2}},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 12},
                 "uniqueItems": True, "maxItems": 6}}, "required": ["points"]}  # fmt: skip
    matrix = {"type": "object", "properties": {"rows": {"type": "array", "minItems": 1,
              "maxItems": 8, "items": {"type": "array", "minItems": 3, "maxItems": 3,
              "items": {"type": "integer", "minimum": -9, "maximum": 9}}}},
              "required": ["rows"], "additionalProperties": False}  # fmt: skip
    records = {"$schema": DRAFT7, "type": "array", "minItems": 1, "maxItems": 25,
               "items": {"type": "object", "properties": {
                   "sku": {"type": "string", "pattern": "^[A-Z]{3}$"},
                   "price": {"type": "number", "minimum": 0, "multipleOf": 0.01},
                   "stock": {"type": "integer", "minimum": 0},
                   "labels": {"type": "array", "items": {"type": "string"}, "uniqueItems": True}},
                   "required": ["sku", "price"], "additionalProperties": False}}  # fmt: skip
    return [
        ("nested_arrays_4_levels", {"$schema": DRAFT7, **nest(0)}, []),
        ("tuples_prefix_items", tuple_schema, [{"points": [[1.5, 2, "a"], [0, 0]]}]),
        ("int_matrix", matrix, []),
        ("records_array", records, []),
    ]


def gen_recursive(rng: random.Random) -> list[tuple[str, Json, list[Json]]]:
    tree = {"$schema": DRAFT2020, "$id": "https://example.com/schemas/tree.json",
            "type": "object", "properties": {
                "value": {"type": "integer"},
                "children": {"type": "array", "items": {"$ref": "#"}, "maxItems": 4}},
            "required": ["value"], "additionalProperties": False}  # fmt: skip
    expr = {"$schema": DRAFT7, "definitions": {"expr": {"oneOf": [
        {"type": "object", "properties": {"lit": {"type": "number"}}, "required": ["lit"],
         "additionalProperties": False},
        {"type": "object", "properties": {"var": {"type": "string", "pattern": "^[a-z][a-z0-9_]{2,30}$"}},
         "required": ["var"], "additionalProperties": False},
        {"type": "object", "properties": {"op": {"enum": ["+", "-", "*", "/"]},
                                          "left": {"$ref": "#/definitions/expr"},
                                          "right": {"$ref": "#/definitions/expr"}},
         "required": ["op", "left", "right"], "additionalProperties": False},
        {"type": "object", "properties": {"neg": {"$ref": "#/definitions/expr"}},
         "required": ["neg"], "additionalProperties": False}]}},
        "$ref": "#/definitions/expr"}  # fmt: skip
    fs = {"$schema": DRAFT2020, "$defs": {
        "file": {"type": "object", "properties": {"type": {"const": "file"},
                 "name": {"type": "string", "minLength": 1, "maxLength": 64},
                 "size": {"type": "integer", "minimum": 0}}, "required": ["type", "name"]},
        "dir": {"type": "object", "properties": {"type": {"const": "dir"},
                "name": {"type": "string", "minLength": 1, "maxLength": 64},
                "entries": {"type": "array", "items": {"$ref": "#/$defs/entry"}}},
                "required": ["type", "name", "entries"]},
        "entry": {"anyOf": [{"$ref": "#/$defs/file"}, {"$ref": "#/$defs/dir"}]}},
        "$ref": "#/$defs/dir"}  # fmt: skip
    menu = {"$schema": DRAFT7, "type": "object", "definitions": {"item": {
        "type": "object", "properties": {
            "label": {"type": "string", "minLength": 1},
            "href": {"type": "string", "format": "uri"},
            "items": {"type": "array", "items": {"$ref": "#/definitions/item"}}},
        "required": ["label"], "additionalProperties": False}},
        "properties": {"menu": {"type": "array", "items": {"$ref": "#/definitions/item"}}},
        "required": ["menu"]}  # fmt: skip
    return [
        ("tree_self_ref", tree, [{"value": 1, "children": [{"value": 2}, {"value": 3,
                                  "children": [{"value": 4, "children": []}]}]}]),
        ("expression_ast", expr, [{"op": "+", "left": {"lit": 1}, "right": {"neg": {"var": "abc"}}}]),
        ("filesystem_tree", fs, [{"type": "dir", "name": "src", "entries": [
            {"type": "file", "name": "a.py", "size": 10},
            {"type": "dir", "name": "pkg", "entries": []}]}]),
        ("menu_tree", menu, [{"menu": [{"label": "Home", "href": "https://example.com/"},
                                       {"label": "Docs", "items": [{"label": "API"}]}]}]),
    ]  # fmt: skip


# ---------------------------------------------------------------------------------------------
# hand-written configuration-file shapes (written for this corpus, not copied)
# ---------------------------------------------------------------------------------------------

DURATION = "^([0-9]+(\\.[0-9]+)?(us|ms|s|m|h))+$"
NAME_RE = "^[a-zA-Z0-9._-]+$"


def docker_compose() -> list[tuple[str, Json, list[Json]]]:
    string_list = {"type": "array", "items": {"type": "string"}, "uniqueItems": True}
    list_or_dict = {"oneOf": [
        {"type": "object", "patternProperties": {".+": {"type": ["string", "number", "boolean", "null"]}},
         "additionalProperties": False},
        string_list]}  # fmt: skip
    service = {
        "type": "object",
        "properties": {
            "image": {"type": "string"},
            "build": {"oneOf": [{"type": "string"}, {"type": "object", "properties": {
                "context": {"type": "string"}, "dockerfile": {"type": "string"},
                "args": {"$ref": "#/definitions/list_or_dict"},
                "target": {"type": "string"}}, "additionalProperties": False}]},
            "command": {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]},
            "container_name": {"type": "string", "pattern": NAME_RE},
            "depends_on": {"oneOf": [
                {"$ref": "#/definitions/string_list"},
                {"type": "object", "additionalProperties": False, "patternProperties": {NAME_RE: {
                    "type": "object", "properties": {"condition": {"enum": [
                        "service_started", "service_healthy", "service_completed_successfully"]}},
                    "required": ["condition"], "additionalProperties": False}}}]},
            "environment": {"$ref": "#/definitions/list_or_dict"},
            "ports": {"type": "array", "uniqueItems": True, "items": {"oneOf": [
                {"type": "number"},
                {"type": "string", "pattern": "^([0-9.]+:)?[0-9]+(-[0-9]+)?(:[0-9]+(-[0-9]+)?)?(/(tcp|udp))?$"},
                {"type": "object", "properties": {
                    "target": {"type": "integer", "minimum": 1, "maximum": 65535},
                    "published": {"type": ["string", "integer"]},
                    "protocol": {"enum": ["tcp", "udp"]},
                    "mode": {"enum": ["host", "ingress"]}},
                 "required": ["target"], "additionalProperties": False}]}},
            "restart": {"enum": ["no", "always", "on-failure", "unless-stopped"]},
            "healthcheck": {"$ref": "#/definitions/healthcheck"},
            "mem_limit": {"type": ["number", "string"]},
            "memswap_limit": {"type": ["number", "string"]},
            "cpus": {"type": ["number", "string"]},
            "volumes": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
            "labels": {"$ref": "#/definitions/list_or_dict"},
            "logging": {"type": "object", "properties": {
                "driver": {"type": "string"},
                "options": {"type": "object", "patternProperties": {"^.+$": {"type": ["string", "number", "null"]}}}},
                "additionalProperties": False},
        },
        "dependencies": {"memswap_limit": ["mem_limit"]},
        "patternProperties": {"^x-": {}},
        "additionalProperties": False,
    }  # fmt: skip
    healthcheck = {"type": "object", "properties": {
        "test": {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}, "minItems": 1}]},
        "interval": {"type": "string", "pattern": DURATION},
        "timeout": {"type": "string", "pattern": DURATION},
        "retries": {"type": "integer", "minimum": 0},
        "start_period": {"type": "string", "pattern": DURATION},
        "disable": {"type": "boolean"}}, "additionalProperties": False}  # fmt: skip
    definitions = {"service": service, "healthcheck": healthcheck,
                   "list_or_dict": list_or_dict, "string_list": string_list}  # fmt: skip
    compose = {
        "$schema": DRAFT7, "$id": "https://example.com/schemas/compose-subset.json",
        "type": "object",
        "properties": {
            "version": {"type": "string", "enum": ["3", "3.8", "3.9"]},
            "name": {"type": "string", "pattern": "^[a-z0-9][a-z0-9_-]*$"},
            "services": {"type": "object", "patternProperties": {NAME_RE: {"$ref": "#/definitions/service"}},
                         "additionalProperties": False},
            "networks": {"type": "object", "patternProperties": {NAME_RE: {"type": ["object", "null"], "properties": {
                "driver": {"type": "string"}, "external": {"type": "boolean"},
                "ipam": {"type": "object", "properties": {"config": {"type": "array", "items": {
                    "type": "object", "properties": {"subnet": {"type": "string"}}}}}}}}}},
            "volumes": {"type": "object", "patternProperties": {NAME_RE: {"type": ["object", "null"]}},
                        "additionalProperties": False},
        },
        "required": ["services"],
        "patternProperties": {"^x-": {}},
        "additionalProperties": False,
        "definitions": definitions,
    }  # fmt: skip
    web = {"image": "nginx:1.25", "ports": ["80:80", "443:443/tcp"], "restart": "always",
           "depends_on": {"api": {"condition": "service_healthy"}},
           "environment": {"TZ": "UTC", "WORKERS": 4, "DEBUG": False}}  # fmt: skip
    api = {"build": {"context": ".", "dockerfile": "Dockerfile", "args": ["VERSION=1.2"]},
           "command": ["gunicorn", "app:app"], "mem_limit": "512m", "memswap_limit": "1g",
           "healthcheck": {"test": ["CMD", "curl", "-f", "http://localhost/health"],
                           "interval": "30s", "timeout": "5s", "retries": 3},
           "ports": [{"target": 8000, "published": "8000", "protocol": "tcp"}]}  # fmt: skip
    file_ok = {"version": "3.8", "name": "shop", "services": {"web": web, "api": api},
               "networks": {"front": None, "back": {"driver": "bridge"}}, "volumes": {"data": {}},
               "x-common": {"anything": [1, 2]}}  # fmt: skip
    service_2020 = {"$schema": DRAFT2020, "$defs": definitions, **{k: v for k, v in service.items()
                                                                   if k != "dependencies"},
                    "dependentRequired": {"memswap_limit": ["mem_limit"]}}  # fmt: skip
    service_2020 = json.loads(json.dumps(service_2020).replace("#/definitions/", "#/$defs/"))
    return [
        ("compose_file", compose, [file_ok, {"services": {}},
                                   {"services": {"db": {"image": "postgres", "memswap_limit": "2g"}}}]),
        ("compose_service_2020", service_2020, [web, api, {"image": "redis", "cpus": 0.5,
                                                           "x-note": "cache"}]),
        ("compose_healthcheck", {"$schema": DRAFT7, **healthcheck},
         [api["healthcheck"], {"test": "exit 0", "interval": "1m30s", "start_period": "0.5s"},
          {"interval": "10 seconds"}]),
    ]  # fmt: skip


def github_actions() -> list[tuple[str, Json, list[Json]]]:
    events = [
        "push",
        "pull_request",
        "workflow_dispatch",
        "schedule",
        "release",
        "issues",
        "pull_request_target",
        "workflow_call",
        "merge_group",
        "repository_dispatch",
    ]
    step = {
        "type": "object",
        "properties": {
            "id": {"type": "string", "pattern": "^[_a-zA-Z][a-zA-Z0-9_-]*$"},
            "name": {"type": "string"},
            "if": {"type": ["string", "boolean"]},
            "uses": {"type": "string", "pattern": "^[^@ ]+@[^ ]+$"},
            "run": {"type": "string", "minLength": 1},
            "shell": {"enum": ["bash", "pwsh", "python", "sh", "cmd", "powershell"]},
            "working-directory": {"type": "string"},
            "with": {"type": "object", "additionalProperties": {"type": ["string", "number", "boolean"]}},
            "env": {"$ref": "#/definitions/env"},
            "continue-on-error": {"type": ["boolean", "string"]},
            "timeout-minutes": {"type": "number", "exclusiveMinimum": 0},
        },
        "oneOf": [{"required": ["uses"]}, {"required": ["run"]}],
        "dependencies": {"shell": ["run"], "working-directory": ["run"], "with": ["uses"]},
        "additionalProperties": False,
    }  # fmt: skip
    matrix = {"oneOf": [{"type": "string", "pattern": "^\\$\\{\\{.*\\}\\}$"}, {
        "type": "object",
        "patternProperties": {"^(?!include$|exclude$)[a-zA-Z_][a-zA-Z0-9_-]*$": {
            "type": "array", "items": {"type": ["string", "number", "boolean"]}, "minItems": 1}},
        "properties": {"include": {"type": "array", "items": {"type": "object"}},
                       "exclude": {"type": "array", "items": {"type": "object"}}},
        "additionalProperties": False, "minProperties": 1}]}  # fmt: skip
    job = {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "runs-on": {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"},
                                                       "minItems": 1, "uniqueItems": True}]},
            "needs": {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"},
                                                     "uniqueItems": True}]},
            "if": {"type": ["string", "boolean"]},
            "permissions": {"oneOf": [{"enum": ["read-all", "write-all"]}, {
                "type": "object", "additionalProperties": {"enum": ["read", "write", "none"]}}]},
            "env": {"$ref": "#/definitions/env"},
            "timeout-minutes": {"type": "integer", "minimum": 1, "maximum": 360},
            "strategy": {"type": "object", "properties": {
                "matrix": matrix, "fail-fast": {"type": "boolean"},
                "max-parallel": {"type": "integer", "minimum": 1}},
                "required": ["matrix"], "additionalProperties": False},
            "services": {"type": "object", "additionalProperties": {"type": "object", "properties": {
                "image": {"type": "string"}, "ports": {"type": "array", "items": {"type": ["string", "integer"]}}},
                "required": ["image"]}},
            "steps": {"type": "array", "items": {"$ref": "#/definitions/step"}, "minItems": 1},
        },
        "required": ["runs-on", "steps"],
        "additionalProperties": False,
    }  # fmt: skip
    reusable = {"type": "object", "properties": {
        "uses": {"type": "string", "pattern": "^(\\./)?[^ ]+\\.ya?ml(@[^ ]+)?$"},
        "with": {"type": "object"}, "secrets": {"oneOf": [{"const": "inherit"}, {"type": "object"}]},
        "needs": {"type": "array", "items": {"type": "string"}}},
        "required": ["uses"], "additionalProperties": False}  # fmt: skip
    env = {"type": "object", "additionalProperties": {"type": ["string", "number", "boolean"]}}
    inputs = {"type": "object", "maxProperties": 10, "additionalProperties": {
        "type": "object", "properties": {
            "description": {"type": "string"}, "required": {"type": "boolean"},
            "default": {"type": ["string", "boolean", "number"]},
            "type": {"enum": ["string", "boolean", "choice", "number", "environment"]},
            "options": {"type": "array", "items": {"type": "string"}, "minItems": 1}},
        "if": {"properties": {"type": {"const": "choice"}}, "required": ["type"]},
        "then": {"required": ["options"]},
        "required": ["description"], "additionalProperties": False}}  # fmt: skip
    workflow = {
        "$schema": DRAFT7, "$id": "https://example.com/schemas/workflow-subset.json",
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "on": {"oneOf": [
                {"enum": events},
                {"type": "array", "items": {"enum": events}, "uniqueItems": True, "minItems": 1},
                {"type": "object", "properties": {
                    "push": {"type": ["object", "null"], "properties": {
                        "branches": {"type": "array", "items": {"type": "string"}},
                        "tags": {"type": "array", "items": {"type": "string"}},
                        "paths": {"type": "array", "items": {"type": "string"}}},
                        "additionalProperties": False},
                    "pull_request": {"type": ["object", "null"]},
                    "schedule": {"type": "array", "items": {"type": "object", "properties": {
                        "cron": {"type": "string", "pattern": "^(\\S+\\s+){4}\\S+$"}},
                        "required": ["cron"], "additionalProperties": False}, "minItems": 1},
                    "workflow_dispatch": {"type": ["object", "null"], "properties": {
                        "inputs": {"$ref": "#/definitions/inputs"}}}},
                 "additionalProperties": False, "minProperties": 1}]},
            "env": {"$ref": "#/definitions/env"},
            "concurrency": {"oneOf": [{"type": "string"}, {"type": "object", "properties": {
                "group": {"type": "string"}, "cancel-in-progress": {"type": ["boolean", "string"]}},
                "required": ["group"], "additionalProperties": False}]},
            "jobs": {"type": "object", "minProperties": 1, "additionalProperties": False,
                     "patternProperties": {"^[_a-zA-Z][a-zA-Z0-9_-]*$": {"oneOf": [
                         {"$ref": "#/definitions/job"}, {"$ref": "#/definitions/reusable"}]}}},
        },
        "required": ["on", "jobs"],
        "additionalProperties": False,
        "definitions": {"step": step, "job": job, "reusable": reusable, "env": env, "inputs": inputs},
    }  # fmt: skip
    steps = [{"uses": "actions/checkout@v4"},
             {"name": "Set up", "uses": "actions/setup-python@v5", "with": {"python-version": "3.12"}},
             {"run": "pip install -e .[dev]", "shell": "bash"},
             {"id": "test", "run": "pytest -q", "working-directory": "src", "timeout-minutes": 20}]  # fmt: skip
    ci = {"name": "CI", "on": {"push": {"branches": ["main"]}, "pull_request": None},
          "env": {"PYTHONUNBUFFERED": 1},
          "jobs": {"test": {"runs-on": "ubuntu-latest", "strategy": {"matrix": {
              "python": ["3.10", "3.11", "3.12"], "include": [{"python": "3.13", "experimental": True}]},
              "fail-fast": False}, "steps": steps},
              "release": {"uses": "./.github/workflows/release.yml", "secrets": "inherit",
                          "needs": ["test"]}}}  # fmt: skip
    nightly = {"on": {"schedule": [{"cron": "0 3 * * 1-5"}], "workflow_dispatch": {"inputs": {
        "level": {"description": "Log level", "type": "choice", "options": ["info", "debug"]}}}},
        "jobs": {"nightly": {"runs-on": ["self-hosted", "gpu"], "timeout-minutes": 120,
                             "steps": [{"run": "make bench"}]}}}  # fmt: skip
    step_schema = {"$schema": DRAFT7, "definitions": {"env": env}, **step}
    action = {
        "$schema": DRAFT2020, "type": "object",
        "properties": {
            "name": {"type": "string"}, "description": {"type": "string"},
            "author": {"type": "string"},
            "inputs": {"type": "object", "additionalProperties": {"type": "object", "properties": {
                "description": {"type": "string"}, "required": {"type": "boolean"},
                "default": {"type": "string"}, "deprecationMessage": {"type": "string"}},
                "required": ["description"]}},
            "outputs": {"type": "object", "additionalProperties": {"type": "object", "properties": {
                "description": {"type": "string"}, "value": {"type": "string"}}}},
            "runs": {"oneOf": [
                {"type": "object", "properties": {"using": {"const": "composite"},
                 "steps": {"type": "array", "items": {"type": "object"}}}, "required": ["using", "steps"]},
                {"type": "object", "properties": {"using": {"enum": ["node16", "node20"]},
                 "main": {"type": "string"}, "pre": {"type": "string"}, "post": {"type": "string"}},
                 "required": ["using", "main"]},
                {"type": "object", "properties": {"using": {"const": "docker"},
                 "image": {"type": "string"}, "args": {"type": "array", "items": {"type": "string"}}},
                 "required": ["using", "image"]}]},
            "branding": {"type": "object", "properties": {
                "color": {"enum": ["white", "yellow", "blue", "green", "orange", "red", "purple", "gray-dark"]},
                "icon": {"enum": ["activity", "airplay", "alert-circle", "anchor", "archive", "award",
                                  "bell", "book", "box", "briefcase", "camera", "check", "cloud",
                                  "code", "command", "compass", "cpu", "database", "download",
                                  "feather", "file", "filter", "flag", "folder", "git-branch",
                                  "globe", "heart", "home", "layers", "lock", "mail", "map",
                                  "package", "play", "server", "settings", "shield", "star",
                                  "terminal", "tool", "upload", "zap"]}}},
        },
        "required": ["name", "description", "runs"],
    }  # fmt: skip
    return [
        ("workflow", workflow, [ci, nightly, {"on": "push", "jobs": {}}]),
        ("workflow_step", step_schema, steps + [{"uses": "a@b", "run": "both"},
                                               {"shell": "bash", "uses": "x/y@v1"}]),
        ("composite_action", action, [
            {"name": "Lint", "description": "Runs linters", "runs": {"using": "composite", "steps": [{}]},
             "branding": {"icon": "check", "color": "green"}},
            {"name": "Build", "description": "Docker build", "runs": {"using": "docker", "image": "Dockerfile"},
             "inputs": {"tag": {"description": "Image tag", "default": "latest"}}}]),
    ]  # fmt: skip


def openapi() -> list[tuple[str, Json, list[Json]]]:
    ref = {"type": "object", "properties": {"$ref": {"type": "string", "format": "uri-reference"}},
           "required": ["$ref"]}  # fmt: skip
    parameter = {
        "$schema": DRAFT7, "type": "object",
        "properties": {
            "name": {"type": "string", "minLength": 1},
            "in": {"enum": ["query", "header", "path", "cookie"]},
            "description": {"type": "string"},
            "required": {"type": "boolean"},
            "deprecated": {"type": "boolean"},
            "style": {"enum": ["matrix", "label", "form", "simple", "spaceDelimited", "pipeDelimited", "deepObject"]},
            "explode": {"type": "boolean"},
            "schema": {"type": "object"},
            "example": {},
        },
        "required": ["name", "in"],
        "if": {"properties": {"in": {"const": "path"}}},
        "then": {"properties": {"required": {"const": True}}, "required": ["required"]},
        "patternProperties": {"^x-": {}},
        "additionalProperties": False,
    }  # fmt: skip
    response = {"type": "object", "properties": {
        "description": {"type": "string"},
        "content": {"type": "object", "patternProperties": {"^[a-z]+/[a-z0-9.+-]+$": {
            "type": "object", "properties": {"schema": {"type": "object"}}}}}},
        "required": ["description"], "additionalProperties": False}  # fmt: skip
    operation = {
        "$schema": DRAFT7, "type": "object",
        "definitions": {"ref": ref, "response": response},
        "properties": {
            "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
            "summary": {"type": "string", "maxLength": 120},
            "operationId": {"type": "string", "pattern": "^[a-zA-Z_][a-zA-Z0-9_]*$"},
            "parameters": {"type": "array", "items": {"oneOf": [
                {"$ref": "#/definitions/ref"},
                {"type": "object", "properties": {"name": {"type": "string"},
                 "in": {"enum": ["query", "header", "path", "cookie"]}},
                 "required": ["name", "in"], "not": {"required": ["$ref"]}}]}},
            "responses": {"type": "object", "minProperties": 1, "additionalProperties": False,
                          "properties": {"default": {"$ref": "#/definitions/response"}},
                          "patternProperties": {"^[1-5](?:[0-9]{2}|XX)$": {"oneOf": [
                              {"$ref": "#/definitions/response"}, {"$ref": "#/definitions/ref"}]}}},
            "deprecated": {"type": "boolean"},
            "security": {"type": "array", "items": {"type": "object", "additionalProperties": {
                "type": "array", "items": {"type": "string"}}}},
        },
        "required": ["responses"],
        "patternProperties": {"^x-": {}},
        "additionalProperties": False,
    }  # fmt: skip
    info = {
        "$schema": DRAFT2020, "type": "object",
        "properties": {
            "title": {"type": "string", "minLength": 1},
            "summary": {"type": "string"},
            "version": {"type": "string"},
            "termsOfService": {"type": "string", "format": "uri", "maxLength": 2048},
            "contact": {"type": "object", "properties": {
                "name": {"type": "string"}, "url": {"type": "string", "format": "uri", "maxLength": 2048},
                "email": {"type": "string", "format": "email"}}, "additionalProperties": False},
            "license": {"type": "object", "properties": {
                "name": {"type": "string"}, "identifier": {"type": "string"},
                "url": {"type": "string", "format": "uri"}},
                "required": ["name"], "not": {"required": ["identifier", "url"]}},
        },
        "required": ["title", "version"],
    }  # fmt: skip
    server = {
        "$schema": DRAFT2020, "type": "object",
        "properties": {
            "url": {"type": "string", "format": "uri-template"},
            "description": {"type": "string"},
            "variables": {"type": "object", "additionalProperties": {"type": "object", "properties": {
                "enum": {"type": "array", "items": {"type": "string"}, "minItems": 1, "uniqueItems": True},
                "default": {"type": "string"}, "description": {"type": "string"}},
                "required": ["default"]}},
        },
        "required": ["url"], "additionalProperties": False,
    }  # fmt: skip
    security = {
        "$schema": DRAFT2020, "$defs": {"flow": {"type": "object", "properties": {
            "authorizationUrl": {"type": "string", "format": "uri"},
            "tokenUrl": {"type": "string", "format": "uri"},
            "scopes": {"type": "object", "additionalProperties": {"type": "string"}}},
            "required": ["scopes"]}},
        "oneOf": [
            {"type": "object", "properties": {"type": {"const": "apiKey"}, "name": {"type": "string"},
             "in": {"enum": ["query", "header", "cookie"]}}, "required": ["type", "name", "in"]},
            {"type": "object", "properties": {"type": {"const": "http"}, "scheme": {"type": "string"},
             "bearerFormat": {"type": "string"}}, "required": ["type", "scheme"]},
            {"type": "object", "properties": {"type": {"const": "oauth2"}, "flows": {"type": "object",
             "properties": {"implicit": {"$ref": "#/$defs/flow"}, "clientCredentials": {"$ref": "#/$defs/flow"},
                            "authorizationCode": {"$ref": "#/$defs/flow"}}, "minProperties": 1}},
             "required": ["type", "flows"]},
            {"type": "object", "properties": {"type": {"const": "openIdConnect"},
             "openIdConnectUrl": {"type": "string", "format": "uri"}}, "required": ["type", "openIdConnectUrl"]}],
    }  # fmt: skip
    pet = {
        "$schema": DRAFT2020, "$id": "https://example.com/schemas/pet.json",
        "$defs": {
            "Category": {"type": "object", "properties": {"id": {"type": "integer", "format": "int64"},
                         "name": {"type": "string"}}},
            "Tag": {"type": "object", "properties": {"id": {"type": "integer"}, "name": {"type": "string"}},
                    "required": ["name"]},
        },
        "type": "object",
        "properties": {
            "id": {"type": "integer", "minimum": 1},
            "name": {"type": "string", "minLength": 1, "maxLength": 80},
            "category": {"$ref": "#/$defs/Category"},
            "photoUrls": {"type": "array", "items": {"type": "string", "format": "uri"}, "maxItems": 10},
            "tags": {"type": "array", "items": {"$ref": "#/$defs/Tag"}, "uniqueItems": True},
            "status": {"enum": ["available", "pending", "sold"]},
            "price": {"type": "number", "minimum": 0, "multipleOf": 0.01},
            "birthday": {"type": ["string", "null"], "format": "date"},
        },
        "required": ["name", "photoUrls"],
        "additionalProperties": False,
    }  # fmt: skip
    return [
        ("parameter", parameter, [
            {"name": "petId", "in": "path", "required": True, "schema": {"type": "integer"}},
            {"name": "limit", "in": "query", "style": "form", "x-internal": True},
            {"name": "id", "in": "path"}]),
        ("operation", operation, [
            {"tags": ["pets"], "summary": "List pets", "operationId": "listPets",
             "parameters": [{"$ref": "#/components/parameters/limit"}, {"name": "q", "in": "query"}],
             "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": {}}}},
                           "4XX": {"$ref": "#/components/responses/Error"},
                           "default": {"description": "error"}}},
            {"responses": {"204": {"description": "No content"}}, "deprecated": True}]),
        ("info", info, [
            {"title": "Pet store", "version": "1.0.0", "termsOfService": "https://example.com/terms",
             "contact": {"name": "API team", "email": "api@example.com", "url": "https://example.com"},
             "license": {"name": "MIT", "identifier": "MIT"}},
            {"title": "x", "version": "2", "license": {"name": "Apache", "identifier": "Apache-2.0",
                                                       "url": "https://www.apache.org/licenses/"}}]),
        ("server", server, [
            {"url": "https://{region}.api.example.com/{basePath}", "variables": {
                "region": {"default": "eu", "enum": ["eu", "us"]}, "basePath": {"default": "v2"}}},
            {"url": "/v1"}, {"url": "https://example.com/{unclosed"}]),
        ("security_scheme", security, [
            {"type": "apiKey", "name": "X-API-Key", "in": "header"},
            {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"},
            {"type": "oauth2", "flows": {"clientCredentials": {"tokenUrl": "https://auth.example.com/token",
                                                               "scopes": {"read": "Read access"}}}},
            {"type": "openIdConnect", "openIdConnectUrl": "https://auth.example.com/.well-known/openid-configuration"}]),
        ("pet_model", pet, [
            {"id": 7, "name": "Rex", "category": {"id": 1, "name": "dogs"},
             "photoUrls": ["https://example.com/rex.jpg"], "tags": [{"name": "good"}, {"id": 2, "name": "boy"}],
             "status": "available", "price": 19.99, "birthday": "2020-02-29"},
            {"name": "Tom", "photoUrls": [], "birthday": None, "price": 0.07}]),
    ]  # fmt: skip


def manifests() -> list[tuple[str, Json, list[Json]]]:
    person = {"oneOf": [{"type": "string"}, {"type": "object", "properties": {
        "name": {"type": "string"}, "email": {"type": "string", "format": "email"},
        "url": {"type": "string", "format": "uri"}}, "required": ["name"], "additionalProperties": False}]}  # fmt: skip
    deps = {"type": "object", "additionalProperties": {"type": "string"}}
    package_json = {
        "$schema": DRAFT7, "$id": "https://example.com/schemas/package-subset.json",
        "title": "package.json subset", "type": "object",
        "definitions": {"person": person, "dependencyMap": deps, "exports": {"oneOf": [
            {"type": "string", "pattern": "^\\./"},
            {"type": "null"},
            {"type": "array", "items": {"$ref": "#/definitions/exports"}},
            {"type": "object", "patternProperties": {"^(\\.|[a-z]+)": {"$ref": "#/definitions/exports"}},
             "additionalProperties": False}]}},
        "properties": {
            "name": {"type": "string", "maxLength": 214, "minLength": 1,
                     "pattern": "^(?:@[a-z0-9-*~][a-z0-9-*._~]*/)?[a-z0-9-~][a-z0-9-._~]*$"},
            "version": {"type": "string", "pattern": "^(0|[1-9][0-9]*)\\.(0|[1-9][0-9]*)\\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$"},
            "description": {"type": "string"},
            "keywords": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
            "homepage": {"type": "string", "format": "uri", "maxLength": 2048},
            "bugs": {"oneOf": [{"type": "string", "format": "uri"}, {"type": "object", "properties": {
                "url": {"type": "string", "format": "uri"}, "email": {"type": "string", "format": "email"}},
                "minProperties": 1}]},
            "license": {"type": "string"},
            "author": {"$ref": "#/definitions/person"},
            "contributors": {"type": "array", "items": {"$ref": "#/definitions/person"}},
            "main": {"type": "string"},
            "type": {"enum": ["commonjs", "module"]},
            "exports": {"$ref": "#/definitions/exports"},
            "bin": {"oneOf": [{"type": "string"}, {"type": "object", "additionalProperties": {"type": "string"}}]},
            "scripts": {"type": "object", "additionalProperties": {"type": "string"}},
            "dependencies": {"$ref": "#/definitions/dependencyMap"},
            "devDependencies": {"$ref": "#/definitions/dependencyMap"},
            "peerDependencies": {"$ref": "#/definitions/dependencyMap"},
            "peerDependenciesMeta": {"type": "object", "additionalProperties": {"type": "object",
                "properties": {"optional": {"type": "boolean"}}}},
            "engines": {"type": "object", "properties": {"node": {"type": "string"}},
                        "additionalProperties": {"type": "string"}},
            "os": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
            "private": {"type": "boolean"},
            "workspaces": {"oneOf": [{"type": "array", "items": {"type": "string"}},
                                     {"type": "object", "properties": {"packages": {"type": "array",
                                      "items": {"type": "string"}}}}]},
            "repository": {"oneOf": [{"type": "string"}, {"type": "object", "properties": {
                "type": {"type": "string"}, "url": {"type": "string"}, "directory": {"type": "string"}},
                "required": ["type", "url"]}]},
        },
        "dependencies": {"peerDependenciesMeta": ["peerDependencies"],
                         "bundleDependencies": {"required": ["dependencies"]}},
        "anyOf": [{"required": ["name", "version"]}, {"required": ["private"], "properties": {"private": {"const": True}}}],
    }  # fmt: skip
    pkg = {"name": "@acme/widgets", "version": "2.1.0-beta.3", "description": "UI widgets",
           "keywords": ["ui", "widgets"], "homepage": "https://github.com/acme/widgets#readme",
           "bugs": {"url": "https://github.com/acme/widgets/issues"}, "license": "MIT",
           "author": {"name": "Ada", "email": "ada@example.com"}, "type": "module",
           "exports": {".": {"import": "./dist/index.js", "require": "./dist/index.cjs"},
                       "./package.json": "./package.json"},
           "scripts": {"build": "tsc -p .", "test": "vitest"}, "dependencies": {"react": "^18.2.0"},
           "peerDependencies": {"react-dom": ">=18"}, "peerDependenciesMeta": {"react-dom": {"optional": True}},
           "engines": {"node": ">=18"}}  # fmt: skip
    workspace_root = {"private": True, "workspaces": ["packages/*"],
                      "devDependencies": {"typescript": "5.4.5"}}  # fmt: skip
    pyproject = {
        "$schema": DRAFT2020, "type": "object",
        "properties": {"project": {"type": "object", "properties": {
            "name": {"type": "string", "pattern": "^([a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9._-]*[a-zA-Z0-9])$"},
            "version": {"type": "string"},
            "description": {"type": "string"},
            "readme": {"oneOf": [{"type": "string"}, {"type": "object", "properties": {
                "file": {"type": "string"}, "text": {"type": "string"},
                "content-type": {"enum": ["text/markdown", "text/x-rst", "text/plain"]}},
                "required": ["content-type"], "oneOf": [{"required": ["file"]}, {"required": ["text"]}]}]},
            "requires-python": {"type": "string"},
            "license": {"type": "string"},
            "authors": {"type": "array", "items": {"type": "object", "properties": {
                "name": {"type": "string"}, "email": {"type": "string", "format": "email"}},
                "anyOf": [{"required": ["name"]}, {"required": ["email"]}], "additionalProperties": False}},
            "dependencies": {"type": "array", "items": {"type": "string", "minLength": 1}},
            "optional-dependencies": {"type": "object", "patternProperties": {
                "^[a-z0-9][a-z0-9-]*$": {"type": "array", "items": {"type": "string"}}},
                "additionalProperties": False},
            "scripts": {"type": "object", "additionalProperties": {"type": "string"}},
            "dynamic": {"type": "array", "uniqueItems": True, "items": {"enum": [
                "version", "description", "readme", "requires-python", "license", "authors",
                "dependencies", "optional-dependencies", "scripts", "classifiers"]}},
            "classifiers": {"type": "array", "items": {"type": "string"}}},
            "required": ["name"],
            "if": {"not": {"properties": {"dynamic": {"contains": {"const": "version"}}}}},
            "then": {"required": ["version"]}},
            "tool": {"type": "object"}},
        "additionalProperties": False,
    }  # fmt: skip
    cargo_dep = {"oneOf": [{"type": "string"}, {"type": "object", "properties": {
        "version": {"type": "string"}, "features": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
        "optional": {"type": "boolean"}, "default-features": {"type": "boolean"},
        "path": {"type": "string"}, "git": {"type": "string", "format": "uri"},
        "branch": {"type": "string"}, "tag": {"type": "string"}, "rev": {"type": "string"},
        "workspace": {"type": "boolean"}},
        "dependencies": {"branch": ["git"], "tag": ["git"], "rev": ["git"]},
        "additionalProperties": False}]}  # fmt: skip
    cargo = {
        "$schema": DRAFT7, "type": "object",
        "definitions": {"dep": cargo_dep, "depTable": {"type": "object", "additionalProperties": {"$ref": "#/definitions/dep"}}},
        "properties": {
            "package": {"type": "object", "properties": {
                "name": {"type": "string", "pattern": "^[a-zA-Z][a-zA-Z0-9_-]*$", "maxLength": 64},
                "version": {"type": "string"}, "edition": {"enum": ["2015", "2018", "2021", "2024"]},
                "rust-version": {"type": "string"}, "authors": {"type": "array", "items": {"type": "string"}},
                "publish": {"oneOf": [{"type": "boolean"}, {"type": "array", "items": {"type": "string"}}]}},
                "required": ["name"]},
            "dependencies": {"$ref": "#/definitions/depTable"},
            "dev-dependencies": {"$ref": "#/definitions/depTable"},
            "features": {"type": "object", "additionalProperties": {"type": "array", "items": {"type": "string"}, "uniqueItems": True}},
            "workspace": {"type": "object", "properties": {"members": {"type": "array", "items": {"type": "string"}}}},
        },
        "anyOf": [{"required": ["package"]}, {"required": ["workspace"]}],
    }  # fmt: skip
    return [
        ("package_json", package_json, [pkg, workspace_root, {"name": "Bad Name", "version": "1.0"},
                                        {"name": "x", "version": "1.0.0", "peerDependenciesMeta": {}}]),
        ("pyproject_project", pyproject, [
            {"project": {"name": "formcast-demo", "version": "0.1.0", "requires-python": ">=3.10",
                         "authors": [{"name": "Ada"}, {"email": "bob@example.com"}],
                         "dependencies": ["numpy>=1.26", "regex"],
                         "optional-dependencies": {"dev": ["pytest"]},
                         "readme": {"file": "README.md", "content-type": "text/markdown"}}},
            {"project": {"name": "dyn", "dynamic": ["version", "readme"]}, "tool": {"ruff": {}}},
            {"project": {"name": "noversion"}}]),
        ("cargo_manifest", cargo, [
            {"package": {"name": "fast-json", "version": "0.3.1", "edition": "2021"},
             "dependencies": {"serde": {"version": "1", "features": ["derive"]}, "regex": "1.10",
                              "local": {"path": "../local"},
                              "nightly": {"git": "https://github.com/acme/nightly", "branch": "main"}},
             "features": {"default": ["std"], "std": []}},
            {"workspace": {"members": ["crates/*"]}},
            {"package": {"name": "x"}, "dependencies": {"y": {"tag": "v1"}}}]),
    ]  # fmt: skip


def tsconfig_eslint() -> list[tuple[str, Json, list[Json]]]:
    libs = [
        "ES5",
        "ES6",
        "ES2015",
        "ES2016",
        "ES2017",
        "ES2018",
        "ES2019",
        "ES2020",
        "ES2021",
        "ES2022",
        "ES2023",
        "ESNext",
        "DOM",
        "DOM.Iterable",
        "WebWorker",
        "ScriptHost",
        "ES2015.Core",
        "ES2015.Collection",
        "ES2015.Generator",
        "ES2015.Iterable",
        "ES2015.Promise",
        "ES2015.Proxy",
        "ES2015.Reflect",
        "ES2015.Symbol",
        "ES2017.Object",
        "ES2017.SharedMemory",
        "ES2017.String",
        "ES2017.Intl",
        "ES2018.AsyncIterable",
        "ES2018.Intl",
        "ES2018.Promise",
        "ES2018.RegExp",
        "ES2019.Array",
        "ES2019.Object",
        "ES2019.String",
        "ES2019.Symbol",
        "ES2020.BigInt",
        "ES2020.Promise",
        "ES2020.String",
        "ES2020.Intl",
        "ES2021.Promise",
        "ES2021.String",
        "ES2021.WeakRef",
        "ES2022.Array",
        "ES2022.Error",
        "ES2022.Object",
        "ES2022.String",
        "ES2023.Array",
        "ESNext.Array",
        "ESNext.AsyncIterable",
        "ESNext.Intl",
        "ESNext.Symbol",
        "Decorators",
        "Decorators.Legacy",
    ]
    targets = [
        "ES3",
        "ES5",
        "ES6",
        "ES2015",
        "ES2016",
        "ES2017",
        "ES2018",
        "ES2019",
        "ES2020",
        "ES2021",
        "ES2022",
        "ES2023",
        "ESNext",
    ]
    compiler = {
        "type": "object",
        "properties": {
            "target": {"enum": targets + [t.lower() for t in targets]},
            "module": {"enum": ["CommonJS", "AMD", "UMD", "System", "ES6", "ES2015", "ES2020",
                                "ES2022", "ESNext", "Node16", "NodeNext", "Preserve", "None"]},
            "moduleResolution": {"enum": ["Classic", "Node", "Node10", "Node16", "NodeNext", "Bundler"]},
            "lib": {"type": "array", "uniqueItems": True, "items": {"enum": libs}},
            "jsx": {"enum": ["preserve", "react", "react-jsx", "react-jsxdev", "react-native"]},
            "strict": {"type": "boolean"}, "noImplicitAny": {"type": "boolean"},
            "strictNullChecks": {"type": "boolean"}, "esModuleInterop": {"type": "boolean"},
            "skipLibCheck": {"type": "boolean"}, "declaration": {"type": "boolean"},
            "sourceMap": {"type": "boolean"}, "incremental": {"type": "boolean"},
            "outDir": {"type": "string"}, "outFile": {"type": "string"}, "rootDir": {"type": "string"},
            "baseUrl": {"type": "string"},
            "paths": {"type": "object", "additionalProperties": {"type": "array", "items": {"type": "string"}, "minItems": 1}},
            "types": {"type": "array", "items": {"type": "string"}},
            "maxNodeModuleJsDepth": {"type": "integer", "minimum": 0},
            "newLine": {"enum": ["crlf", "lf", "CRLF", "LF"]},
        },
        "not": {"required": ["outDir", "outFile"]},
    }  # fmt: skip
    tsconfig = {
        "$schema": DRAFT7, "type": "object",
        "definitions": {"compilerOptions": compiler},
        "properties": {
            "extends": {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}, "minItems": 1}]},
            "compilerOptions": {"$ref": "#/definitions/compilerOptions"},
            "files": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
            "include": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
            "exclude": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
            "references": {"type": "array", "items": {"type": "object", "properties": {
                "path": {"type": "string"}, "prepend": {"type": "boolean"}}, "required": ["path"]}},
            "compileOnSave": {"type": "boolean"},
        },
        "anyOf": [{"required": ["files"]}, {"required": ["include"]}, {"required": ["extends"]},
                  {"required": ["references"]}, {"required": ["compilerOptions"]}],
    }  # fmt: skip
    level = {"oneOf": [{"enum": ["off", "warn", "error"]}, {"enum": [0, 1, 2]}]}
    rule = {
        "oneOf": [
            {"$ref": "#/definitions/level"},
            {"type": "array", "items": [{"$ref": "#/definitions/level"}], "minItems": 1},
        ]
    }
    eslint_common = {
        "env": {"type": "object", "additionalProperties": {"type": "boolean"}},
        "globals": {"type": "object", "additionalProperties": {"oneOf": [
            {"type": "boolean"}, {"enum": ["readonly", "writable", "off", "readable", "writeable"]}]}},
        "extends": {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]},
        "parser": {"type": "string"},
        "parserOptions": {"type": "object", "properties": {
            "ecmaVersion": {"oneOf": [{"enum": [3, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]},
                                      {"type": "integer", "minimum": 2015, "maximum": 2025},
                                      {"const": "latest"}]},
            "sourceType": {"enum": ["script", "module", "commonjs"]},
            "ecmaFeatures": {"type": "object", "properties": {"jsx": {"type": "boolean"},
                                                              "globalReturn": {"type": "boolean"}}}}},
        "plugins": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
        "rules": {"type": "object", "additionalProperties": {"$ref": "#/definitions/rule"}},
        "settings": {"type": "object"},
    }  # fmt: skip
    eslintrc = {
        "$schema": DRAFT7, "type": "object",
        "definitions": {"level": level, "rule": rule, "override": {"type": "object", "properties": {
            "files": {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}, "minItems": 1}]},
            "excludedFiles": {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]},
            **eslint_common,
            "overrides": {"type": "array", "items": {"$ref": "#/definitions/override"}}},
            "required": ["files"], "additionalProperties": False}},
        "properties": {"root": {"type": "boolean"}, **eslint_common,
                       "ignorePatterns": {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]},
                       "overrides": {"type": "array", "items": {"$ref": "#/definitions/override"}}},
        "additionalProperties": False,
    }  # fmt: skip
    rule_2020 = {
        "oneOf": [
            {"$ref": "#/$defs/level"},
            {"type": "array", "prefixItems": [{"$ref": "#/$defs/level"}], "minItems": 1},
        ]
    }
    flat = {"$schema": DRAFT2020, "type": "array", "$defs": {"level": level, "rule": rule_2020},
        "items": {"type": "object", "properties": {
            "name": {"type": "string"},
            "files": {"type": "array", "items": {"type": "string"}},
            "ignores": {"type": "array", "items": {"type": "string"}},
            "languageOptions": {"type": "object", "properties": {
                "ecmaVersion": {"oneOf": [{"type": "integer", "minimum": 3}, {"const": "latest"}]},
                "sourceType": {"enum": ["script", "module", "commonjs"]},
                "globals": {"type": "object"}}},
            "linterOptions": {"type": "object", "properties": {
                "noInlineConfig": {"type": "boolean"},
                "reportUnusedDisableDirectives": {"oneOf": [{"type": "boolean"}, {"enum": ["off", "warn", "error"]}]}}},
            "rules": {"type": "object", "additionalProperties": {"$ref": "#/$defs/rule"}}},
            "additionalProperties": False}}  # fmt: skip
    return [
        ("tsconfig", tsconfig, [
            {"extends": "./tsconfig.base.json", "compilerOptions": {"target": "ES2022", "module": "NodeNext",
             "moduleResolution": "NodeNext", "lib": ["ES2022", "DOM"], "strict": True, "outDir": "dist",
             "paths": {"@/*": ["src/*"]}}, "include": ["src"], "exclude": ["node_modules"]},
            {"files": ["a.ts"], "references": [{"path": "../core"}]},
            {"compilerOptions": {"outDir": "a", "outFile": "b.js"}}]),
        ("eslintrc", eslintrc, [
            {"root": True, "env": {"browser": True, "es2022": True}, "extends": ["eslint:recommended"],
             "parserOptions": {"ecmaVersion": "latest", "sourceType": "module"},
             "rules": {"no-unused-vars": ["warn", {"args": "none"}], "semi": 2, "quotes": "off"},
             "overrides": [{"files": ["*.test.js"], "env": {"jest": True}, "rules": {"no-undef": "off"}}]},
            {"globals": {"window": "readonly", "legacy": True}, "plugins": ["react", "import"]},
            {"rules": {"eqeqeq": "always"}}]),
        ("eslint_flat", flat, [
            [{"files": ["**/*.js"], "languageOptions": {"ecmaVersion": 2024, "sourceType": "module"},
              "rules": {"prefer-const": "error"}}, {"ignores": ["dist/**"]}],
            []]),
    ]  # fmt: skip


def kubernetes() -> list[tuple[str, Json, list[Json]]]:
    dns = {
        "type": "string",
        "maxLength": 253,
        "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$",
    }
    quantity = {"oneOf": [{"type": "string", "pattern": "^[0-9]+(\\.[0-9]+)?(m|Ki|Mi|Gi|Ti|k|M|G)?$"},
                          {"type": "number", "minimum": 0}]}  # fmt: skip
    int_or_string = {
        "oneOf": [{"type": "integer", "minimum": 0}, {"type": "string", "pattern": "^[0-9]+%$"}]
    }
    metadata = {"type": "object", "properties": {
        "name": {"$ref": "#/definitions/dns"}, "namespace": {"$ref": "#/definitions/dns"},
        "labels": {"type": "object", "additionalProperties": {"type": "string", "maxLength": 63}},
        "annotations": {"type": "object", "additionalProperties": {"type": "string"}}}}  # fmt: skip
    probe = {"type": "object", "properties": {
        "httpGet": {"type": "object", "properties": {"path": {"type": "string"},
                    "port": {"oneOf": [{"type": "integer", "minimum": 1, "maximum": 65535}, {"type": "string"}]},
                    "scheme": {"enum": ["HTTP", "HTTPS"]}}, "required": ["port"]},
        "exec": {"type": "object", "properties": {"command": {"type": "array", "items": {"type": "string"}}}},
        "initialDelaySeconds": {"type": "integer", "minimum": 0},
        "periodSeconds": {"type": "integer", "minimum": 1},
        "failureThreshold": {"type": "integer", "minimum": 1}},
        "oneOf": [{"required": ["httpGet"]}, {"required": ["exec"]}]}  # fmt: skip
    container = {"type": "object", "properties": {
        "name": {"$ref": "#/definitions/dns"},
        "image": {"type": "string", "minLength": 1},
        "imagePullPolicy": {"enum": ["Always", "IfNotPresent", "Never"]},
        "args": {"type": "array", "items": {"type": "string"}},
        "ports": {"type": "array", "items": {"type": "object", "properties": {
            "containerPort": {"type": "integer", "minimum": 1, "maximum": 65535},
            "protocol": {"enum": ["TCP", "UDP", "SCTP"]},
            "name": {"type": "string", "maxLength": 15}}, "required": ["containerPort"]}},
        "env": {"type": "array", "items": {"type": "object", "properties": {
            "name": {"type": "string", "pattern": "^[-._a-zA-Z][-._a-zA-Z0-9]*$"},
            "value": {"type": "string"},
            "valueFrom": {"type": "object", "properties": {
                "secretKeyRef": {"type": "object", "properties": {"name": {"type": "string"}, "key": {"type": "string"}},
                                 "required": ["key"]},
                "configMapKeyRef": {"type": "object", "properties": {"name": {"type": "string"}, "key": {"type": "string"}},
                                    "required": ["key"]}},
                "minProperties": 1, "maxProperties": 1}},
            "required": ["name"], "not": {"required": ["value", "valueFrom"]}}},
        "resources": {"type": "object", "properties": {
            "limits": {"type": "object", "additionalProperties": {"$ref": "#/definitions/quantity"}},
            "requests": {"type": "object", "additionalProperties": {"$ref": "#/definitions/quantity"}}}},
        "livenessProbe": {"$ref": "#/definitions/probe"},
        "readinessProbe": {"$ref": "#/definitions/probe"},
        "volumeMounts": {"type": "array", "items": {"type": "object", "properties": {
            "name": {"type": "string"}, "mountPath": {"type": "string"}, "readOnly": {"type": "boolean"}},
            "required": ["name", "mountPath"]}}},
        "required": ["name", "image"]}  # fmt: skip
    pod_spec = {"type": "object", "properties": {
        "containers": {"type": "array", "items": {"$ref": "#/definitions/container"}, "minItems": 1},
        "initContainers": {"type": "array", "items": {"$ref": "#/definitions/container"}},
        "restartPolicy": {"enum": ["Always", "OnFailure", "Never"]},
        "nodeSelector": {"type": "object", "additionalProperties": {"type": "string"}},
        "serviceAccountName": {"type": "string"},
        "terminationGracePeriodSeconds": {"type": "integer", "minimum": 0},
        "volumes": {"type": "array", "items": {"type": "object", "properties": {
            "name": {"type": "string"},
            "configMap": {"type": "object", "properties": {"name": {"type": "string"}}},
            "secret": {"type": "object", "properties": {"secretName": {"type": "string"}}},
            "emptyDir": {"type": "object", "properties": {"medium": {"enum": ["", "Memory"]},
                                                          "sizeLimit": {"$ref": "#/definitions/quantity"}}}},
            "required": ["name"],
            "oneOf": [{"required": ["configMap"]}, {"required": ["secret"]}, {"required": ["emptyDir"]}]}}},
        "required": ["containers"]}  # fmt: skip
    definitions = {"dns": dns, "quantity": quantity, "intOrString": int_or_string, "metadata": metadata,
                   "probe": probe, "container": container, "podSpec": pod_spec}  # fmt: skip
    deployment = {
        "$schema": DRAFT7, "type": "object", "definitions": definitions,
        "properties": {
            "apiVersion": {"const": "apps/v1"}, "kind": {"const": "Deployment"},
            "metadata": {"$ref": "#/definitions/metadata"},
            "spec": {"type": "object", "properties": {
                "replicas": {"type": "integer", "minimum": 0},
                "selector": {"type": "object", "properties": {
                    "matchLabels": {"type": "object", "additionalProperties": {"type": "string"}},
                    "matchExpressions": {"type": "array", "items": {"type": "object", "properties": {
                        "key": {"type": "string"}, "operator": {"enum": ["In", "NotIn", "Exists", "DoesNotExist"]},
                        "values": {"type": "array", "items": {"type": "string"}}}, "required": ["key", "operator"]}}}},
                "strategy": {"type": "object", "properties": {
                    "type": {"enum": ["RollingUpdate", "Recreate"]},
                    "rollingUpdate": {"type": "object", "properties": {
                        "maxSurge": {"$ref": "#/definitions/intOrString"},
                        "maxUnavailable": {"$ref": "#/definitions/intOrString"}}}}},
                "template": {"type": "object", "properties": {"metadata": {"$ref": "#/definitions/metadata"},
                                                              "spec": {"$ref": "#/definitions/podSpec"}},
                             "required": ["spec"]}},
                "required": ["selector", "template"]}},
        "required": ["apiVersion", "kind", "metadata", "spec"],
    }  # fmt: skip
    dep = {"apiVersion": "apps/v1", "kind": "Deployment",
           "metadata": {"name": "web", "namespace": "prod", "labels": {"app": "web", "tier": "frontend"}},
           "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                    "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 0}},
                    "template": {"metadata": {"labels": {"app": "web"}}, "spec": {
                        "containers": [{"name": "web", "image": "ghcr.io/acme/web:1.4.2",
                                        "ports": [{"containerPort": 8080, "name": "http"}],
                                        "env": [{"name": "LOG_LEVEL", "value": "info"},
                                                {"name": "DB_PASSWORD", "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}}}],
                                        "resources": {"limits": {"cpu": "500m", "memory": "256Mi"}, "requests": {"cpu": 0.1}},
                                        "livenessProbe": {"httpGet": {"path": "/healthz", "port": 8080}, "periodSeconds": 10}}],
                        "volumes": [{"name": "config", "configMap": {"name": "web-config"}},
                                    {"name": "cache", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}}]}}}}  # fmt: skip
    service = {
        "$schema": DRAFT2020, "type": "object",
        "$defs": {"dns": dns, "metadata": json.loads(json.dumps(metadata).replace("#/definitions/", "#/$defs/"))},
        "properties": {
            "apiVersion": {"const": "v1"}, "kind": {"const": "Service"},
            "metadata": {"$ref": "#/$defs/metadata"},
            "spec": {"type": "object", "properties": {
                "type": {"enum": ["ClusterIP", "NodePort", "LoadBalancer", "ExternalName"]},
                "selector": {"type": "object", "additionalProperties": {"type": "string"}},
                "ports": {"type": "array", "minItems": 1, "items": {"type": "object", "properties": {
                    "name": {"type": "string"}, "port": {"type": "integer", "minimum": 1, "maximum": 65535},
                    "targetPort": {"oneOf": [{"type": "integer", "minimum": 1, "maximum": 65535}, {"type": "string"}]},
                    "nodePort": {"type": "integer", "minimum": 30000, "maximum": 32767},
                    "protocol": {"enum": ["TCP", "UDP", "SCTP"]}}, "required": ["port"]}},
                "externalName": {"type": "string"}},
                "if": {"properties": {"type": {"const": "ExternalName"}}, "required": ["type"]},
                "then": {"required": ["externalName"]}, "else": {"required": ["ports"]}}},
        "required": ["apiVersion", "kind", "metadata", "spec"],
    }  # fmt: skip
    configmap = {
        "$schema": DRAFT7, "type": "object",
        "properties": {
            "apiVersion": {"const": "v1"}, "kind": {"const": "ConfigMap"},
            "metadata": {"type": "object", "properties": {"name": dns}, "required": ["name"]},
            "data": {"type": "object", "patternProperties": {"^[-._a-zA-Z0-9]+$": {"type": "string"}},
                     "additionalProperties": False},
            "binaryData": {"type": "object", "additionalProperties": {"type": "string", "pattern": "^[A-Za-z0-9+/]*={0,2}$"}},
            "immutable": {"type": "boolean"}},
        "required": ["apiVersion", "kind", "metadata"], "additionalProperties": False,
    }  # fmt: skip
    cronjob = {
        "$schema": DRAFT7, "type": "object", "definitions": definitions,
        "properties": {
            "apiVersion": {"const": "batch/v1"}, "kind": {"const": "CronJob"},
            "metadata": {"$ref": "#/definitions/metadata"},
            "spec": {"type": "object", "properties": {
                "schedule": {"type": "string", "minLength": 9},
                "concurrencyPolicy": {"enum": ["Allow", "Forbid", "Replace"]},
                "suspend": {"type": "boolean"},
                "successfulJobsHistoryLimit": {"type": "integer", "minimum": 0, "maximum": 100},
                "jobTemplate": {"type": "object", "properties": {"spec": {"type": "object", "properties": {
                    "backoffLimit": {"type": "integer", "minimum": 0},
                    "template": {"type": "object", "properties": {"spec": {"$ref": "#/definitions/podSpec"}}}}}}}},
                "required": ["schedule", "jobTemplate"]}},
        "required": ["apiVersion", "kind", "spec"],
    }  # fmt: skip
    return [
        ("deployment", deployment, [dep, {**dep, "metadata": {"name": "Web_App"}}]),
        ("service", service, [
            {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
             "spec": {"type": "NodePort", "selector": {"app": "web"},
                      "ports": [{"port": 80, "targetPort": "http", "nodePort": 30080}]}},
            {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "ext"},
             "spec": {"type": "ExternalName", "externalName": "db.example.com"}},
            {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "ext"}, "spec": {"type": "ExternalName"}}]),
        ("configmap", configmap, [
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "web-config"},
             "data": {"app.properties": "color=blue\nsize=2", "LOG_LEVEL": "debug"}, "immutable": True},
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "bin"}, "binaryData": {"blob": "AAEC"}}]),
        ("cronjob", cronjob, [
            {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "backup"},
             "spec": {"schedule": "0 2 * * *", "concurrencyPolicy": "Forbid", "jobTemplate": {"spec": {
                 "backoffLimit": 2, "template": {"spec": {"restartPolicy": "OnFailure", "containers": [
                     {"name": "backup", "image": "acme/backup:2", "args": ["--full"]}]}}}}}}]),
    ]  # fmt: skip


def ci_pipelines() -> list[tuple[str, Json, list[Json]]]:
    when = ["on_success", "on_failure", "always", "manual", "delayed", "never"]
    gitlab_job = {"type": "object", "properties": {
        "stage": {"type": "string"},
        "image": {"oneOf": [{"type": "string"}, {"type": "object", "properties": {
            "name": {"type": "string"}, "entrypoint": {"type": "array", "items": {"type": "string"}}}, "required": ["name"]}]},
        "script": {"oneOf": [{"type": "string", "minLength": 1},
                             {"type": "array", "items": {"type": "string"}, "minItems": 1}]},
        "before_script": {"type": "array", "items": {"type": "string"}},
        "rules": {"type": "array", "items": {"type": "object", "properties": {
            "if": {"type": "string"}, "changes": {"type": "array", "items": {"type": "string"}},
            "when": {"enum": when}, "allow_failure": {"type": "boolean"}}, "additionalProperties": False}},
        "needs": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
        "parallel": {"oneOf": [{"type": "integer", "minimum": 2, "maximum": 200}, {"type": "object", "properties": {
            "matrix": {"type": "array", "maxItems": 50, "items": {"type": "object", "additionalProperties": {
                "oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]}}}},
            "required": ["matrix"], "additionalProperties": False}]},
        "retry": {"oneOf": [{"type": "integer", "minimum": 0, "maximum": 2}, {"type": "object", "properties": {
            "max": {"type": "integer", "minimum": 0, "maximum": 2},
            "when": {"oneOf": [{"enum": ["always", "script_failure", "runner_system_failure", "stuck_or_timeout_failure"]},
                               {"type": "array", "uniqueItems": True, "items": {"enum": [
                                   "always", "script_failure", "runner_system_failure", "stuck_or_timeout_failure"]}}]}}}]},
        "artifacts": {"type": "object", "properties": {
            "paths": {"type": "array", "items": {"type": "string"}},
            "expire_in": {"type": "string"},
            "reports": {"type": "object", "properties": {"junit": {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]}}}}},
        "when": {"enum": when},
        "timeout": {"type": "string"},
        "allow_failure": {"oneOf": [{"type": "boolean"}, {"type": "object", "properties": {
            "exit_codes": {"oneOf": [{"type": "integer"}, {"type": "array", "items": {"type": "integer"}, "uniqueItems": True}]}},
            "required": ["exit_codes"]}]}},
        "additionalProperties": False}  # fmt: skip
    gitlab = {
        "$schema": DRAFT7, "type": "object",
        "definitions": {"job": gitlab_job},
        "properties": {
            "stages": {"type": "array", "items": {"type": "string"}, "uniqueItems": True, "minItems": 1},
            "variables": {"type": "object", "additionalProperties": {"oneOf": [
                {"type": ["string", "number"]}, {"type": "object", "properties": {
                    "value": {"type": "string"}, "description": {"type": "string"}}}]}},
            "default": {"type": "object", "properties": {"image": {"type": "string"},
                        "interruptible": {"type": "boolean"}}},
            "include": {"oneOf": [{"type": "string"}, {"type": "array", "items": {"oneOf": [
                {"type": "string"}, {"type": "object", "properties": {"local": {"type": "string"}},
                                     "required": ["local"]},
                {"type": "object", "properties": {"project": {"type": "string"}, "file": {"type": "string"},
                 "ref": {"type": "string"}}, "required": ["project", "file"]}]}}]},
        },
        "patternProperties": {"^\\.": {"type": "object"}, "^(?!(stages|variables|default|include)$)[a-z][a-z0-9 :_-]*$": {"$ref": "#/definitions/job"}},
        "additionalProperties": False,
    }  # fmt: skip
    travis = {
        "$schema": DRAFT7, "type": "object",
        "properties": {
            "language": {"enum": ["python", "node_js", "ruby", "go", "rust", "java", "c", "cpp"]},
            "os": {"type": "array", "items": {"enum": ["linux", "osx", "windows", "freebsd"]}, "uniqueItems": True},
            "dist": {"enum": ["xenial", "bionic", "focal", "jammy"]},
            "python": {"type": "array", "items": {"type": "string", "pattern": "^[0-9]+\\.[0-9]+$"}},
            "env": {"oneOf": [{"type": "array", "items": {"type": "string"}},
                              {"type": "object", "properties": {"global": {"type": "array", "items": {"type": "string"}},
                                                                "jobs": {"type": "array", "items": {"type": "string"}}}}]},
            "jobs": {"type": "object", "properties": {
                "include": {"type": "array", "items": {"type": "object"}},
                "exclude": {"type": "array", "items": {"type": "object"}},
                "allow_failures": {"type": "array", "items": {"type": "object"}},
                "fast_finish": {"type": "boolean"}}, "additionalProperties": False},
            "script": {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]},
            "cache": {"oneOf": [{"enum": ["pip", "npm", "cargo", "bundler"]}, {"type": "boolean"},
                                {"type": "object", "properties": {"directories": {"type": "array", "items": {"type": "string"}}}}]},
        },
        "required": ["language"],
        "allOf": [{"patternProperties": {"^before_": {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]}}},
                  {"patternProperties": {"^after_": {"type": ["string", "array"]}}},
                  {"patternProperties": {"^deploy": {"type": "object"}}}],
    }  # fmt: skip
    return [
        ("gitlab_ci", gitlab, [
            {"stages": ["build", "test"], "variables": {"PIP_CACHE_DIR": ".cache/pip", "N": 2},
             ".base": {"image": "python:3.12"},
             "build": {"stage": "build", "script": ["make"], "artifacts": {"paths": ["dist/"], "expire_in": "1 week"}},
             "test": {"stage": "test", "script": "pytest", "needs": ["build"],
                      "parallel": {"matrix": [{"PY": ["3.11", "3.12"], "DB": "pg"}]},
                      "retry": {"max": 2, "when": ["runner_system_failure"]},
                      "rules": [{"if": "$CI_COMMIT_BRANCH == 'main'", "when": "always"}]}},
            {"lint": {"script": []}}, {"deploy": {"script": "x", "retry": 5}}]),
        ("travis_matrix", travis, [
            {"language": "python", "os": ["linux", "osx"], "python": ["3.11", "3.12"],
             "env": {"global": ["CI=1"]}, "jobs": {"allow_failures": [{"python": "3.13"}], "fast_finish": True},
             "before_install": ["pip install -U pip"], "script": "pytest", "cache": "pip",
             "deploy": {"provider": "pypi"}},
            {"language": "go", "before_script": 3}]),
    ]  # fmt: skip


def tool_schemas() -> list[tuple[str, Json, list[Json]]]:
    weather = {"type": "object", "properties": {
        "location": {"type": "string", "description": "City and country, e.g. Paris, France"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        "days": {"type": "integer", "minimum": 1, "maximum": 14}},
        "required": ["location", "unit"], "additionalProperties": False}  # fmt: skip
    event = {
        "$defs": {
            "Attendee": {"title": "Attendee", "type": "object", "properties": {
                "email": {"title": "Email", "type": "string", "format": "email"},
                "name": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None, "title": "Name"},
                "optional": {"title": "Optional", "type": "boolean", "default": False}},
                "required": ["email"]},
            "Recurrence": {"title": "Recurrence", "type": "object", "properties": {
                "freq": {"enum": ["DAILY", "WEEKLY", "MONTHLY", "YEARLY"], "title": "Freq", "type": "string"},
                "interval": {"type": "integer", "minimum": 1, "default": 1, "title": "Interval"},
                "until": {"anyOf": [{"type": "string", "format": "date-time"}, {"type": "null"}], "default": None},
                "by_day": {"type": "array", "items": {"enum": ["MO", "TU", "WE", "TH", "FR", "SA", "SU"]},
                           "uniqueItems": True, "title": "By Day"}},
                "required": ["freq"]}},
        "title": "CreateEvent", "type": "object",
        "properties": {
            "title": {"type": "string", "minLength": 1, "maxLength": 200, "title": "Title"},
            "start": {"type": "string", "format": "date-time", "title": "Start"},
            "end": {"type": "string", "format": "date-time", "title": "End"},
            "attendees": {"type": "array", "items": {"$ref": "#/$defs/Attendee"}, "maxItems": 50, "title": "Attendees"},
            "recurrence": {"anyOf": [{"$ref": "#/$defs/Recurrence"}, {"type": "null"}], "default": None},
            "reminder_minutes": {"type": "array", "items": {"type": "integer", "multipleOf": 5, "minimum": 0},
                                 "uniqueItems": True, "maxItems": 5},
            "location": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None}},
        "required": ["title", "start", "end"],
    }  # fmt: skip
    flights = {
        "$defs": {
            "Airport": {"type": "string", "pattern": "^[A-Z]{3}$", "title": "Airport"},
            "Passenger": {"type": "object", "title": "Passenger", "properties": {
                "kind": {"enum": ["adult", "child", "infant"], "type": "string"},
                "age": {"type": "integer", "minimum": 0, "maximum": 120}}, "required": ["kind"]},
            "OneWay": {"type": "object", "properties": {"trip": {"const": "one_way", "type": "string"},
                       "date": {"type": "string", "format": "date"}}, "required": ["trip", "date"]},
            "Return": {"type": "object", "properties": {"trip": {"const": "return", "type": "string"},
                       "outbound": {"type": "string", "format": "date"}, "inbound": {"type": "string", "format": "date"}},
                       "required": ["trip", "outbound", "inbound"]}},
        "type": "object", "title": "SearchFlights",
        "properties": {
            "origin": {"$ref": "#/$defs/Airport"}, "destination": {"$ref": "#/$defs/Airport"},
            "itinerary": {"discriminator": {"propertyName": "trip", "mapping": {
                "one_way": "#/$defs/OneWay", "return": "#/$defs/Return"}},
                "oneOf": [{"$ref": "#/$defs/OneWay"}, {"$ref": "#/$defs/Return"}]},
            "passengers": {"type": "array", "items": {"$ref": "#/$defs/Passenger"}, "minItems": 1, "maxItems": 9},
            "cabin": {"enum": ["economy", "premium_economy", "business", "first"], "default": "economy"},
            "max_price": {"anyOf": [{"type": "number", "exclusiveMinimum": 0}, {"type": "null"}]}},
        "required": ["origin", "destination", "itinerary", "passengers"],
    }  # fmt: skip
    query = {"type": "object", "properties": {
        "table": {"enum": ["orders", "customers", "products", "invoices"]},
        "columns": {"type": "array", "items": {"type": "string", "pattern": "^[a-z_][a-z0-9_]*$"},
                    "minItems": 1, "uniqueItems": True},
        "filters": {"type": "array", "items": {"type": "object", "properties": {
            "column": {"type": "string"}, "op": {"enum": ["=", "!=", "<", "<=", ">", ">=", "in", "like"]},
            "value": {"anyOf": [{"type": "string"}, {"type": "number"}, {"type": "boolean"}, {"type": "null"},
                                {"type": "array", "items": {"type": ["string", "number"]}}]}},
            "required": ["column", "op", "value"], "additionalProperties": False}},
        "order_by": {"type": "object", "properties": {"column": {"type": "string"},
                     "direction": {"enum": ["asc", "desc"]}}, "required": ["column"]},
        "limit": {"type": "integer", "minimum": 1, "maximum": 1000}},
        "required": ["table", "columns"], "additionalProperties": False}  # fmt: skip
    category = {"$defs": {"Category": {"type": "object", "title": "Category", "properties": {
        "name": {"type": "string", "title": "Name"},
        "slug": {"type": "string", "pattern": "^[a-z0-9-]+$"},
        "children": {"type": "array", "items": {"$ref": "#/$defs/Category"}, "title": "Children"}},
        "required": ["name", "slug"]}}, "$ref": "#/$defs/Category"}  # fmt: skip
    order = {
        "$schema": DRAFT2020,
        "$defs": {
            "Money": {"type": "object", "properties": {
                "amount": {"anyOf": [{"type": "number", "multipleOf": 0.01}, {"type": "string", "pattern": "^-?[0-9]+(\\.[0-9]{1,2})?$"}]},
                "currency": {"type": "string", "enum": ["EUR", "USD", "GBP", "JPY", "CHF"]}},
                "required": ["amount", "currency"], "additionalProperties": False},
            "LineItem": {"type": "object", "properties": {
                "sku": {"type": "string", "minLength": 3, "maxLength": 20},
                "quantity": {"type": "integer", "minimum": 1},
                "unit_price": {"$ref": "#/$defs/Money"}},
                "required": ["sku", "quantity", "unit_price"], "additionalProperties": False},
            "Address": {"type": "object", "properties": {
                "street": {"type": "string"}, "city": {"type": "string"},
                "postal_code": {"type": "string", "pattern": "^[0-9A-Z -]{3,10}$"},
                "country": {"type": "string", "pattern": "^[A-Z]{2}$"}},
                "required": ["street", "city", "country"]}},
        "type": "object", "title": "Order",
        "properties": {
            "order_id": {"type": "string", "format": "uuid"},
            "customer_email": {"type": "string", "format": "email"},
            "items": {"type": "array", "items": {"$ref": "#/$defs/LineItem"}, "minItems": 1, "uniqueItems": True},
            "shipping": {"$ref": "#/$defs/Address"},
            "billing": {"anyOf": [{"$ref": "#/$defs/Address"}, {"type": "null"}]},
            "coupon_codes": {"type": "array", "items": {"type": "string", "maxLength": 16}, "uniqueItems": True},
            "placed_at": {"type": "string", "format": "date-time"},
            "status": {"enum": ["pending", "paid", "shipped", "cancelled"]}},
        "required": ["order_id", "items", "shipping"],
        "dependentRequired": {"coupon_codes": ["customer_email"]},
    }  # fmt: skip
    strict = {"type": "object", "properties": {
        "answer": {"type": "string"},
        "confidence": {"type": "number", "minimum": 0, "maximum": 1},
        "citations": {"type": "array", "items": {"type": "object", "properties": {
            "url": {"type": "string"}, "quote": {"type": ["string", "null"]}},
            "required": ["url", "quote"], "additionalProperties": False}},
        "follow_up": {"anyOf": [{"type": "object", "properties": {"question": {"type": "string"},
                                  "priority": {"type": "string", "enum": ["low", "high"]}},
                                  "required": ["question", "priority"], "additionalProperties": False},
                                 {"type": "null"}]}},
        "required": ["answer", "confidence", "citations", "follow_up"], "additionalProperties": False}  # fmt: skip
    email = {"type": "object", "properties": {
        "to": {"type": "array", "items": {"type": "string", "format": "email"}, "minItems": 1, "uniqueItems": True},
        "cc": {"type": "array", "items": {"type": "string", "format": "email"}, "uniqueItems": True},
        "subject": {"type": "string", "minLength": 1, "maxLength": 150},
        "body": {"type": "string"},
        "priority": {"enum": ["low", "normal", "high"], "default": "normal"},
        "reason": {"type": "string", "minLength": 3},
        "attachments": {"type": "array", "maxItems": 5, "items": {"type": "object", "properties": {
            "filename": {"type": "string", "pattern": "^[^/\\\\]+\\.[a-z0-9]{1,5}$"},
            "content_base64": {"type": "string", "pattern": "^[A-Za-z0-9+/]*={0,2}$"}},
            "required": ["filename", "content_base64"], "additionalProperties": False}}},
        "required": ["to", "subject", "body"],
        "if": {"properties": {"priority": {"const": "high"}}, "required": ["priority"]},
        "then": {"required": ["reason"]}, "additionalProperties": False}  # fmt: skip
    booking = {"$schema": DRAFT2020, "type": "object", "properties": {
        "restaurant_id": {"type": "string", "pattern": "^r-[0-9]+$"},
        "date": {"type": "string", "format": "date"},
        "time": {"type": "string", "pattern": "^([01][0-9]|2[0-3]):[0-5][0-9]$"},
        "party_size": {"type": "integer", "minimum": 1, "maximum": 20},
        "occasion": {"enum": ["birthday", "anniversary", "business", "date", "other"]},
        "note": {"type": "string", "maxLength": 200}},
        "required": ["restaurant_id", "date", "time", "party_size"],
        "dependentSchemas": {"occasion": {"required": ["note"]}},
        "if": {"properties": {"party_size": {"minimum": 9}}},
        "then": {"required": ["occasion"]}, "additionalProperties": False}  # fmt: skip
    return [
        ("get_weather", weather, [{"location": "Paris, France", "unit": "celsius"},
                                  {"location": "Austin, TX", "unit": "fahrenheit", "days": 3}]),
        ("create_event", event, [
            {"title": "Standup", "start": "2024-06-03T09:00:00Z", "end": "2024-06-03T09:15:00Z",
             "attendees": [{"email": "a@example.com"}, {"email": "b@example.com", "name": "Bo", "optional": True}],
             "recurrence": {"freq": "WEEKLY", "by_day": ["MO", "WE", "FR"], "until": None},
             "reminder_minutes": [5, 30]},
            {"title": "Offsite", "start": "2024-07-01T08:00:00+02:00", "end": "2024-07-02T18:00:00+02:00",
             "recurrence": None, "location": "Lisbon"}]),
        ("search_flights", flights, [
            {"origin": "BER", "destination": "LIS", "itinerary": {"trip": "one_way", "date": "2024-09-12"},
             "passengers": [{"kind": "adult", "age": 40}, {"kind": "child", "age": 7}], "cabin": "economy"},
            {"origin": "JFK", "destination": "SFO", "itinerary": {"trip": "return", "outbound": "2024-10-01",
             "inbound": "2024-10-08"}, "passengers": [{"kind": "adult"}], "max_price": 450.5}]),
        ("sql_query", query, [
            {"table": "orders", "columns": ["id", "total"], "filters": [
                {"column": "status", "op": "in", "value": ["paid", "shipped"]},
                {"column": "total", "op": ">=", "value": 100}], "order_by": {"column": "total", "direction": "desc"},
             "limit": 50}]),
        ("category_tree", category, [{"name": "Root", "slug": "root", "children": [
            {"name": "Books", "slug": "books", "children": [{"name": "Sci-Fi", "slug": "sci-fi"}]},
            {"name": "Music", "slug": "music", "children": []}]}]),
        ("order", order, [
            {"order_id": "3f1c2d9e-8a4b-4c6d-9e0f-1a2b3c4d5e6f", "customer_email": "c@example.com",
             "items": [{"sku": "BOOK-1", "quantity": 2, "unit_price": {"amount": 12.99, "currency": "EUR"}},
                       {"sku": "PEN-7", "quantity": 1, "unit_price": {"amount": "0.50", "currency": "EUR"}}],
             "shipping": {"street": "Main St 1", "city": "Berlin", "postal_code": "10115", "country": "DE"},
             "billing": None, "coupon_codes": ["SPRING"], "status": "paid"},
            {"order_id": "00000000-0000-4000-8000-000000000000",
             "items": [{"sku": "ABC", "quantity": 1, "unit_price": {"amount": 1, "currency": "USD"}}],
             "shipping": {"street": "x", "city": "y", "country": "US"}, "coupon_codes": ["X"]}]),
        ("send_email", email, [
            {"to": ["a@example.com", "b@example.com"], "subject": "Report", "body": "See attached.",
             "priority": "high", "reason": "deadline", "attachments": [{"filename": "r.pdf", "content_base64": "JVBERi0x"}]},
            {"to": ["a@example.com"], "subject": "Hi", "body": "", "priority": "high"}]),
        ("book_table", booking, [
            {"restaurant_id": "r-123", "date": "2024-08-01", "time": "19:30", "party_size": 4},
            {"restaurant_id": "r-9", "date": "2024-08-02", "time": "12:00", "party_size": 12,
             "occasion": "birthday", "note": "cake at 13:00"},
            {"restaurant_id": "r-9", "date": "2024-08-02", "time": "25:00", "party_size": 2, "occasion": "date"}]),
        ("structured_output_strict", strict, [
            {"answer": "42", "confidence": 0.9, "citations": [{"url": "https://example.com", "quote": None}],
             "follow_up": None},
            {"answer": "", "confidence": 1, "citations": [], "follow_up": {"question": "Why?", "priority": "low"}}]),
    ]  # fmt: skip


def gen_keywords(rng: random.Random) -> list[tuple[str, Json, list[Json]]]:
    """Keyword mixes held-out schemas use and engines refuse or slow down on."""
    dependencies = {"$schema": DRAFT7, "type": "object", "properties": {
        "name": {"type": "string"}, "nickname": {"type": "string"},
        "credit_card": {"type": "string", "pattern": "^[0-9]{12,19}$"},
        "billing_address": {"type": "string"}, "shipping_address": {"type": "string"}},
        "required": ["name"],
        "dependencies": {"credit_card": ["billing_address"],
                         "shipping_address": {"properties": {"billing_address": {"type": "string"}},
                                              "required": ["billing_address"]},
                         "nickname": {"properties": {"nickname": {"maxLength": 10}}}}}  # fmt: skip
    negations = {"$schema": DRAFT2020, "type": "object", "properties": {
        "mode": {"type": "string", "not": {"enum": ["legacy", "deprecated"]}},
        "files": {"type": "array", "items": {"type": "string", "not": {"pattern": "^tmp/"}}},
        "user": {"type": "string"}, "token": {"type": "string"}, "password": {"type": "string"},
        "limits": {"type": "object", "properties": {"min": {"type": "integer"}, "max": {"type": "integer"}},
                   "not": {"required": ["min", "max"], "properties": {"min": {"const": 0}, "max": {"const": 0}}}}},
        "not": {"required": ["token", "password"]}}  # fmt: skip
    multiples = {"$schema": DRAFT7, "type": "object", "properties": {
        "step": {"type": "number", "multipleOf": 0.25},
        "batch": {"type": "integer", "multipleOf": 7},
        "price": {"type": "number", "multipleOf": 0.01},
        "angle": {"type": "number", "multipleOf": 15, "minimum": -180, "maximum": 180}},
        "required": ["step", "batch"]}  # fmt: skip
    unique = {"type": "object", "properties": {
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 20}, "uniqueItems": True},
        "points": {"type": "array", "uniqueItems": True, "maxItems": 6, "items": {
            "type": "object", "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
            "required": ["x", "y"], "additionalProperties": False}},
        "mixed": {"type": "array", "uniqueItems": True, "items": {"type": ["string", "integer", "boolean"]}}}}  # fmt: skip
    patterns = {"$schema": DRAFT7, "type": "object", "allOf": [
        {"patternProperties": {"^x-": {"type": "string"}}},
        {"patternProperties": {"^[a-z]+_id$": {"type": "integer", "minimum": 1}}},
        {"patternProperties": {"^(is|has)_": {"type": "boolean"}}}],
        "properties": {"name": {"type": "string"}},
        "additionalProperties": {"type": ["string", "integer", "boolean", "null"]}}  # fmt: skip
    formats = {"$schema": DRAFT2020, "type": "object", "properties": {
        "homepage": {"type": "string", "format": "uri", "minLength": 10, "maxLength": 100},
        "callback": {"type": "string", "format": "uri-template", "maxLength": 200},
        "contact": {"type": "string", "format": "email", "maxLength": 64},
        "created": {"type": "string", "format": "date-time"},
        "id": {"type": "string", "format": "uuid"},
        "host": {"type": "string", "format": "hostname"},
        "ip": {"type": "string", "format": "ipv4"}},
        "required": ["homepage", "created"]}  # fmt: skip
    json_value = {"$schema": DRAFT7, "definitions": {"value": {"anyOf": [
        {"type": "null"}, {"type": "boolean"}, {"type": "number"}, {"type": "string"},
        {"type": "array", "items": {"$ref": "#/definitions/value"}},
        {"type": "object", "additionalProperties": {"$ref": "#/definitions/value"}}]}},
        "type": "object", "properties": {"key": {"type": "string"}, "payload": {"$ref": "#/definitions/value"}},
        "required": ["key", "payload"]}  # fmt: skip
    groups = {}
    for g in range(10):
        props = {f"{WORDS[g % len(WORDS)]}_{i}": _leaf(rng, f"g{g}_{i}") for i in range(30)}
        groups[f"section_{g}"] = {
            "type": "object",
            "properties": props,
            "additionalProperties": False,
        }
    grouped = {"$schema": DRAFT2020, "type": "object", "properties": groups,
               "required": ["section_0", "section_1"]}  # fmt: skip
    statuses = [
        100,
        101,
        200,
        201,
        202,
        203,
        204,
        206,
        301,
        302,
        303,
        304,
        307,
        308,
        400,
        401,
        402,
        403,
        404,
        405,
        406,
        408,
        409,
        410,
        411,
        412,
        413,
        414,
        415,
        416,
        418,
        422,
        425,
        426,
        428,
        429,
        431,
        451,
        500,
        501,
        502,
        503,
        504,
        505,
        511,
    ]
    zones = sorted({f"{rng.choice(['Africa', 'America', 'Asia', 'Europe', 'Pacific'])}/"
                    f"{''.join(rng.choices(string.ascii_lowercase, k=rng.randint(4, 10))).title()}"
                    for _ in range(900)})  # fmt: skip
    enums = {"type": "object", "properties": {"status": {"type": "integer", "enum": statuses},
             "timezone": {"type": "string", "enum": zones}, "retry": {"type": "boolean"}},
             "required": ["status", "timezone"]}  # fmt: skip
    nested_union = {"$schema": DRAFT7, "type": "object", "properties": {"target": {"oneOf": [
        {"type": "object", "properties": {"host": {"type": "string"}, "port": {"anyOf": [
            {"type": "integer", "minimum": 1, "maximum": 65535}, {"type": "string", "pattern": "^[0-9]+$"}]}},
         "required": ["host"], "additionalProperties": False},
        {"type": "object", "properties": {"socket": {"type": "string"}}, "required": ["socket"],
         "additionalProperties": False},
        {"type": "string", "anyOf": [{"format": "uri"}, {"pattern": "^unix:"}]}]}},
        "required": ["target"]}  # fmt: skip
    return [
        ("dependencies_array_and_schema", dependencies, [
            {"name": "Ada", "credit_card": "4111111111111111", "billing_address": "1 Main St"},
            {"name": "Bo", "shipping_address": "2 Side St"}, {"name": "Cy", "nickname": "a-very-long-nickname"}]),
        ("not_beyond_types", negations, [{"mode": "fast", "files": ["src/a.py"], "user": "u", "token": "t"},
                                         {"limits": {"min": 0, "max": 0}}, {"mode": "legacy"}]),
        ("multiple_of_unbounded", multiples, [{"step": 1.75, "batch": 21, "price": 10.1, "angle": -45},
                                              {"step": -0.5, "batch": 0}]),
        ("unique_items_strings_objects", unique, [{"tags": ["a", "b"], "points": [{"x": 1, "y": 2}, {"x": 2, "y": 1}],
                                                    "mixed": ["1", 1, True]}]),
        ("allof_pattern_properties", patterns, [{"name": "n", "x-trace": "abc", "user_id": 5, "is_admin": False,
                                                  "other": None}]),
        ("formats_with_bounds", formats, [
            {"homepage": "https://example.com/", "callback": "https://example.com/hooks/{event}",
             "contact": "ops@example.com", "created": "2024-01-01T00:00:00Z",
             "id": "3f1c2d9e-8a4b-4c6d-9e0f-1a2b3c4d5e6f", "host": "db.example.com", "ip": "192.168.0.1"}]),
        ("json_value_recursive", json_value, [{"key": "k", "payload": {"a": [1, "two", None, {"b": False}]}}]),
        ("grouped_flat_300", grouped, []),
        ("int_and_timezone_enums", enums, []),
        ("oneof_nested_anyof", nested_union, [{"target": {"host": "db", "port": "5432"}},
                                              {"target": {"socket": "/run/db.sock"}}, {"target": "unix:/run/x"}]),
    ]  # fmt: skip


FAMILIES: list[tuple[str, Callable[[], list]]] = [
    ("docker_compose", docker_compose),
    ("github_actions", github_actions),
    ("openapi", openapi),
    ("manifests", manifests),
    ("tsconfig_eslint", tsconfig_eslint),
    ("kubernetes", kubernetes),
    ("ci_pipelines", ci_pipelines),
    ("tool_schemas", tool_schemas),
]
GENERATED: list[tuple[str, Callable[[random.Random], list]]] = [
    ("gen_flat", gen_flat),
    ("gen_enum", gen_enum),
    ("gen_refs", gen_refs),
    ("gen_unions", gen_unions),
    ("gen_arrays", gen_arrays),
    ("gen_recursive", gen_recursive),
    ("gen_keywords", gen_keywords),
]


def build() -> list[dict]:
    """All rows, in a fixed order, from the fixed seed."""
    rng = random.Random(SEED)
    entries: list[tuple[str, str, Json, list[Json], bool]] = []
    for split, family in FAMILIES:
        entries += [(split, name, schema, hand, False) for name, schema, hand in family()]
    for split, family in GENERATED:
        entries += [(split, name, schema, hand, True) for name, schema, hand in family(rng)]
    rows = []
    for i, (split, name, schema, hand, is_generated) in enumerate(entries):
        print(f"{split}/{name}", file=sys.stderr, flush=True)
        # one generator per row: a row's instances do not depend on the rows before it
        row_rng = random.Random(f"{SEED}:{split}/{name}")
        tests = instances(schema, hand, row_rng, SEED + i, use_sampler=is_generated)
        rows.append({
            "id": f"{split}---{name}", "split": split, "name": name, "schema": schema,
            "tests": tests,
            "meta": {"origin": "generated (seeded)" if is_generated else "hand-written",
                     "draft": schema.get("$schema", "default (2020-12)") if isinstance(schema, dict) else "",
                     "seed": SEED},
            "description": f"wild corpus {split}: {name}",
        })  # fmt: skip
    return rows


def main() -> None:
    rows = build()
    OUT.parent.mkdir(parents=True, exist_ok=True)
    with OUT.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False, separators=(",", ":")) + "\n")
    num_tests = sum(len(r["tests"]) for r in rows)
    num_valid = sum(t["valid"] for r in rows for t in r["tests"])
    print(f"{len(rows)} schemas, {num_tests} instances ({num_valid} valid) -> {OUT} "
          f"({OUT.stat().st_size / 1e6:.2f} MB)")  # fmt: skip


if __name__ == "__main__":
    main()
