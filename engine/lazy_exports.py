"""lazy_exports: a package's names resolved on first use (PEP 562 module ``__getattr__``).

The engine's packages export their nouns this way so that importing a light module (the model
loader, the attention metadata) never loads a heavy one (the engine loop, triton kernels).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable


def lazy_exports(
    package: str, exports: dict[str, str]
) -> tuple[list[str], Callable[[str], object]]:
    """``(__all__, __getattr__)`` for ``package``: name -> the module that defines it.

    Examples
    --------
    >>> __all__, __getattr__ = lazy_exports(__name__, {"LLM": "formcast.engine.llm_engine"})
    """

    def __getattr__(name: str) -> object:
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(exports[name]), name)

    return sorted(exports), __getattr__
