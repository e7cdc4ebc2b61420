"""OpenAI-style API errors: an exception carrying the HTTP status and the error body fields.

Every error the server returns has the body OpenAI's API uses::

    {"error": {"message": "...", "type": "invalid_request_error", "param": "...", "code": ...}}

`api_error_from` maps formcast's exception hierarchy onto statuses: input errors (schema,
grammar, sampling values, requests the engine cannot serve, such as ``n`` above
``max_num_seqs``) are 400s naming the parameter;
anything else is a 500 ``server_error`` whose message names the exception.
"""

from __future__ import annotations

from typing import Any

from formcast.errors import (
    CompileBudgetError,
    FormcastError,
    GrammarError,
    GrammarLimitError,
    RequestError,
    RequestLimitError,
    SamplingParamsError,
    SchemaError,
)

INVALID_REQUEST = "invalid_request_error"
NOT_FOUND = "not_found_error"
SERVER_ERROR = "server_error"

# SamplingParams field -> the OpenAI request parameter that set it
_SAMPLING_PARAM_NAMES = {"logprobs": "top_logprobs"}


class APIError(Exception):
    """An error response: HTTP ``status`` and the OpenAI error body fields.

    Parameters
    ----------
    status : int
        HTTP status code.
    message : str
        Human-readable message.
    type : str
        OpenAI error type (``invalid_request_error``, ``not_found_error``, ``server_error``).
    param : str, optional
        The request parameter at fault.
    code : str, optional
        Machine-readable code (``context_length_exceeded``, ``model_not_found``, ...).
    """

    def __init__(
        self,
        status: int,
        message: str,
        type: str = INVALID_REQUEST,
        param: str | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.param = param
        self.code = code

    def body(self) -> dict[str, Any]:
        """The JSON body ``{"error": {...}}``."""
        return {
            "error": {
                "message": self.message,
                "type": self.type,
                "param": self.param,
                "code": self.code,
            }
        }


def bad_request(message: str, param: str | None = None, code: str | None = None) -> APIError:
    """A 400 ``invalid_request_error``."""
    return APIError(400, message, INVALID_REQUEST, param, code)


def context_length_exceeded(num_prompt: int, num_new: int | None, max_model_len: int) -> APIError:
    """The 400 for a prompt (plus requested tokens) longer than the model's context."""
    asked = f"{num_prompt} in the prompt" + (
        f" and {num_new} in the completion" if num_new is not None else ""
    )
    return bad_request(
        f"This model's maximum context length is {max_model_len} tokens. However, you "
        f"requested {num_prompt + (num_new or 0)} tokens ({asked}); at least one token must "
        "be generated. Please reduce the length of the messages or completion.",
        param="messages",
        code="context_length_exceeded",
    )


def model_not_found(name: str) -> APIError:
    """The 404 for a model the server does not serve."""
    return APIError(
        404,
        f"The model `{name}` does not exist or you do not have access to it.",
        NOT_FOUND,
        "model",
        "model_not_found",
    )


def api_error_from(exc: BaseException, grammar_param: str | None = None) -> APIError:
    """The `APIError` for an exception raised while serving a request.

    ``grammar_param`` names the request parameter that carried the grammar (for schema and
    grammar errors).
    """
    if isinstance(exc, APIError):
        return exc
    if isinstance(exc, SamplingParamsError):
        return bad_request(str(exc), param=_SAMPLING_PARAM_NAMES.get(exc.field, exc.field))
    if isinstance(exc, RequestLimitError):  # more than the engine can ever run at once
        return bad_request(str(exc), param=_SAMPLING_PARAM_NAMES.get(exc.field, exc.field))
    if isinstance(exc, SchemaError):
        return bad_request(str(exc), param=grammar_param, code="invalid_schema")
    if isinstance(exc, GrammarLimitError):
        return bad_request(str(exc), param=grammar_param, code="grammar_too_large")
    if isinstance(exc, CompileBudgetError):
        return bad_request(str(exc), param=grammar_param, code="grammar_budget_exceeded")
    if isinstance(exc, GrammarError):
        return bad_request(str(exc), param=grammar_param, code="invalid_grammar")
    if isinstance(exc, (RequestError, ValueError)) and isinstance(exc, FormcastError):
        return bad_request(str(exc))
    return APIError(500, f"{type(exc).__name__}: {exc}", SERVER_ERROR)
