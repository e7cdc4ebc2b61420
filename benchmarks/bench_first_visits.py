"""First-visit masks of chosen wild-corpus schemas, each alone in this process.

``bench_json_schema.py`` walks the whole corpus in one long process, so its slowest masks
include garbage-collector pauses set off by everything compiled before. This compiles each
named schema (``benchmarks/data/wild_corpus.jsonl`` ids, or their part after ``---``) after
the grammar kernels are warmed, walks its first valid instance token by token, and prints the
four slowest masks (ms) with the text before each: the masks' own cost. Run by hand:

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_first_visits.py compose_file tsconfig
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

CORPUS = Path(__file__).parent / "data" / "wild_corpus.jsonl"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="+", help="schema ids (or their part after '---')")
    args = parser.parse_args()

    import jsonschema

    from formcast.engine.models.loader import load_tokenizer
    from formcast.grammar import Vocabulary, allocate_token_bitmask
    from formcast.grammar.json_schema.compile import compile_json_schema
    from formcast.grammar.json_schema.values import serialize
    from formcast.grammar.kernel_warmup import warm_all_kernels

    tokenizer = load_tokenizer("smollm2-135m")
    vocab = Vocabulary.from_tokenizer(tokenizer)
    warm_all_kernels(vocab)
    for line in CORPUS.read_text().splitlines():
        row = json.loads(line)
        if row["id"] not in args.names and row["id"].split("---")[-1] not in args.names:
            continue
        schema = row["schema"]
        validator = jsonschema.validators.validator_for(schema)(schema)
        valid = [t["data"] for t in row["tests"] if validator.is_valid(t["data"])]
        if not valid:
            continue
        grammar = compile_json_schema(schema, vocab, strict=False, cache=False)
        bitmask = allocate_token_bitmask(1, grammar.vocab_size)
        text = serialize(valid[0], schema, schema)
        matcher, prefix, times = grammar.matcher(), b"", []
        for token_id in tokenizer.encode(text, add_special_tokens=False):
            start = time.perf_counter()
            matcher.fill_bitmask(bitmask, 0)
            times.append(((time.perf_counter() - start) * 1e3, prefix[-50:]))
            if not matcher.accept_token(token_id):
                raise SystemExit(f"{row['id']}: a valid instance was rejected")
            prefix += vocab.token_bytes[token_id]
        worst = sorted(times, key=lambda pair: -pair[0])[:4]
        shown = ", ".join(f"{ms:.2f} ms after {before!r}" for ms, before in worst)
        print(f"{row['id']} ({type(grammar).__name__}, {len(times)} masks): {shown}")


if __name__ == "__main__":
    main()
