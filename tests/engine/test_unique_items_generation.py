"""``uniqueItems`` end to end on the real SmolLM2: greedy decoding that wants to repeat an item
is kept distinct by the matcher, and every finished output is valid for jsonschema."""

from __future__ import annotations

import json

import pytest

from formcast.engine.llm_engine import LLM
from formcast.samplers import SamplingParams
from tests.grammar.schema_oracle import validator

SCHEMA = {
    "type": "object",
    "properties": {
        "fruits": {
            "type": "array",
            "items": {"type": "string"},
            "minItems": 4,
            "maxItems": 4,
            "uniqueItems": True,
        },
        "counts": {
            "type": "array",
            "items": {"type": "integer"},
            "minItems": 3,
            "maxItems": 3,
            "uniqueItems": True,
        },
    },
    "required": ["fruits", "counts"],
    "additionalProperties": False,
}
PROMPTS = [
    'Repeat the word apple four times and the number 1 three times, as JSON: {"fruits": ["apple",',
    "Write apple, apple, apple, apple and 0, 0, 0 as JSON:",
]


@pytest.fixture(scope="module")
def llm(smol_folder):
    return LLM(smol_folder, max_num_seqs=4, max_model_len=256, num_kv_blocks=64)


@pytest.mark.parametrize("jump_forward", [True, False])
def test_greedy_outputs_keep_items_distinct(llm, jump_forward):
    params = SamplingParams(temperature=0, max_tokens=96)
    outputs = llm.generate(
        PROMPTS, params, grammar={"json_schema": SCHEMA}, jump_forward=jump_forward
    )
    oracle = validator(SCHEMA)
    num_finished = 0
    for output in outputs:
        choice = output.outputs[0]
        if choice.finish_reason != "stop":
            continue
        value = json.loads(choice.text)
        assert oracle.is_valid(value), choice.text
        num_finished += 1
    assert num_finished >= 1
