"""ServingContext: what every endpoint needs (engine, served model name, token texts)."""

from __future__ import annotations

from dataclasses import dataclass

from formcast.grammar import Grammar
from formcast.grammar.spec import GrammarSpec
from formcast.server.async_engine import AsyncEngine
from formcast.server.errors import api_error_from, model_not_found
from formcast.server.responses import TokenTexts


@dataclass
class ServingContext:
    """The engine behind the endpoints and the name clients use for its model."""

    engine: AsyncEngine
    model_name: str
    token_texts: TokenTexts

    @classmethod
    def of(cls, engine: AsyncEngine, model_name: str) -> ServingContext:
        """A context for ``engine`` served as ``model_name``."""
        return cls(engine, model_name, TokenTexts(engine.vocab, engine.llm.tokenizer))

    def check_model(self, name: str) -> None:
        """Raise the 404 for a model name this server does not serve."""
        if name != self.model_name:
            raise model_not_found(name)

    async def compile(self, spec: GrammarSpec | None, param: str | None) -> Grammar | None:
        """The compiled grammar of ``spec`` (None for None); compile errors become 400s."""
        if spec is None:
            return None
        try:
            return await self.engine.compile_grammar(spec)
        except Exception as exc:
            raise api_error_from(exc, param) from exc
