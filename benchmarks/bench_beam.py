"""Beam search: formcast's paged engine vs transformers' generate(num_beams=...), same run.

For each beam width, ``--num-prompts`` chat prompts run concurrently (one engine call with
every request queued; one batched, left-padded transformers call). Reported: wall-clock and process
CPU time (the fair number on a shared machine), peak KV memory (ours: peak blocks in use x bytes per block, sampled after every step;
transformers: the bytes of its ``past_key_values`` tensors at the end, which is its peak, as
the cache only grows and is reordered in place) and how many prompts got the same best
sequence from both.

Usage::

    .venv/bin/python benchmarks/bench_beam.py --num-beams 4 8 --num-prompts 16 --max-tokens 32
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from formcast.decoding.beam_search import BeamSearchParams  # noqa: E402
from formcast.engine.llm_engine import LLM  # noqa: E402
from formcast.engine.models.loader import load_hf_model, load_tokenizer  # noqa: E402

TOPICS = [
    "the sea",
    "a mountain",
    "coffee",
    "autumn",
    "a city at night",
    "a cat",
    "the moon",
    "rain",
    "a library",
    "bread",
    "a river",
    "winter",
    "a train",
    "music",
    "a garden",
    "the desert",
]


PASSAGE = (
    "The harbour town woke slowly. Fishing boats came in with the tide, gulls circled the "
    "market, and the baker on the corner opened his shutters to the smell of bread. Children "
    "ran along the sea wall while their grandparents argued about the weather, the price of "
    "coffee and the new train line that would, they said, change everything or nothing. In the "
    "afternoon the wind turned, the clouds came low over the hills, and the first drops of rain "
    "sent the tourists back to their hotels. By evening the lamps were lit along the quay. "
)


def chat_prompts(tokenizer, num_prompts: int, context_words: int = 0) -> list[list[int]]:
    """``num_prompts`` chat-templated prompts (token ids) asking for short texts, each after a
    shared-style context passage of ``context_words`` words (0: no passage)."""
    words = (PASSAGE * (1 + context_words // 80)).split()[:context_words]
    prompts = []
    for i in range(num_prompts):
        # every prompt's passage starts at a different word, so prompts share no prefix
        shift = (7 * i) % max(1, len(words))
        context = " ".join(words[shift:] + words[:shift])
        ask = f"Write two sentences about {TOPICS[i % len(TOPICS)]}."
        content = f"{context}\n\n{ask}" if context else ask
        text = tokenizer.apply_chat_template(
            [{"role": "user", "content": content}],
            add_generation_prompt=True,
            tokenize=False,
        )
        prompts.append(tokenizer.encode(text))
    return prompts


def run_ours(llm: LLM, prompts: list[list[int]], params: BeamSearchParams):
    """Run every prompt concurrently; return (outputs, seconds, peak KV bytes)."""
    bm = llm.block_manager
    begin, begin_cpu = time.perf_counter(), time.process_time()
    request_ids = [llm.add_request(p, beam_search=params) for p in prompts]
    peak = 0
    while not all(llm.requests[r].is_finished for r in request_ids):
        llm.step()
        peak = max(peak, bm.num_blocks - bm.num_free_blocks)
    seconds = (time.perf_counter() - begin, time.process_time() - begin_cpu)
    outputs = [llm.take_output(r) for r in request_ids]
    return outputs, seconds, peak * llm.runner.bytes_per_block


def _tensor_bytes(obj, seen: set[int]) -> int:
    """Bytes of the tensors reachable from a cache object (layers, keys, values)."""
    if id(obj) in seen:
        return 0
    seen.add(id(obj))
    if isinstance(obj, torch.Tensor):
        return obj.numel() * obj.element_size()
    if isinstance(obj, (list, tuple)):
        return sum(_tensor_bytes(x, seen) for x in obj)
    if hasattr(obj, "__dict__"):
        return sum(_tensor_bytes(x, seen) for x in vars(obj).values())
    return 0


@torch.no_grad()
def run_transformers(hf, tokenizer, prompts: list[list[int]], params: BeamSearchParams):
    """One batched, left-padded generate; return (best ids per prompt, seconds, KV bytes)."""
    width = max(len(p) for p in prompts)
    pad = tokenizer.pad_token_id
    input_ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts])
    attention_mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    begin, begin_cpu = time.perf_counter(), time.process_time()
    out = hf.generate(
        input_ids,
        attention_mask=attention_mask,
        num_beams=params.num_beams,
        do_sample=False,
        early_stopping=params.early_stopping,
        length_penalty=params.length_penalty,
        max_new_tokens=params.max_tokens,
        return_dict_in_generate=True,
        output_scores=True,
    )
    seconds = (time.perf_counter() - begin, time.process_time() - begin_cpu)
    cache = getattr(out, "past_key_values", None) or getattr(out, "cache", None)
    kv_bytes = _tensor_bytes(cache, set())
    lengths = (out.beam_indices >= 0).sum(dim=1).tolist()
    best = [out.sequences[i, width : width + n].tolist() for i, n in enumerate(lengths)]
    return best, seconds, kv_bytes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-beams", type=int, nargs="+", default=[4, 8])
    parser.add_argument("--num-prompts", type=int, default=16)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument(
        "--context-words", type=int, default=0, help="words of context before each request"
    )
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    tokenizer = load_tokenizer("smollm2-135m")
    hf = load_hf_model("smollm2-135m")
    prompts = chat_prompts(tokenizer, args.num_prompts, args.context_words)
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
        f"torch {torch.__version__}, {torch.get_num_threads()} threads"
    )
    print(
        f"{args.num_prompts} concurrent prompts ({min(map(len, prompts))}-"
        f"{max(map(len, prompts))} tokens), max_tokens={args.max_tokens}, float32\n"
    )
    print(
        "| num_beams | formcast wall s | transformers wall s | speedup (wall) | "
        "formcast CPU s | transformers CPU s | speedup (CPU) | formcast peak KV MiB | "
        "transformers KV MiB | memory ratio | same best sequence |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for num_beams in args.num_beams:
        params = BeamSearchParams(num_beams=num_beams, max_tokens=args.max_tokens)
        llm = LLM(
            "smollm2-135m",
            max_num_seqs=num_beams * args.num_prompts,
            block_size=16,
            enable_prefix_caching=False,
        )
        run_ours(llm, prompts[:2], BeamSearchParams(num_beams=num_beams, max_tokens=4))  # warm
        ours, our_seconds, our_bytes = run_ours(llm, prompts, params)
        theirs, their_seconds, their_bytes = run_transformers(hf, tokenizer, prompts, params)
        same = sum(o.outputs[0].token_ids == t for o, t in zip(ours, theirs, strict=True))
        mib = 1 << 20
        print(
            f"| {num_beams} | {our_seconds[0]:.2f} | {their_seconds[0]:.2f} | "
            f"{their_seconds[0] / our_seconds[0]:.2f}x | {our_seconds[1]:.2f} | "
            f"{their_seconds[1]:.2f} | {their_seconds[1] / our_seconds[1]:.2f}x | "
            f"{our_bytes / mib:.1f} | "
            f"{their_bytes / mib:.1f} | {their_bytes / max(our_bytes, 1):.2f}x | "
            f"{same}/{len(prompts)} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
