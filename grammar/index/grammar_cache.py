"""GrammarCache: compiled grammars kept in memory (LRU) and on disk, keyed by content.

Key = sha256(kind, grammar text, options, vocabulary hash). On disk a grammar is one grammar
file (:mod:`~formcast.grammar.index.grammar_file`: data only, never executable, unlike the
pickles of earlier versions, whose ``*.pkl`` files are never opened) named ``<key>.fcg`` under
``$FORMCAST_CACHE/grammars`` (default ``~/.cache/formcast/grammars``), written atomically (temp
file + rename) without the vocabulary, which is re-attached on load. A corrupt, truncated,
foreign or stale file is a miss: a warning is logged and the grammar is recompiled and written
again. ``load_payload`` / ``store_payload`` are the disk layer alone; context-free grammars
(``cfg_compiled``) use it with their own payloads (keys prefixed ``cfg-`` before hashing, so
they never collide with regex entries).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from formcast.grammar import caches
from formcast.grammar.index import grammar_file
from formcast.grammar.index.compiled_grammar import CompiledGrammar
from formcast.grammar.index.token_index import TokenIndex
from formcast.grammar.index.vocabulary import Vocabulary

logger = logging.getLogger(__name__)

# 2: distinct index rows; 3: SplitGroup.records_key; 4: ByteDFA.walk_keys; 5: grammar files;
# 6: syntax-tree nodes hold has_lookahead / has_reference; 7: equality keys as canonical JSON
# (values.equality_key: a stored table of item keys must match the runtime's); 8: LRTable
# kernel steps and suffix FIRST sets (cfg.lr: expected sets from kernel items)
_FORMAT_VERSION = 8
_SUFFIX = ".fcg"  # grammar files; the pickles of format versions <= 4 were "*.pkl"
_MAX_IN_MEMORY = 128


def cache_key(kind: str, text: str, options: dict[str, Any], vocab: Vocabulary) -> str:
    """sha256 over everything the compiled grammar depends on."""
    digest = hashlib.sha256()
    payload = json.dumps([_FORMAT_VERSION, kind, text, options], sort_keys=True, default=str)
    digest.update(payload.encode("utf-8"))
    digest.update(vocab.hash.encode("ascii"))
    return digest.hexdigest()


def default_cache_dir() -> Path:
    """``$FORMCAST_CACHE/grammars``, or ``~/.cache/formcast/grammars``."""
    root = os.environ.get("FORMCAST_CACHE") or os.path.join(Path.home(), ".cache", "formcast")
    return Path(root) / "grammars"


class GrammarCache:
    """In-memory LRU plus on-disk grammar files of compiled grammars."""

    def __init__(self, max_in_memory: int = _MAX_IN_MEMORY) -> None:
        self.max_in_memory = max_in_memory
        self._memory: OrderedDict[str, CompiledGrammar] = OrderedDict()
        self._lock = threading.Lock()

    def get_or_compile(
        self, key: str, vocab: Vocabulary, compile_fn: Callable[[], CompiledGrammar]
    ) -> CompiledGrammar:
        """The cached grammar for ``key``, or ``compile_fn()`` stored under it."""
        with self._lock:
            found = self._memory.get(key)
            if found is not None:
                self._memory.move_to_end(key)
                return found
        grammar = self._load(key, vocab)
        if grammar is None:
            grammar = compile_fn()
            self._store(key, grammar)
        with self._lock:
            self._memory[key] = grammar
            while len(self._memory) > self.max_in_memory:
                self._memory.popitem(last=False)
        return grammar

    def clear_memory(self) -> None:
        """Forget the in-memory entries (disk entries stay)."""
        with self._lock:
            self._memory.clear()

    def _load(self, key: str, vocab: Vocabulary) -> CompiledGrammar | None:
        payload = load_payload(key)
        if payload is None:
            return None
        if payload.get("version") != _FORMAT_VERSION:
            logger.warning(
                "ignoring grammar cache entry %s of format version %r (expected %d)",
                key,
                payload.get("version"),
                _FORMAT_VERSION,
            )
            return None
        try:
            dfa = payload["dfa"]
            index = TokenIndex.from_state(dfa, vocab, payload["index"])
            return CompiledGrammar(payload["kind"], payload["source"], dfa, vocab, index)
        except Exception as exc:  # noqa: BLE001 - a bad cache file is a miss, not a failure
            logger.warning("ignoring unreadable grammar cache entry %s: %s", key, exc)
            return None

    def _store(self, key: str, grammar: CompiledGrammar) -> None:
        payload = {
            "version": _FORMAT_VERSION,
            "kind": grammar.kind,
            "source": grammar.source,
            "dfa": grammar.dfa,
            "index": grammar.index.export_state(),
        }
        store_payload(key, payload)


def _payload_path(key: str) -> Path:
    return default_cache_dir() / f"{key}{_SUFFIX}"


def load_payload(key: str) -> dict | None:
    """The dict stored under ``key`` on disk, or ``None`` (missing, or unreadable: logged).

    Shared by the regex cache above and the context-free grammar cache (``cfg_compiled``).
    The file is read as a grammar file, which holds data only, so a file planted in the cache
    folder can at worst be a miss.
    """
    path = _payload_path(key)
    try:
        payload = grammar_file.load(path)
    except FileNotFoundError:
        return None
    except Exception as exc:  # noqa: BLE001 - a bad cache file is a miss, not a failure
        logger.warning("ignoring unreadable grammar cache file %s: %s", path, exc)
        return None
    if not isinstance(payload, dict):
        logger.warning(
            "ignoring grammar cache file %s: it holds a %s, not a dict",
            path,
            type(payload).__name__,
        )
        return None
    return payload


def store_payload(key: str, payload: dict) -> None:
    """Write ``payload`` under ``key`` atomically (temp file + rename); disk errors only warn.

    Raises
    ------
    grammar_file.UnsupportedValueError
        ``payload`` holds something a grammar file cannot store (an object of a class outside
        ``grammar_file.ALLOWED_CLASSES``): a bug in the caller, not a disk problem.
    """
    chunks = grammar_file.encode(payload)
    directory = default_cache_dir()
    tmp_name: str | None = None
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=directory, delete=False, suffix=".tmp") as tmp:
            tmp_name = tmp.name
            for chunk in chunks:
                tmp.write(chunk)
        os.replace(tmp_name, _payload_path(key))
    except OSError as exc:
        logger.warning("could not write grammar cache in %s: %s", directory, exc)
        if tmp_name is not None:
            with contextlib.suppress(OSError):
                os.remove(tmp_name)


GRAMMAR_CACHE = GrammarCache()
caches.register(
    "index.compiled_grammars",
    f"LRU: {_MAX_IN_MEMORY} grammars (disk entries stay)",
    GRAMMAR_CACHE.clear_memory,
)
