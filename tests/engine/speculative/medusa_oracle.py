"""Test helper: Medusa candidates from known continuations, with the true token at varying
ranks (or missing), so tree verification accepts paths of every length and rejects siblings."""

from __future__ import annotations


class OracleCandidates:
    """Replaces ``TreeSpeculator._candidates`` of ``llm``.

    For a sequence whose heads read position ``t``, head ``h`` proposes the reference token
    at ``t + 2 + h`` at rank ``(t + h + salt) % (top_k + 1)`` (rank ``top_k``: missing), and
    wrong tokens at the other ranks. ``references`` are full token lists (prompt + output).
    """

    def __init__(self, llm, vocab_size: int, salt: int = 0) -> None:
        self.speculator = llm.speculator
        self.vocab_size = vocab_size
        self.salt = salt
        self.references: list[list[int]] = []
        self.num_calls = 0
        llm.speculator._candidates = self

    def __call__(self, seqs):
        spec = self.speculator
        top_k = spec.topology.max_rank
        out = []
        for seq in seqs:
            position = spec._hidden[seq.seq_id][1]
            full = next((r for r in self.references if r[: seq.num_tokens] == seq.token_ids), None)
            heads = []
            for h in range(spec.heads.num_heads):
                index = position + 2 + h
                true = full[index] if full is not None and index < len(full) else None
                base = 0 if true is None else true
                wrong = [(base + 7 + 13 * j) % self.vocab_size for j in range(top_k)]
                if true is not None:
                    rank = (position + h + self.salt) % (top_k + 1)
                    if rank < top_k:
                        wrong[rank] = true
                heads.append(wrong)
            out.append(heads)
        self.num_calls += 1
        return out
