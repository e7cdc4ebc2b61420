"""Decoding tests run the real SmolLM2 through transformers as the logits function."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(scope="session")
def smollm2_hf_model():
    from formcast.engine.models.loader import load_hf_model

    return load_hf_model("smollm2-135m")


@pytest.fixture(scope="session")
def hf_logits_fn(smollm2_hf_model):
    """``token_ids -> (V,)`` next-token logits from transformers' own forward pass.

    Keeps transformers' KV cache between calls: when ``token_ids`` extends the previous call's
    ids, only the new tokens are fed; otherwise the cache is rebuilt from scratch.
    """
    state = {"ids": [], "past": None}

    @torch.no_grad()
    def logits_fn(token_ids):
        token_ids = list(token_ids)
        cached = state["ids"]
        if (
            state["past"] is None
            or token_ids[: len(cached)] != cached
            or len(token_ids) == len(cached)
        ):
            state["ids"], state["past"], new_ids = [], None, token_ids
        else:
            new_ids = token_ids[len(cached) :]
        out = smollm2_hf_model(
            torch.tensor([new_ids]), past_key_values=state["past"], use_cache=True
        )
        state["ids"], state["past"] = token_ids, out.past_key_values
        return out.logits[0, -1]

    return logits_fn


@pytest.fixture(scope="session")
def chat_prompt_ids(smollm2_tokenizer):
    def build(text: str) -> list[int]:
        messages = [{"role": "user", "content": text}]
        out = smollm2_tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, return_dict=True
        )
        return list(out["input_ids"])

    return build
