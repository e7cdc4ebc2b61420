"""Built-in prompts for Medusa self-distillation: training and held-out sets.

`training_prompts` (~800: topics x task templates, code and arithmetic tasks) feed the
generation step of `formcast.training.medusa.train_medusa`; `heldout_prompts` uses
other topics, templates, tasks and numbers: it is the held-out set of the accuracy report and
the "open-ended text" of the benchmarks.
"""

from __future__ import annotations

import random

_TRAIN_TOPICS = [
    "photosynthesis",
    "the water cycle",
    "black holes",
    "volcanoes",
    "the Roman Empire",
    "machine learning",
    "climate change",
    "the human heart",
    "honey bees",
    "the stock market",
    "electric cars",
    "the French Revolution",
    "vaccines",
    "the Moon landing",
    "recycling",
    "coffee",
    "chess",
    "the Internet",
    "earthquakes",
    "renewable energy",
    "dinosaurs",
    "the Great Wall of China",
    "sleep",
    "meditation",
    "gardening",
    "the immune system",
    "blockchain",
    "the Olympic Games",
    "jazz music",
    "the printing press",
    "rainforests",
    "time management",
    "public speaking",
    "the solar system",
    "antibiotics",
    "democracy",
    "ocean tides",
    "volunteering",
    "healthy eating",
    "social media",
    "cloud computing",
    "the Renaissance",
    "penguins",
    "nuclear power",
    "friendship",
    "budgeting",
    "bicycles",
    "the periodic table",
    "ancient Egypt",
    "video games",
    "learning a new language",
    "artificial intelligence",
    "pollution",
    "the Amazon river",
    "yoga",
    "robots",
    "the theory of evolution",
    "baking bread",
    "remote work",
    "smartphones",
    "deserts",
]
_HELDOUT_TOPICS = [
    "glaciers",
    "the Silk Road",
    "octopuses",
    "solar panels",
    "the Industrial Revolution",
    "origami",
    "quantum computers",
    "coral reefs",
    "marathon running",
    "libraries",
    "the violin",
    "wind turbines",
]
_TEMPLATES = [
    "Explain {t} to a ten-year-old.",
    "Write a short story that involves {t}.",
    "What are the main advantages and disadvantages of {t}?",
    "Give me three practical tips related to {t}.",
    "Summarize the history of {t} in one paragraph.",
    "Write a short email to a friend about {t}.",
    "List five interesting facts about {t}.",
    "Write a haiku about {t}.",
    "Explain step by step how {t} works.",
    "What are common misconceptions about {t}?",
    "Write a persuasive paragraph about the importance of {t}.",
    'Describe {t} in a JSON object with the keys "name", "summary" and "facts".',
]
_HELDOUT_TEMPLATES = [
    "Tell me about {t}.",
    "Write a blog post introduction about {t}.",
]
_TRAIN_CODE_TASKS = [
    "reverses a string",
    "checks whether a number is prime",
    "computes the factorial of n",
    "returns the n-th Fibonacci number",
    "counts the vowels in a sentence",
    "merges two sorted lists",
    "finds the largest element of a list",
    "removes duplicates from a list",
    "converts Celsius to Fahrenheit",
    "checks whether a word is a palindrome",
    "sums the digits of an integer",
    "sorts a list of dictionaries by a key",
    "reads a text file and counts its lines",
    "computes the average of a list of numbers",
    "flattens a nested list",
    "returns the greatest common divisor of two numbers",
]
_HELDOUT_CODE_TASKS = [
    "capitalizes every word of a sentence",
    "computes the median of a list",
    "checks whether two strings are anagrams",
    "returns the binary representation of n",
]
_LANGUAGES = ["Python", "JavaScript"]


def _code_prompts(tasks: list[str]) -> list[str]:
    return [f"Write a {lang} function that {task}." for task in tasks for lang in _LANGUAGES]


def _math_prompts(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    forms = [
        "A shop sells pens at {a} dollars each. How much do {b} pens cost? Explain.",
        "A train travels {a} km in {b} hours. What is its average speed? Show your work.",
        "What is {a} multiplied by {b}? Explain the steps.",
        "Tom has {a} apples and gives away {b}. How many are left, and why?",
    ]
    return [
        rng.choice(forms).format(a=rng.randint(3, 99), b=rng.randint(2, 9)) for _ in range(count)
    ]


def training_prompts() -> list[str]:
    """The built-in training prompts (deterministic order; ~800 prompts)."""
    prompts = [tpl.format(t=topic) for topic in _TRAIN_TOPICS for tpl in _TEMPLATES]
    prompts += _code_prompts(_TRAIN_CODE_TASKS) + _math_prompts(seed=1, count=40)
    random.Random(0).shuffle(prompts)
    return prompts


def heldout_prompts() -> list[str]:
    """Held-out prompts (topics, templates, tasks and numbers unseen in training; 40 prompts).

    Used for the heads' accuracy report and as the "open-ended text" of the benchmarks.
    """
    topics = [
        tpl.format(t=topic)
        for i, topic in enumerate(_HELDOUT_TOPICS)
        for tpl in (_HELDOUT_TEMPLATES[i % 2], _TEMPLATES[i % len(_TEMPLATES)])
    ]
    prompts = topics + _code_prompts(_HELDOUT_CODE_TASKS)[::2] + _math_prompts(seed=7, count=12)
    held = [p for p in prompts if p not in set(training_prompts())]
    return held
