"""Independent oracles and generators for context-free grammar tests.

- :class:`ByteEarleyOracle`: a textbook Earley recognizer at the *byte* level, written here
  independently of formcast's CFG runtime (no lexer, no head sets, no masks). Each terminal's
  byte DFA (from the regex compiler, tested separately against ``re``) becomes a right-linear
  sub-grammar, ``%ignore`` terminals become an ``IGN*`` nonterminal after every terminal and at
  the start. Completion runs to a fixed point in each set, so empty rules need no special rule.
  ``is_prefix(b)``: some sentence starts with ``b`` (the chart stays non-empty: the grammar is
  trimmed, so every live item can complete). ``is_sentence(b)``: the start item completes.
- :func:`random_sentence`: a random derivation of the prepared grammar (depth-bounded by
  minimal derivation heights), terminals sampled by random walks of their DFAs.
- :func:`compare_dfa_walks`: lexer walks of single-terminal parts read off the terminal's own
  DFA equal the generic walk over interned lexer states (the reference path).
- :func:`brute_force_mask`: the allowed token ids at a head set by reading every token's bytes
  through the runtime's byte stepping (``CfgRuntime.step``, the definition of the language,
  itself checked against ``ByteEarleyOracle``) — independent of the mask precomputation.
"""

from __future__ import annotations

import random

import numpy as np

from formcast.grammar.cfg.lexer import CfgLexer
from formcast.grammar.cfg.rules import PreparedGrammar


def _dfa_rules(dfa, prefix, add_rule):
    """Right-linear rules of a byte DFA; returns the nonterminal of its start state."""
    full = dfa.transitions[:, dfa.byte_to_class]  # (N, 256)
    for q in range(dfa.num_states):
        by_target: dict[int, set[int]] = {}
        for b in np.flatnonzero(full[q] >= 0).tolist():
            by_target.setdefault(int(full[q][b]), set()).add(b)
        for target, byte_set in by_target.items():
            add_rule((prefix, q), (frozenset(byte_set), (prefix, target)))
        if dfa.is_accepting[q]:
            add_rule((prefix, q), ())
    return (prefix, 0)


class ByteEarleyOracle:
    """Byte-level Earley recognizer of a prepared grammar's language (see module docstring)."""

    def __init__(self, prepared: PreparedGrammar) -> None:
        self.rules: dict = {}

        def add_rule(lhs, rhs) -> None:
            self.rules.setdefault(lhs, []).append(tuple(rhs))

        term_start = [
            _dfa_rules(dfa, ("T", t), add_rule) for t, dfa in enumerate(prepared.terminal_dfas)
        ]
        ign_starts = [_dfa_rules(d, ("I", k), add_rule) for k, d in enumerate(prepared.ignore_dfas)]
        add_rule("IGNS", ())
        for start in ign_starts:
            add_rule("IGNS", (start, "IGNS"))
        for lhs, rhs in prepared.rules[1:]:
            out = []
            for s in rhs:
                out += [term_start[s], "IGNS"] if s >= 0 else [("N", ~s)]
            add_rule(("N", lhs), tuple(out))
        add_rule("S0", ("IGNS", ("N", prepared.start)))

    def _closure(self, chart, k):
        items = chart[k]
        agenda = list(items)
        while agenda:
            lhs, rhs, dot, origin = agenda.pop()
            if dot < len(rhs) and not isinstance(rhs[dot], frozenset):
                sym = rhs[dot]
                for alt in self.rules[sym]:
                    new = (sym, alt, 0, k)
                    if new not in items:
                        items.add(new)
                        agenda.append(new)
                # a symbol already completed empty in this set
                for done in list(items):
                    if done[0] == sym and done[2] == len(done[1]) and done[3] == k:
                        new = (lhs, rhs, dot + 1, origin)
                        if new not in items:
                            items.add(new)
                            agenda.append(new)
            elif dot == len(rhs):
                for p_lhs, p_rhs, p_dot, p_origin in list(chart[origin]):
                    if p_dot < len(p_rhs) and p_rhs[p_dot] == lhs:
                        new = (p_lhs, p_rhs, p_dot + 1, p_origin)
                        if new not in items:
                            items.add(new)
                            agenda.append(new)

    def _chart(self, data: bytes):
        chart = [{("S0", alt, 0, 0) for alt in self.rules["S0"]}]
        self._closure(chart, 0)
        for k, byte in enumerate(data):
            nxt = set()
            for lhs, rhs, dot, origin in chart[k]:
                if dot < len(rhs) and isinstance(rhs[dot], frozenset) and byte in rhs[dot]:
                    nxt.add((lhs, rhs, dot + 1, origin))
            chart.append(nxt)
            if not nxt:
                return chart
            self._closure(chart, k + 1)
        return chart

    def is_prefix(self, data: bytes) -> bool:
        chart = self._chart(data)
        return len(chart) == len(data) + 1 and bool(chart[-1])

    def is_sentence(self, data: bytes) -> bool:
        chart = self._chart(data)
        if len(chart) != len(data) + 1:
            return False
        return any(i[0] == "S0" and i[2] == len(i[1]) and i[3] == 0 for i in chart[-1])


def _distance_to_accept(dfa) -> np.ndarray:
    full = dfa.transitions[:, dfa.byte_to_class]
    dist = np.where(dfa.is_accepting, 0, 10**9)
    for _ in range(dfa.num_states):
        nxt = np.where(full >= 0, dist[np.maximum(full, 0)] + 1, 10**9).min(axis=1)
        dist = np.minimum(dist, nxt)
    return dist


def sample_terminal(dfa, rng: random.Random, max_len: int = 8, ascii_only: bool = True) -> bytes:
    """A random string of the DFA's language (printable ASCII preferred)."""
    full = dfa.transitions[:, dfa.byte_to_class]
    dist = _distance_to_accept(dfa)
    state, out = 0, bytearray()
    while True:
        options = np.flatnonzero(full[state] >= 0).tolist()
        if dfa.is_accepting[state] and (not options or len(out) >= max_len or rng.random() < 0.35):
            return bytes(out)
        if len(out) >= max_len:  # steer to acceptance
            options = [b for b in options if dist[full[state][b]] < dist[state]]
        printable = [b for b in options if 0x20 <= b < 0x7F]
        if ascii_only and printable:
            options = printable
        elif ascii_only and any(b < 0x80 for b in options):
            options = [b for b in options if b < 0x80]
        byte = rng.choice(options)
        out.append(byte)
        state = int(full[state][byte])


def random_sentence(
    prepared: PreparedGrammar,
    rng: random.Random,
    max_depth: int = 8,
    ignore_text: str = " ",
    terminal_max_len: int = 6,
) -> bytes:
    """A random sentence of the grammar (bytes); ignored text is inserted at random."""
    rules, by_lhs = prepared.rules, prepared.rules_by_lhs
    height = [10**9] * len(prepared.nonterminal_names)
    changed = True
    while changed:
        changed = False
        for lhs, rhs in rules[1:]:
            h = 1 + max([0] + [height[~s] for s in rhs if s < 0])
            if h < height[lhs]:
                height[lhs], changed = h, True

    def rule_height(r):
        return 1 + max([0] + [height[~s] for s in rules[r][1] if s < 0])

    out = bytearray()

    def expand(n: int, depth: int) -> None:
        options = by_lhs[n]
        if depth >= max_depth:
            best = min(rule_height(r) for r in options)
            options = [r for r in options if rule_height(r) == best]
        for s in rules[rng.choice(options)][1]:
            if s < 0:
                expand(~s, depth + 1)
            else:
                if prepared.ignore_dfas and rng.random() < 0.3:
                    out.extend(ignore_text.encode())
                out.extend(sample_terminal(prepared.terminal_dfas[s], rng, terminal_max_len))

    expand(prepared.start, 0)
    return bytes(out)


def brute_force_mask(runtime, heads, vocab) -> set[int]:
    """Token ids allowed at ``heads``: every token read through ``runtime.step`` (prefix
    sharing via a sorted walk, so the whole vocabulary is checked in seconds)."""
    allowed: set[int] = set()
    order = sorted(
        (b, i) for i, b in enumerate(vocab.token_bytes) if b and i not in vocab.special_token_ids
    )
    cache: dict[bytes, frozenset] = {b"": heads}

    def heads_after(data: bytes):
        found = cache.get(data)
        if found is None:
            before = heads_after(data[:-1])
            found = runtime.step(before, data[-1]) if before else before
            cache[data] = found
        return found

    for data, token_id in order:
        if heads_after(data):
            allowed.add(token_id)
    if runtime.is_accepting(heads):
        allowed |= set(vocab.eos_token_ids)
    return allowed


def _records(walk) -> tuple[set[int], set[tuple[int, int, frozenset]]]:
    bits = np.unpackbits(walk.within_row.view(np.uint8), bitorder="little")
    records = set()
    for group in walk.splits:
        for row, step in zip(group.rows.tolist(), group.steps.tolist(), strict=True):
            records.add((row, step, group.accepts))
    return set(np.flatnonzero(bits).tolist()), records


def compare_dfa_walks(prepared, table, parts) -> int:
    """Walk each single-pair part ``(t, q)`` of ``parts`` on the terminal-DFA path
    (``cfg_dfa_walk``) and on the generic interned-lexer path (no chain jumps, no shared
    walks) and assert they agree: within rows equal, split records equal up to the follow
    filter, and the first split group's records read alike from every terminal's start.
    Returns how many parts had split records to compare."""
    generic = CfgLexer(prepared, table, use_dfa_walks=False)
    fast = CfgLexer(prepared, table)
    follow = fast._dfa_walker.follow
    with_splits = 0
    for t, q in parts:
        old_sid = generic._intern(frozenset(), {(t, q)}, False)
        old_within, old_records = _records(generic.token_walk(old_sid))
        new_sid = fast._intern(frozenset(), {(t, q)}, False)
        assert fast._single_pair(new_sid) == (t, q)
        new_within, new_records = _records(fast.token_walk(new_sid))
        assert new_within == old_within, (t, q)
        kept = {r for r in old_records if follow[t][table.matrix[r[0], r[1]]]}
        assert new_records == kept, (t, q)
        with_splits += bool(kept)
        # split groups' suffix walks from every terminal's start part, on both paths
        for group in fast.token_walk(new_sid).splits[:1]:
            for u in range(prepared.num_terminals):
                old_part = generic._intern(frozenset(), {(u, 0)}, False)
                args = (group.rows, group.first_byte_bounds, group.steps, group.records_key)
                old = _records(generic.walk_records(old_part, *args))
                new = _records(fast.walk_records(fast._intern(frozenset(), {(u, 0)}, False), *args))
                assert new[0] == old[0], (t, q, u)
                assert new[1] == {r for r in old[1] if follow[u][table.matrix[r[0], r[1]]]}
    return with_splits
