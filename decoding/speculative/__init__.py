"""Speculative decoding: proposers (n-gram, draft model, Medusa) and the lossless verifier."""
