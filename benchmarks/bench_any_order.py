"""What ``any_order=True`` costs: compile time and masks, against the same schemas in schema
order (SmolLM2 vocabulary, one process, caches off).

Schemas: flat objects of ``n`` declared properties (integers, bounded strings, booleans,
enums; every other one required) for n = 2..11 (the bound, ``MAX_ANY_ORDER_REFERENCES``),
and the tool-argument schemas of the wild corpus (``wild_corpus.tool_schemas``: nested
objects, ``$ref``s, unions, uniqueItems). Each valid instance is walked token by token with a
mask before every token: in schema order through the fixed-order grammar, with every
object's keys shuffled through the any-order one (the fixed-order grammar rejects most of
those; the walk asserts the any-order one accepts them). Compile: median of 3 cold compiles
(``cache=False``); masks: p50 / p99 / max over all walks (first visits included).

No peer runs here with this option (XGrammar 0.2.9 and llguidance 1.9.1 write properties in
schema order only), so the reference is formcast's own fixed order.

Run: ``HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_any_order.py`` (~1 minute).
"""

from __future__ import annotations

import json
import platform
import random
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

KINDS = [
    {"type": "integer", "minimum": 0, "maximum": 1000},
    {"type": "string", "maxLength": 16},
    {"type": "boolean"},
    {"enum": ["red", "green", "blue"]},
]
FILLS = [417, "hello", True, "green"]


def flat(n: int) -> tuple[dict, list]:
    names = [f"field_{i}" for i in range(n)]
    schema = {
        "type": "object",
        "properties": {name: KINDS[i % 4] for i, name in enumerate(names)},
        "required": names[::2],
        "additionalProperties": False,
    }
    instances = [
        {name: FILLS[i % 4] for i, name in enumerate(names)},
        {name: FILLS[i % 4] for i, name in enumerate(names) if i % 2 == 0},
    ]
    return schema, instances


def shuffled(value, rng: random.Random):
    """``value`` with every object's keys in a random order."""
    if isinstance(value, dict):
        keys = list(value)
        rng.shuffle(keys)
        return {k: shuffled(value[k], rng) for k in keys}
    if isinstance(value, list):
        return [shuffled(v, rng) for v in value]
    return value


def _compile(schema, vocab, any_order: bool):
    from formcast.grammar.json_schema.compile import compile_json_schema

    times, grammar = [], None
    for _ in range(3):
        start = time.perf_counter()
        grammar = compile_json_schema(schema, vocab, any_order=any_order, cache=False)
        times.append(time.perf_counter() - start)
    return grammar, statistics.median(times)


def _walk(grammar, ids, bitmask, mask_times: list[float]) -> bool:
    m = grammar.matcher()
    for token in ids:
        start = time.perf_counter()
        m.fill_bitmask(bitmask, 0)
        mask_times.append(time.perf_counter() - start)
        if not m.accept_token(int(token)):
            return False
    return m.is_accepting()


def run_case(name, schema, instances, tokenizer, vocab, bitmask, rng) -> str:
    from bench_json_schema import oracle_for

    from formcast.errors import SchemaError
    from formcast.grammar.json_schema.values import serialize

    oracle = oracle_for(schema)
    instances = [value for value in instances if oracle.is_valid(value)]
    fixed, fixed_s = _compile(schema, vocab, False)
    try:
        anyo, any_s = _compile(schema, vocab, True)
    except SchemaError as exc:
        return f"| {name} | {fixed_s * 1e3:.1f} | refused: {str(exc)[:80]} | | | |"
    fixed_masks: list[float] = []
    any_masks: list[float] = []
    num_orders = 0
    for value in instances:
        text = serialize(value, schema, schema)
        ids = tokenizer.encode(text, add_special_tokens=False)
        assert _walk(fixed, ids, bitmask, fixed_masks), (name, text)
        for _ in range(3):
            other = json.dumps(shuffled(json.loads(text), rng), separators=(",", ":"))
            ids = tokenizer.encode(other, add_special_tokens=False)
            assert _walk(anyo, ids, bitmask, any_masks), (name, other)
            num_orders += other != text

    def stats(xs: list[float]) -> str:
        us = np.asarray(xs) * 1e6
        return f"{np.percentile(us, 50):.1f} / {np.percentile(us, 99):.0f} / {us.max():.0f}"

    return (
        f"| {name} | {fixed_s * 1e3:.1f} ({type(fixed).__name__}) | {any_s * 1e3:.1f} "
        f"({type(anyo).__name__}) | {stats(fixed_masks)} | {stats(any_masks)} | {num_orders} |"
    )


def main() -> None:
    import wild_corpus

    from formcast.engine.models.loader import load_tokenizer
    from formcast.grammar import Vocabulary, allocate_token_bitmask
    from formcast.grammar.kernel_warmup import warm_all_kernels

    tokenizer = load_tokenizer("smollm2-135m")
    vocab = Vocabulary.from_tokenizer(tokenizer)
    warm_all_kernels(vocab)
    bitmask = allocate_token_bitmask(1, vocab.vocab_size)
    rng = random.Random(0)
    print(f"# {platform.processor() or platform.machine()}, {platform.python_version()}")
    print(
        "| schema | schema order: compile ms (grammar) | any order: compile ms (grammar) "
        "| schema order masks p50 / p99 / max us | any order masks p50 / p99 / max us "
        "| reordered walks |"
    )
    print("|---|---|---|---|---|---:|")
    for n in (2, 4, 6, 8, 10, 11):
        schema, instances = flat(n)
        print(
            run_case(f"flat n={n}", schema, instances, tokenizer, vocab, bitmask, rng), flush=True
        )
    for name, schema, instances in wild_corpus.tool_schemas():
        print(run_case(name, schema, instances, tokenizer, vocab, bitmask, rng), flush=True)


if __name__ == "__main__":
    main()
