"""ServingContext: what every endpoint needs (engine, served model name, token texts, the
model's reasoning tags and tool-call format)."""

from __future__ import annotations

from dataclasses import dataclass

from formcast.grammar import Grammar
from formcast.grammar.reasoning import ReasoningConfig
from formcast.grammar.spec import GrammarSpec
from formcast.server.async_engine import AsyncEngine
from formcast.server.errors import api_error_from, model_not_found
from formcast.server.reasoning import server_reasoning
from formcast.server.responses import TokenTexts
from formcast.server.tool_formats import FORMATS, ToolFormat, detect_format


@dataclass
class ServingContext:
    """The engine behind the endpoints, the name clients use for its model, and its reasoning
    tags (None: the model does not think)."""

    engine: AsyncEngine
    model_name: str
    token_texts: TokenTexts
    reasoning: ReasoningConfig | None = None
    tool_format: ToolFormat = FORMATS["hermes"]

    @classmethod
    def of(
        cls,
        engine: AsyncEngine,
        model_name: str,
        reasoning_tags: str | None = "auto",
        tool_call_format: str = "auto",
    ) -> ServingContext:
        """A context for ``engine`` served as ``model_name``; ``reasoning_tags`` as
        :func:`~formcast.server.reasoning.server_reasoning` reads them, ``tool_call_format``
        one of `FORMATS` or ``"auto"`` (from the chat template).

        Raises
        ------
        ValueError
            An unknown tool-call format.
        """
        tokenizer = engine.llm.tokenizer
        template = getattr(tokenizer, "chat_template", None)
        template = template if isinstance(template, str) else None
        reasoning = server_reasoning(reasoning_tags, template)
        if tool_call_format == "auto":
            tool_format = detect_format(template)
        elif tool_call_format in FORMATS:
            tool_format = FORMATS[tool_call_format]
        else:
            raise ValueError(
                f"unknown tool-call format {tool_call_format!r}; expected 'auto' or one of "
                f"{sorted(FORMATS)}"
            )
        return cls(engine, model_name, TokenTexts(engine.vocab, tokenizer), reasoning, tool_format)

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
