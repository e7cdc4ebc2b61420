"""``make demo`` prints right answers: the classification and extraction examples on the
embedded model, with plain-text prompts (``chat=False``) as the demo loads it, against the
labels and facts a reader of each text would give."""

from __future__ import annotations

import pytest
from example_loader import load_example

import formcast

# what each review of examples/classification.py says, by a human reading it
EXPECTED_SENTIMENT = [
    "POSITIVE",
    "NEGATIVE",
    "POSITIVE",
    "NEGATIVE",
    "POSITIVE",
    "NEGATIVE",
    "POSITIVE",
    "NEGATIVE",
]
# (name, age, job) stated by each text of examples/extraction.py
EXPECTED_PEOPLE = [
    ("Maria Garcia", 34, "nurse"),
    ("Tom Baker", 52, "engineer"),
    ("Aiko", 27, "designer"),
    ("Pierre Blanc", 61, "chef"),
]


@pytest.fixture(scope="module")
def plain(model):
    """The test session's engine with plain-text prompts, as ``formcast.load(chat=False)``."""
    return formcast.Model(model.llm, chat=False)


def test_classification_labels_every_review_right(plain):
    example = load_example("classification")
    assert len(example.REVIEWS) == len(EXPECTED_SENTIMENT)
    labels = example.main(plain)
    assert [label.name for label in labels] == EXPECTED_SENTIMENT


def test_extraction_gets_every_fact_right(plain):
    example = load_example("extraction")
    assert len(example.TEXTS) == len(EXPECTED_PEOPLE)
    people = example.main(plain)
    assert [(p.name, p.age, p.job.lower()) for p in people] == EXPECTED_PEOPLE
