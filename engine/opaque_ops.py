"""opaque_op: a Python function as a torch operator that compiled graphs call, not trace.

``torch.compile`` (inductor) sees such an operator as one node with a known output shape (the
``fake`` function) and calls it at run time through the dispatcher. The operator is defined
with ``torch.library.Library`` and one ``CompositeExplicitAutograd`` kernel, not with
``torch.library.custom_op``: the latter wraps every call in Python layers (dynamo disabling,
aliasing checks) that cost about 10 us a call against 3-6 us here, and a decode step calls
these operators about 150 times (every matmul and every layer's attention; RESULTS.md, stop
37). Inference only: no autograd formula is registered.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

_LIBRARIES: list[torch.library.Library] = []  # kept alive: a dropped Library unregisters


def opaque_op(
    qualname: str, schema: str, fake: Callable[..., torch.Tensor]
) -> Callable[[Callable[..., torch.Tensor]], Any]:
    """Decorator: register the function as operator ``qualname`` and return the operator.

    Parameters
    ----------
    qualname : str
        ``"namespace::name"``.
    schema : str
        The argument and return part of the schema, e.g. ``"(Tensor x) -> Tensor"``. Inputs
        are not mutated and the output aliases no input (the function must return a new
        tensor).
    fake : callable
        Same arguments; returns an empty tensor of the output's shape, dtype and device.
    """
    namespace, name = qualname.split("::")

    def register(function: Callable[..., torch.Tensor]) -> Any:
        library = torch.library.Library(namespace, "FRAGMENT")
        library.define(name + schema)
        library.impl(name, function, "CompositeExplicitAutograd")
        torch.library.register_fake(qualname, fake, lib=library)
        _LIBRARIES.append(library)
        return getattr(getattr(torch.ops, namespace), name)

    return register
