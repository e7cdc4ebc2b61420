"""Sampling options given as keyword arguments -> one validated `SamplingParams`.

Typed calls take ``temperature=0, max_tokens=64, seed=1, ...`` at construction (defaults) and
at call time (overrides). Unknown names raise `UsageError` listing the valid ones; values are
validated by `SamplingParams` itself (`SamplingParamsError` names the field).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from formcast.errors import UsageError
from formcast.samplers import SamplingParams

SAMPLING_OPTIONS = frozenset(f.name for f in dataclasses.fields(SamplingParams))
# n > 1 has no single typed value to return; logprobs are not surfaced by typed calls
_REFUSED = {"n": "use .batch([prompt] * n) for several samples"}


def check_sampling_options(options: Mapping[str, Any], where: str) -> dict[str, Any]:
    """Return ``options`` as a dict after checking every name is a sampling option."""
    unknown = sorted(set(options) - SAMPLING_OPTIONS)
    if unknown:
        raise UsageError(
            f"{where}: unknown option(s) {unknown}; sampling options are "
            f"{sorted(SAMPLING_OPTIONS - set(_REFUSED))}"
        )
    for name, advice in _REFUSED.items():
        if name in options and options[name] != 1:
            raise UsageError(f"{where}: {name}={options[name]!r} is not supported; {advice}")
    return dict(options)


def make_sampling_params(
    defaults: Mapping[str, Any], overrides: Mapping[str, Any]
) -> SamplingParams:
    """`SamplingParams` from generator defaults updated with call-time overrides."""
    merged = {**defaults, **check_sampling_options(overrides, "sampling")}
    return SamplingParams(**merged)
