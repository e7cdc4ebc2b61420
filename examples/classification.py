"""Classification with ``formcast.choice``: the output is exactly one label, returned as an Enum.

Run: ``python examples/classification.py``
"""

from __future__ import annotations

import enum

import formcast

REVIEWS = [
    "Absolutely loved it, the best purchase I made this year!",
    "It broke after two days and support never answered.",
    "It does the job. Nothing special.",
]


class Sentiment(enum.Enum):
    POSITIVE = "positive"
    NEGATIVE = "negative"
    NEUTRAL = "neutral"


def main(model: formcast.Model | None = None) -> list[Sentiment]:
    model = model or formcast.load()
    classify = formcast.choice(model, Sentiment, temperature=0)
    prompts = [f"Is this review positive, negative or neutral?\nReview: {r}" for r in REVIEWS]
    labels = classify.batch(prompts)
    for review, label in zip(REVIEWS, labels, strict=True):
        print(f"{label.value:>8}  {review}")
    return labels


if __name__ == "__main__":
    main()
