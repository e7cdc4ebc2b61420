"""Every process-wide memo of the grammar package, registered here with its bound.

Memos live beside the code that fills them (a stage never imports a later one to clear it);
each registers once at import with a name, the bound that keeps it from growing without limit,
and how to empty it. ``clear(*names)`` empties some, ``clear_all()`` every one (tests that need
cold paths, benchmarks that time first compiles, long-lived processes that want memory back).
``registered()`` lists them, so the set of caches and their bounds is readable in one place.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Memo:
    """One registered memo.

    Parameters
    ----------
    name : str
        Unique, dotted by the module that owns it (``"index.regex_to_dfa"``).
    bound : str
        What keeps it finite, in words (an LRU size, a byte budget, weak keys).
    clear : Callable[[], None]
        Empties it (thread-safe where the memo is shared between threads).
    """

    name: str
    bound: str
    clear: Callable[[], None]


_REGISTRY: dict[str, Memo] = {}
_LOCK = threading.Lock()


def register(name: str, bound: str, clear: Callable[[], None]) -> None:
    """Record a memo (re-registering a name replaces it: a reloaded module registers again)."""
    with _LOCK:
        _REGISTRY[name] = Memo(name, bound, clear)


def registered() -> list[Memo]:
    """Every registered memo, sorted by name."""
    with _LOCK:
        return sorted(_REGISTRY.values(), key=lambda memo: memo.name)


def clear(*names: str) -> None:
    """Empty the named memos.

    Raises
    ------
    KeyError
        A name that no module registered (names the unknown one and lists the known ones).
    """
    with _LOCK:
        unknown = [name for name in names if name not in _REGISTRY]
        if unknown:
            raise KeyError(f"no memo named {unknown[0]!r}; registered: {sorted(_REGISTRY)}")
        memos = [_REGISTRY[name] for name in names]
    for memo in memos:
        memo.clear()


def clear_all() -> None:
    """Empty every registered memo (the on-disk grammar cache is left alone)."""
    for memo in registered():
        memo.clear()


def held_bytes(root: object, shared: tuple[type, ...] = ()) -> int:
    """Bytes of the numpy arrays reachable from ``root``: what keeping it in a memo costs.

    Walks attributes (``__dict__`` and ``__slots__``), lists, tuples, sets and dict values,
    each object once; instances of ``shared`` (a vocabulary every grammar points to) are not
    entered, and an array they hold is not counted where ``root`` also holds it directly (a
    kernel's arguments gathered from the vocabulary's tables). Python objects other than
    arrays are not counted: in compiled grammars the arrays are the bulk, and an estimate that
    is cheap and stable is what eviction needs.
    """
    arrays, met = _reachable_arrays([root], shared)
    owned_by_shared, _ = _reachable_arrays(met, ())
    return sum(a.nbytes for key, a in arrays.items() if key not in owned_by_shared)


def _reachable_arrays(
    roots: list[object], shared: tuple[type, ...]
) -> tuple[dict[int, Any], list[object]]:
    """The numpy arrays that own their memory reachable from ``roots`` (by id; a view counts
    as its base), and the instances of ``shared`` met on the way (not entered)."""
    import types

    import numpy as np  # the registry above stays import-light

    opaque = (type, types.ModuleType, types.FunctionType, types.MethodType)
    atoms = {str, bytes, int, float, bool, type(None)}
    seen: set[int] = set()
    stack: list[object] = list(roots)
    arrays: dict[int, Any] = {}
    met: list[object] = []
    while stack:
        item = stack.pop()
        if id(item) in seen or isinstance(item, (str, bytes, int, float, bool, type(None))):
            continue
        seen.add(id(item))
        if isinstance(item, np.ndarray):
            if item.base is None:
                arrays[id(item)] = item
            else:  # views share their base
                stack.append(item.base)
            continue
        if shared and isinstance(item, shared):
            met.append(item)
            continue
        if isinstance(item, opaque) or callable(item) and not hasattr(item, "__dict__"):
            continue
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, (list, tuple, set, frozenset)):
            # a container of atoms only (a vocabulary's 49k token byte strings) holds no
            # array: the set of its element types, built in C, says so without the loop
            if len(item) < 64 or not set(map(type, item)) <= atoms:
                stack.extend(item)
        else:
            stack.extend(getattr(item, "__dict__", {}).values())
            for cls in type(item).__mro__:
                slots = getattr(cls, "__slots__", ())
                for name in (slots,) if isinstance(slots, str) else slots:
                    if hasattr(item, name):
                        stack.append(getattr(item, name))
    return arrays, met
