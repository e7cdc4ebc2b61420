"""Classification with ``formcast.choice``: the output is exactly one label, returned as an Enum.

``method="score"`` computes every label's exact log-probability after the prompt (one engine
batch; each review's prompt is computed once for all labels) and returns the most probable
label. On the embedded SmolLM2-135M-Instruct it labels these eight reviews right, where
constrained greedy sampling (``temperature=0``) calls all four negative ones positive: the
grammar lets it write a label in any tokens, and greedy takes a lone space first (more
probable than " positive" or " negative" as one token), then "positive". Scoring reads each
label in the tokens the tokenizer writes it in.

The 135M model labels best as a plain-text continuation (``Review: ...\nSentiment:``; load
it with ``chat=False``, no chat template). It could not tell neutral reviews apart in our
trials, so the labels are two.

Run: ``python examples/classification.py``
"""

from __future__ import annotations

import enum

import formcast

REVIEWS = [
    "Absolutely loved it, the best purchase I made this year!",
    "It broke after two days and support never answered.",
    "Not bad at all, it surprised me in a good way.",
    "Waste of money. I want a refund.",
    "Setup was easy and the picture is crisp and bright.",
    "The screen cracked within a week and the seller ignored my emails.",
    "My kids love it and it still looks new after a year.",
    "Instructions were missing and two screws were stripped.",
]


class Sentiment(enum.Enum):
    # each label as the model writes it after "Sentiment:", with its leading space
    POSITIVE = " positive"
    NEGATIVE = " negative"


def main(model: formcast.Model | None = None) -> list[Sentiment]:
    model = model or formcast.load(chat=False)
    classify = formcast.choice(model, Sentiment, method="score")
    prompts = [f"Review: {review}\nSentiment:" for review in REVIEWS]
    labels = classify.batch(prompts)
    for review, label in zip(REVIEWS, labels, strict=True):
        print(f"{label.name.lower():>8}  {review}")
    return labels


if __name__ == "__main__":
    main()
