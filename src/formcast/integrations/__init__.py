"""formcast grammars inside other engines: transformers (`formcast.integrations.transformers`)
and vLLM (`formcast.integrations.vllm`). Each submodule imports its engine; this package
imports neither, so import the submodule you use."""
