"""Integrations with other engines. The vLLM tests need vLLM, which lives in its own virtual
environment (``make vllm``): the main suite skips collecting them, ``make test`` runs them
there."""

import importlib.util

collect_ignore = [] if importlib.util.find_spec("vllm") else ["in_vllm"]
