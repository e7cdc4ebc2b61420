"""Self-distillation training of `MedusaHeads` on text the target model generates itself.

Pipeline (``train_medusa``), all offline:

1. Prompts: built-in instruction prompts (`medusa_prompts.training_prompts`); the held-out
   set (`heldout_prompts`) is the accuracy report's and the benchmarks' "open-ended text".
2. Generation: the engine (`LLM`, batched) answers each chat prompt, alternating greedy and
   sampled (temperature 0.8) decoding, until the generation share of the time budget is spent.
3. Hidden states (`medusa_corpus`): a `HiddenRecorder` keeps the final-norm state ``h_p``
   the engine's LM head saw at every position that sampled an answer token, so no second
   pass is needed (`teacher_force` does the same through a transformers model, for cached or
   foreign text). They stay in memory (N x H floats).
4. Training: head ``i`` at row ``p`` learns the model's distribution of token ``p + i + 2``,
   i.e. ``softmax(E h_{p+i+1})`` (the target's own next-token distribution one row later,
   computed on the fly from the cached states: soft labels, "soft" loss) or the generated
   token itself ("hard" loss). Only the heads' residual blocks train (AdamW, warmup then
   cosine decay); the LM head is frozen and shared. Loss weights ``0.8^i`` per head.
5. Evaluation: per-head top-1 / top-k accuracy against the tokens of held-out greedy
   generations, with the untrained heads (== the base LM head) as the baseline.

The vocabulary subset of the heads is the most frequent tokens of the generated training
text (plus the EOS ids); tokens outside it are never proposed.
"""

from __future__ import annotations

import math
import os
import random
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from formcast.engine.speculative.medusa_heads import MedusaHeads
from formcast.errors import EngineConfigError
from formcast.training.medusa_corpus import (
    GeneratedText,
    HiddenCorpus,
    HiddenRecorder,
    generate_text,
    recorded_corpus,
    teacher_force_states,
)
from formcast.training.medusa_prompts import heldout_prompts, training_prompts

# -- training ------------------------------------------------------------------------------


def choose_token_subset(
    data: GeneratedText, size: int, vocab_size: int, always: tuple[int, ...] = ()
) -> torch.Tensor:
    """The ``size`` most frequent answer tokens plus ``always``, sorted ``(Vs,)`` int64.

    When the answers hold fewer than ``size`` distinct tokens, the rest is filled with the
    lowest unused ids: in byte-level BPE a lower id is an earlier merge, i.e. a token that
    was more frequent in the tokenizer's training text.
    """
    counts = Counter(t for out in data.output_ids for t in out)
    chosen = {t for t in always if 0 <= t < vocab_size}
    for token, _ in counts.most_common():
        if len(chosen) >= size:
            break
        if 0 <= token < vocab_size:
            chosen.add(token)
    for token in range(vocab_size):
        if len(chosen) >= size:
            break
        chosen.add(token)
    return torch.tensor(sorted(chosen), dtype=torch.long)


def head_targets(
    heads: MedusaHeads, corpus: HiddenCorpus, rows: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """For rows ``(B,)``: target rows ``(K, B)``, validity ``(K, B)`` and token ids ``(K, B)``."""
    offsets = torch.arange(1, heads.num_heads + 1)[:, None]  # head i: row j + i + 1
    target_rows = rows[None] + offsets
    is_valid = target_rows <= corpus.last_row[rows][None]
    target_rows = torch.where(is_valid, target_rows, rows[None])
    return target_rows, is_valid, corpus.next_ids[target_rows]


def heads_loss(
    heads: MedusaHeads,
    corpus: HiddenCorpus,
    rows: torch.Tensor,
    *,
    loss: str = "soft",
    head_decay: float = 0.8,
) -> tuple[torch.Tensor, list[float]]:
    """Weighted loss over heads for a batch of rows; also each head's loss value.

    ``"soft"``: cross-entropy against the target's own distribution over the subset at the
    target row, ``softmax(E_s h_{j+i+1})`` (= KL up to the teacher's entropy). ``"hard"``:
    cross-entropy against the generated token (rows whose token is outside the subset are
    skipped).
    """
    target_rows, is_valid, target_ids = head_targets(heads, corpus, rows)
    logits = heads.subset_logits(corpus.hidden[rows])  # (K, B, Vs)
    logp = F.log_softmax(logits, dim=-1)
    if loss == "soft":
        with torch.no_grad():
            flat = corpus.hidden[target_rows.reshape(-1)]  # (K*B, H)
            teacher = F.softmax((flat @ heads.subset_weight.T).float(), dim=-1)
            teacher = teacher.reshape(logits.shape)
        per_row = -(teacher * logp).sum(-1)  # (K, B)
    elif loss == "hard":
        position = torch.searchsorted(heads.token_ids, target_ids.clamp(max=heads.vocab_size - 1))
        position = position.clamp(max=heads.num_subset_tokens - 1)
        in_subset = heads.token_ids[position] == target_ids
        is_valid = is_valid & in_subset
        per_row = -logp.gather(-1, position[..., None])[..., 0]
    else:
        raise EngineConfigError(f"Medusa training loss={loss!r}: use 'soft' or 'hard'")
    mask = is_valid.float()
    per_head = (per_row * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)  # (K,)
    weights = head_decay ** torch.arange(heads.num_heads, dtype=per_head.dtype)
    return (weights * per_head).sum(), [float(v) for v in per_head.detach()]


def train_heads(
    heads: MedusaHeads,
    corpus: HiddenCorpus,
    *,
    num_steps: int | None = None,
    deadline: float | None = None,
    batch_size: int = 512,
    lr: float = 1e-3,
    loss: str = "soft",
    seed: int = 0,
    log: Callable[[str], None] = print,
    log_every: int = 50,
) -> list[float]:
    """Train the heads' residual blocks; return the loss of every step.

    The schedule is linear warmup (5%) then cosine decay to 0 over ``num_steps``; with
    ``deadline`` instead, ``num_steps`` is fixed after timing 5 steps so the run ends near it.
    """
    if num_steps is None and deadline is None:
        raise EngineConfigError("train_heads needs num_steps or a deadline")
    generator = torch.Generator().manual_seed(seed)
    can_train = torch.nonzero(corpus.last_row > torch.arange(corpus.num_rows))[:, 0]
    if can_train.numel() == 0:
        raise EngineConfigError("Medusa training corpus has no row with a target")
    optimizer = torch.optim.AdamW([heads.weight, heads.bias], lr=lr, weight_decay=0.0)
    heads.train()
    losses: list[float] = []
    started = time.monotonic()
    total = num_steps if num_steps is not None else 10**9
    step = 0
    while step < total:
        if num_steps is None and step == 5:
            per_step = (time.monotonic() - started) / 5
            total = max(10, int((deadline - started) / per_step))
            log(f"  {per_step * 1e3:.0f} ms/step -> {total} steps")
        warmup = max(1, total // 20)
        scale = (
            (step + 1) / warmup
            if step < warmup
            else 0.5 * (1 + math.cos(math.pi * (step - warmup) / max(1, total - warmup)))
        )
        for group in optimizer.param_groups:
            group["lr"] = lr * scale
        pick = torch.randint(can_train.numel(), (batch_size,), generator=generator)
        value, per_head = heads_loss(heads, corpus, can_train[pick], loss=loss)
        optimizer.zero_grad(set_to_none=True)
        value.backward()
        optimizer.step()
        losses.append(float(value.detach()))
        step += 1
        if log_every and (step % log_every == 0 or step == total):
            heads_text = " ".join(f"{v:.3f}" for v in per_head)
            log(
                f"  step {step}/{total} loss {value:.4f} (per head {heads_text}) "
                f"{time.monotonic() - started:.0f}s"
            )
    heads.eval()
    return losses


@torch.no_grad()
def evaluate_heads(
    heads: MedusaHeads, corpus: HiddenCorpus, top_ks: tuple[int, ...] = (1, 5)
) -> dict[str, list[float]]:
    """Per-head top-k accuracy against the corpus' tokens (``"top1": [head0, head1, ...]``)."""
    rows = torch.nonzero(corpus.last_row > torch.arange(corpus.num_rows))[:, 0]
    hits = {k: torch.zeros(heads.num_heads) for k in top_ks}
    counts = torch.zeros(heads.num_heads)
    for first in range(0, rows.numel(), 2048):
        chunk = rows[first : first + 2048]
        _, is_valid, target_ids = head_targets(heads, corpus, chunk)
        best = heads.top_candidates(corpus.hidden[chunk], max(top_ks))  # (K, B, k)
        for k in top_ks:
            hit = (best[..., :k] == target_ids[..., None]).any(-1) & is_valid
            hits[k] += hit.sum(-1)
        counts += is_valid.sum(-1)
    return {f"top{k}": (hits[k] / counts.clamp(min=1)).tolist() for k in top_ks}


# -- the command ---------------------------------------------------------------------------


def _lm_head_weight(hf_model: Any) -> torch.Tensor:
    return hf_model.get_output_embeddings().weight.detach().float()


def _eos_ids(eos: int | list[int] | None) -> tuple[int, ...]:
    if eos is None:
        return ()
    return (int(eos),) if isinstance(eos, int) else tuple(int(e) for e in eos)


def train_medusa(
    model: str = "smollm2-135m",
    out: str | os.PathLike[str] | None = None,
    *,
    num_heads: int = 3,
    minutes: float = 20.0,
    seed: int = 0,
    num_subset_tokens: int = 8192,
    max_tokens: int = 256,
    loss: str = "soft",
    cache: str | os.PathLike[str] | None = None,
    log: Callable[[str], None] | None = None,
) -> tuple[MedusaHeads, dict[str, Any]]:
    """Generate, teacher-force, train and evaluate Medusa heads; save them to ``out``.

    Time budget ``minutes``: about 45% generation (hidden states recorded on the way), then
    training until ~92% of the budget, then evaluation. ``cache``: a file to save / reuse the
    generated text (and held-out text).

    Returns
    -------
    (MedusaHeads, dict)
        The trained heads and the summary (accuracies, sizes, timings) also saved with them.
    """
    if log is None:

        def log(text: str) -> None:
            print(text, file=sys.stderr, flush=True)

    if minutes <= 0 or num_heads < 1:
        raise EngineConfigError(f"train_medusa: minutes={minutes} and num_heads={num_heads}")
    from formcast.engine.llm_engine import LLM
    from formcast.engine.models.config import ModelConfig
    from formcast.engine.models.loader import load_hf_model, resolve_model_path

    started = time.monotonic()
    budget = minutes * 60.0
    torch.manual_seed(seed)
    cache_path = Path(cache) if cache else None
    if cache_path is not None and cache_path.is_file():
        saved = torch.load(cache_path)
        train_text, held_text = GeneratedText(**saved["train"]), GeneratedText(**saved["held"])
        log(f"reusing generated text from {cache_path}: {train_text.num_output_tokens} tokens")
        hf = load_hf_model(model)
        lm_head = _lm_head_weight(hf)
        eos_ids = _eos_ids(hf.config.eos_token_id)
        if train_text.hidden is None or held_text.hidden is None:
            log("  teacher forcing (final-norm hidden states)")
            for text in (train_text, held_text):
                if text.hidden is None:
                    text.hidden = teacher_force_states(hf, text, log=log)
        del hf
    else:
        log(f"[1/3] generating text with {model} (budget {0.45 * budget / 60:.1f} min)")
        limit = ModelConfig.from_folder(resolve_model_path(model)).max_position_embeddings
        llm = LLM(model, max_num_seqs=32, max_model_len=min(1024, limit))
        recorder = HiddenRecorder(llm)
        held_text = generate_text(
            llm,
            heldout_prompts(),
            max_tokens=max_tokens,
            seed=seed + 1,
            temperatures=(0.0,),
            log=log,
            recorder=recorder,
        )
        prompts = training_prompts()
        random.Random(seed).shuffle(prompts)
        train_text = generate_text(
            llm,
            prompts,
            max_tokens=max_tokens,
            seed=seed,
            deadline=started + 0.45 * budget,
            log=log,
            recorder=recorder,
        )
        net = llm.runner.model
        lm_head = net.model.embed_tokens.weight if net.lm_head is None else net.lm_head.weight
        lm_head = lm_head.detach().float().clone()
        eos_ids = tuple(llm.eos_token_ids)
        del llm, recorder, net
        if cache_path is not None:
            cache_path.parent.mkdir(parents=True, exist_ok=True)
            torch.save({"train": vars(train_text), "held": vars(held_text)}, cache_path)
    train_corpus, held_corpus = recorded_corpus(train_text), recorded_corpus(held_text)
    generated_at = time.monotonic()

    token_ids = choose_token_subset(train_text, num_subset_tokens, lm_head.shape[0], eos_ids)
    heads = MedusaHeads(lm_head.shape[1], num_heads, lm_head, token_ids)
    coverage = float(torch.isin(held_corpus.next_ids, token_ids).float().mean())
    baseline = evaluate_heads(heads, held_corpus)
    log(f"  subset {token_ids.numel()} tokens covers {coverage:.1%} of held-out tokens")
    log(f"  untrained heads (base LM head) held-out: {_fmt(baseline)}")
    forced_at = time.monotonic()

    log(f"[2/3] training {num_heads} heads ({loss} labels) on {train_corpus.num_rows} rows")
    losses = train_heads(
        heads, train_corpus, deadline=started + 0.92 * budget, loss=loss, seed=seed, log=log
    )
    trained_at = time.monotonic()

    log("[3/3] held-out evaluation")
    accuracy = evaluate_heads(heads, held_corpus)
    log(f"  trained heads held-out: {_fmt(accuracy)}")
    summary = {
        "base_model": str(model),
        "num_heads": num_heads,
        "loss": loss,
        "seed": seed,
        "num_train_sequences": len(train_text.output_ids),
        "num_train_tokens": train_corpus.num_rows,
        "num_heldout_sequences": len(held_text.output_ids),
        "num_heldout_tokens": held_corpus.num_rows,
        "num_subset_tokens": int(token_ids.numel()),
        "heldout_subset_coverage": round(coverage, 4),
        "num_steps": len(losses),
        "final_loss": round(losses[-1], 4),
        "heldout_accuracy": _rounded(accuracy),
        "heldout_untrained_accuracy": _rounded(baseline),
        "seconds": {
            "generate": round(generated_at - started, 1),
            "prepare": round(forced_at - generated_at, 1),
            "train": round(trained_at - forced_at, 1),
            "total": round(time.monotonic() - started, 1),
        },
    }
    heads.metadata = summary
    if out is not None:
        heads.save(out, base_model=str(model))
        log(f"saved {out} ({Path(out).stat().st_size / 1e6:.2f} MB)")
    log(f"done in {(time.monotonic() - started) / 60:.1f} min")
    return heads, summary


def _rounded(accuracy: dict[str, list[float]]) -> dict[str, list[float]]:
    return {k: [round(v, 4) for v in vs] for k, vs in accuracy.items()}


def _fmt(accuracy: dict[str, list[float]]) -> str:
    return "  ".join(f"{k} " + "/".join(f"{v:.1%}" for v in vs) for k, vs in accuracy.items())
