"""Request bodies of the OpenAI-compatible endpoints, as pydantic models.

Fields follow OpenAI's API reference; unknown fields are refused (OpenAI answers
"Unrecognized request argument supplied"), so nothing a client sends is silently ignored.
Fields that only describe the caller (``user``, ``metadata``, ``store``, ``service_tier``)
are accepted and have no effect on generation. Fields OpenAI defines that formcast cannot
honour (``audio``, non-text ``modalities``, ``prediction``, ``suffix``, ...) are accepted by
the schema and refused with a 400 by `check_unsupported`.

formcast extensions (send them with the client's ``extra_body``): ``top_k``, ``min_p``,
``typical_p``, ``repetition_penalty``, ``min_tokens``, ``ignore_eos``, ``stop_token_ids``,
``jump_forward``, ``skip_special_tokens`` (vLLM's: false shows special tokens' text),
``logprobs_mode`` (``"processed"``, the default: logprobs of the
distribution each token was drawn from; ``"raw"``: the model's own distribution, before the
grammar mask and the sampling parameters), the grammar fields ``regex``, ``choice`` and
``grammar`` (Lark text), and for chat ``max_reasoning_tokens`` and ``chat_template_kwargs``
(see :mod:`formcast.server.reasoning`).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from formcast.server.errors import bad_request


class StreamOptions(BaseModel):
    """``stream_options``: ``include_usage`` adds a last chunk with the usage."""

    model_config = ConfigDict(extra="forbid", strict=True)
    include_usage: bool = False


class SamplingFields(BaseModel):
    """Fields shared by chat and text completions (OpenAI names and extensions)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    model: str
    temperature: float | None = None
    top_p: float | None = None
    n: int | None = None
    stream: bool | None = False
    stream_options: StreamOptions | None = None
    stop: str | list[str] | None = None
    max_tokens: int | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    logit_bias: dict[str, float] | None = None
    seed: int | None = None
    user: str | None = None
    metadata: dict[str, Any] | None = None
    store: bool | None = None
    service_tier: str | None = None
    # formcast extensions
    top_k: int | None = None
    min_p: float | None = None
    typical_p: float | None = None
    repetition_penalty: float | None = None
    min_tokens: int | None = None
    ignore_eos: bool | None = None
    stop_token_ids: list[int] | None = None
    jump_forward: bool | None = None
    skip_special_tokens: bool | None = None
    logprobs_mode: Literal["processed", "raw"] | None = None
    regex: str | None = None
    choice: list[str] | None = None
    grammar: str | None = None


class ResponseFormat(BaseModel):
    """``response_format``: ``text``, ``json_object``, ``json_schema`` or (vLLM / XGrammar)
    ``structural_tag`` with its ``format`` (or the older ``structures`` + ``triggers``)."""

    model_config = ConfigDict(extra="forbid", strict=True)
    type: Literal["text", "json_object", "json_schema", "structural_tag"]
    json_schema: JsonSchemaFormat | None = None
    format: dict[str, Any] | None = None
    structures: list[dict[str, Any]] | None = None
    triggers: list[str] | None = None


class JsonSchemaFormat(BaseModel):
    """``response_format.json_schema``: ``{"name", "schema", "strict", "description"}``."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, strict=True)
    name: str
    description: str | None = None
    schema_: dict[str, Any] | None = Field(default=None, alias="schema")
    strict: bool | None = None


class FunctionDefinition(BaseModel):
    """``tools[i].function``."""

    model_config = ConfigDict(extra="forbid", strict=True)
    name: str = Field(pattern=r"^[a-zA-Z0-9_-]{1,64}$")
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class CustomGrammar(BaseModel):
    """``tools[i].custom.format.grammar``: ``{"syntax": "regex" | "lark", "definition"}``."""

    model_config = ConfigDict(extra="forbid", strict=True)
    syntax: Literal["regex", "lark"]
    definition: str


class CustomToolFormat(BaseModel):
    """``tools[i].custom.format``: free ``text`` or a ``grammar``."""

    model_config = ConfigDict(extra="forbid", strict=True)
    type: Literal["text", "grammar"]
    grammar: CustomGrammar | None = None


class CustomToolDefinition(BaseModel):
    """``tools[i].custom``: a tool whose input is one raw string (OpenAI custom tools)."""

    model_config = ConfigDict(extra="forbid", strict=True)
    name: str = Field(pattern=r"^[a-zA-Z0-9_-]{1,64}$")
    description: str | None = None
    format: CustomToolFormat | None = None


class ToolDefinition(BaseModel):
    """``tools[i]``: a ``function`` tool (JSON arguments) or a ``custom`` tool (a raw string
    input, free or in a grammar)."""

    model_config = ConfigDict(extra="forbid", strict=True)
    type: Literal["function", "custom"]
    function: FunctionDefinition | None = None
    custom: CustomToolDefinition | None = None

    @model_validator(mode="after")
    def _one_definition(self) -> ToolDefinition:
        if (self.function is None) == (self.custom is None) or (
            (self.function is None) != (self.type == "custom")
        ):
            raise ValueError(f"a tool of type {self.type!r} needs exactly its {self.type!r} field")
        return self

    @property
    def name(self) -> str:
        """The tool's name."""
        return self.function.name if self.function is not None else self.custom.name

    @property
    def description(self) -> str:
        """The tool's description ("" when none)."""
        definition = self.function if self.function is not None else self.custom
        return definition.description or ""


class NamedToolChoice(BaseModel):
    """``tool_choice`` naming a tool: ``{"type": "function", "function": {"name": ...}}`` or
    ``{"type": "custom", "custom": {"name": ...}}``."""

    model_config = ConfigDict(extra="forbid", strict=True)
    type: Literal["function", "custom"]
    function: dict[str, str] | None = None
    custom: dict[str, str] | None = None


class ChatCompletionRequest(SamplingFields):
    """Body of ``POST /v1/chat/completions``."""

    messages: list[dict[str, Any]]
    max_completion_tokens: int | None = None
    logprobs: bool | None = False
    top_logprobs: int | None = None
    response_format: ResponseFormat | None = None
    tools: list[ToolDefinition] | None = None
    tool_choice: Literal["none", "auto", "required"] | NamedToolChoice | None = None
    parallel_tool_calls: bool | None = None
    reasoning_effort: str | None = None
    # formcast / vLLM extensions: a thinking budget in tokens, options for the chat template
    max_reasoning_tokens: int | None = None
    chat_template_kwargs: dict[str, Any] | None = None
    # defined by OpenAI, refused here (check_unsupported)
    audio: dict[str, Any] | None = None
    modalities: list[str] | None = None
    prediction: dict[str, Any] | None = None
    functions: list[dict[str, Any]] | None = None
    function_call: str | dict[str, Any] | None = None
    web_search_options: dict[str, Any] | None = None


class CompletionRequest(SamplingFields):
    """Body of ``POST /v1/completions``."""

    prompt: str | list[str] | list[int] | list[list[int]]
    logprobs: int | None = None
    echo: bool | None = False
    best_of: int | None = None
    suffix: str | None = None
    response_format: ResponseFormat | None = None


ResponseFormat.model_rebuild()


def check_unsupported(request: SamplingFields) -> None:
    """Refuse (400) OpenAI fields set to values formcast cannot honour."""
    refused: list[tuple[str, bool]] = []
    if isinstance(request, ChatCompletionRequest):
        refused = [
            ("audio", request.audio is not None),
            ("modalities", request.modalities not in (None, ["text"])),
            ("prediction", request.prediction is not None),
            ("functions", request.functions is not None),
            ("function_call", request.function_call is not None),
            ("web_search_options", request.web_search_options is not None),
        ]
    elif isinstance(request, CompletionRequest):
        refused = [("suffix", request.suffix is not None)]
        if request.best_of is not None and request.best_of != (request.n or 1):
            raise bad_request(
                f"best_of={request.best_of} is not supported (only best_of equal to n)",
                param="best_of",
            )
    for name, is_set in refused:
        if is_set:
            hint = " (use tools / tool_choice)" if name.startswith("function") else ""
            raise bad_request(f"'{name}' is not supported by this server{hint}", param=name)
    if request.logit_bias is not None:
        for key, value in request.logit_bias.items():
            if not -100 <= value <= 100:
                raise bad_request(
                    f"logit_bias[{key!r}]={value} must be in [-100, 100]", param="logit_bias"
                )
    if isinstance(request.stop, list) and len(request.stop) > 4:
        raise bad_request("stop accepts at most 4 sequences", param="stop")
    grammar_fields = [
        name for name in ("regex", "choice", "grammar") if getattr(request, name) is not None
    ]
    has_format = request.response_format is not None and request.response_format.type != "text"
    if len(grammar_fields) + has_format > 1:
        raise bad_request(
            f"set at most one of response_format, regex, choice, grammar (got "
            f"{grammar_fields + (['response_format'] if has_format else [])})",
            param=grammar_fields[0],
        )
    fmt = request.response_format
    if fmt is not None and fmt.type == "json_schema" and fmt.json_schema is None:
        raise bad_request(
            "response_format of type 'json_schema' needs a 'json_schema' object",
            param="response_format.json_schema",
        )
