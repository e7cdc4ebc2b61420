"""Load examples/<name>.py as a module: examples are scripts, not a package."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def load_example(name: str):
    """Import ``examples/<name>.py`` as a module (examples are scripts, not a package)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pydantic look their module up
    spec.loader.exec_module(module)
    return module
