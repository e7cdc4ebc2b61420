"""formcast.samplers: batched logits processing, sampling and lossless rejection sampling.

Leaf package: imports only formcast.errors, torch, numpy and triton (transformers only inside
`formcast.samplers.hf_adapter`, lazily).
"""

from formcast.samplers.batch import SamplingBatch, SparseLogitEdit, make_generator
from formcast.samplers.bitmask import apply_token_bitmask_inplace_torch, unpack_token_bitmask
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
    "apply_token_bitmask_inplace_torch",
    "make_generator",
    "rejection_probabilities",
    "rejection_sample",
    "unpack_token_bitmask",
]
