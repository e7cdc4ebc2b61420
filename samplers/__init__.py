"""formcast.samplers: batched logits processing, sampling and lossless rejection sampling.

Leaf package: imports only the ground floor (formcast.errors, formcast.bitmask), torch, numpy and triton (transformers only inside
`formcast.samplers.hf_adapter`, lazily).
"""

from formcast.samplers.batch import SamplingBatch, SparseLogitEdit, make_generator
from formcast.samplers.inputs import SamplerInputError
from formcast.samplers.params import SamplingParams
from formcast.samplers.rejection import rejection_probabilities, rejection_sample
from formcast.samplers.sampler import Sampler, SamplerOutput

__all__ = [
    "Sampler",
    "SamplerInputError",
    "SamplerOutput",
    "SamplingBatch",
    "SamplingParams",
    "SparseLogitEdit",
    "make_generator",
    "rejection_probabilities",
    "rejection_sample",
]
