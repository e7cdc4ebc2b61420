"""BackgroundIndexer: one daemon thread that builds queued token indexes ahead of use.

A compile indexes its automaton's states for at most as long as it took to build the automaton;
the masks of the states it did not reach (and of an index loaded from the disk cache before its
fill ended) are built here while the caller goes on, newest job first (the grammar compiled
last is the one a request is about to use; older ones have had their first visits indexed on
demand). The trie-walk and row-grouping
kernels release the GIL, so on a second core a fill costs the request thread only a few short
GIL hand-offs; a state whose mask is asked for before its fill ends is indexed on the spot by
the asking thread (the same rows: both walks are exact). Jobs are held by weak reference, so a
grammar dropped before its turn costs nothing. The thread starts when a job is queued and ends
when none is left (no idle thread stays behind), and starts again in a forked child that
inherited queued jobs (a child has no threads).
"""

from __future__ import annotations

import collections
import logging
import os
import threading
import time
import weakref
from typing import Protocol

logger = logging.getLogger(__name__)


class AheadJob(Protocol):
    """What the thread runs: an index that fills its remaining rows and marks itself done."""

    def fill_ahead(self) -> None:
        """Build every row not built yet (or stop at the index's own cap); never raises."""


class BackgroundIndexer:
    """A stack of weakly held :class:`AheadJob` s and the one thread that runs them."""

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self._lock = threading.Lock()
        self._jobs: collections.deque[weakref.ref[AheadJob]] = collections.deque()
        # invariant: _thread is not None exactly while jobs may be waiting for it; the thread
        # clears it (lock held) when it finds the stack empty, then returns
        self._thread: threading.Thread | None = None
        self._last_thread: threading.Thread | None = None

    def submit(self, job: AheadJob) -> None:
        """Queue ``job``; it runs before every job still waiting (last in, first out)."""
        with self._lock:
            self._jobs.append(weakref.ref(job))
            self._ensure_thread()

    def _ensure_thread(self) -> None:
        # called with the lock held
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._run, name="formcast-indexer", daemon=True)
            self._last_thread = self._thread
            self._thread.start()

    def _run(self) -> None:
        while True:
            with self._lock:
                if not self._jobs:
                    self._thread = None  # a later submit starts a new thread
                    return
                ref = self._jobs.pop()
            job = ref()
            if job is not None:
                job.fill_ahead()
            del job  # no strong reference kept while taking the next one

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until every queued job has run and the thread has ended; return whether it
        did within ``timeout`` seconds (``None``: no limit). Jobs queued meanwhile are waited
        for too."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._lock:
                thread = self._thread or self._last_thread
            if thread is None or thread is threading.current_thread():
                return True
            thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
            if thread.is_alive():
                return False
            with self._lock:
                if self._thread is None:
                    return True

    def _after_fork_in_child(self) -> None:
        refs = [ref for ref in self._jobs if ref() is not None]
        self._reset()
        if refs:
            with self._lock:
                self._jobs.extend(refs)
                self._ensure_thread()


BACKGROUND_INDEXER = BackgroundIndexer()
os.register_at_fork(after_in_child=BACKGROUND_INDEXER._after_fork_in_child)
