"""Chat requests (`{"model", "messages", ...}` as sent to chat.completions) counted as the API counts them.

Messages (OpenAI cookbook, "How to count tokens with tiktoken", §6, verified there against the API's
`usage.prompt_tokens` for gpt-3.5-turbo, gpt-4, gpt-4o and gpt-4o-mini): 3 tokens per message, the
tokens of each key's value, +1 per `name`, +3 to prime the reply (gpt-3.5-turbo-0301: 4 per message and
-1 per name).

Tool definitions (same notebook, §7, `num_tokens_for_tools`, also verified there against the API): per
function `func_init` (7 for gpt-4o-family encodings, 10 for gpt-3.5-turbo / gpt-4) + tokens of
"name:description" (one trailing period dropped); when it has properties `prop_init` (3), and per property
`prop_key` (3) + tokens of "name:type:description" (+ `enum_init` (-3) and per item `enum_item` (3) +
the item's tokens when it has an enum); `func_end` (12) once. OpenAI does not publish how it renders tools,
so counts with tools are reported as estimates.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

COOKBOOK_URL = "https://github.com/openai/openai-cookbook/blob/main/examples/How_to_count_tokens_with_tiktoken.ipynb"
REPLY_PRIMING = 3
MAX_OUTPUT_TOKENS = 2**31  # max_tokens / max_completion_tokens past this is no model's
_VERIFIED_FAMILIES = ("gpt-3.5-turbo", "gpt-35-turbo", "gpt-4o", "gpt-4o-mini", "gpt-4-0", "gpt-4-32k")
_VERIFIED_EXACT = ("gpt-4",)


@dataclass(frozen=True)
class ToolConstants:
    func_init: int
    prop_init: int = 3
    prop_key: int = 3
    enum_init: int = -3
    enum_item: int = 3
    func_end: int = 12


TOOL_CONSTANTS = {"o200k_base": ToolConstants(func_init=7), "cl100k_base": ToolConstants(func_init=10)}


class RequestError(ValueError):
    """The file looks like a chat request but is not a valid one."""

    def __init__(self, reason: str, line: int | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.line = line


@dataclass
class ChatRequest:
    model: str | None
    messages: list[dict[str, Any]]
    functions: list[dict[str, Any]]  # tool definitions as {"name", "description", "parameters"}
    max_output: int | None
    response_schema: bool = False  # response_format carries a JSON schema (structured outputs)


@dataclass
class ChatCount:
    tokens: int
    messages: int
    tools: int  # tokens for tool definitions (0 when none)
    estimate: bool
    notes: list[str] = field(default_factory=list)


def looks_like_request(text: str) -> bool:
    """Cheap test for stdin: a JSON object mentioning "messages"."""
    return text.lstrip().startswith("{") and '"messages"' in text


def parse_json(text: str) -> Any:
    """The parsed body; RequestError for malformed JSON, nesting past what a real request has, or an integer
    of more digits than any count (bounds: llmdoctor/limits.py)."""
    from llmdoctor.limits import MAX_DEPTH, MAX_INT_DIGITS, data_size

    def bounded_int(digits: str) -> int:
        if len(digits.lstrip("-")) > MAX_INT_DIGITS:
            raise RequestError(f"an integer of {len(digits.lstrip('-')):,} digits: not a chat request")
        return int(digits)

    try:
        data = json.loads(text, parse_int=bounded_int)
    except json.JSONDecodeError as err:
        raise RequestError(f"malformed JSON: {err.msg} (column {err.colno})", line=err.lineno) from None
    except RecursionError:
        raise RequestError(f"JSON nested too deeply (a request nests a few levels; at most {MAX_DEPTH} are "
                           "read)") from None
    if data_size(data, max_depth=MAX_DEPTH)[1] > MAX_DEPTH:
        raise RequestError(f"JSON nested more than {MAX_DEPTH} levels (a request nests a few): not counted")
    return data


def as_request(data: Any) -> ChatRequest | None:
    """The chat request in parsed JSON; None when it has no "messages"; RequestError when malformed."""
    if not isinstance(data, dict) or "messages" not in data:
        return None
    messages = data["messages"]
    if not isinstance(messages, list):
        raise RequestError('"messages" must be a list of message objects')
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            raise RequestError(f"messages[{index}] must be an object with a role and content")
        if not isinstance(message.get("role"), str):
            raise RequestError(f'messages[{index}] has no "role" string')
    model = data.get("model")
    if model is not None and not isinstance(model, str):
        raise RequestError('"model" must be a string')
    response_format = data.get("response_format")
    schema = isinstance(response_format, dict) and response_format.get("type") == "json_schema"
    return ChatRequest(model, messages, _functions(data), _max_output(data), schema)


def _max_output(data: dict[str, Any]) -> int | None:
    values = []
    for key in ("max_completion_tokens", "max_tokens"):
        value = data.get(key)
        if value is None:
            continue
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_OUTPUT_TOKENS:
            from llmdoctor.limits import brief

            raise RequestError(f'"{key}" must be a non-negative integer (at most {MAX_OUTPUT_TOKENS:,}), '
                               f"got {brief(value, 40)}")
        values.append(value)
    return max(values) if values else None


def _functions(data: dict[str, Any]) -> list[dict[str, Any]]:
    functions: list[dict[str, Any]] = []
    tools = data.get("tools") or []
    if not isinstance(tools, list):
        raise RequestError('"tools" must be a list')
    for index, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise RequestError(f'tools[{index}] must be {{"type": "function", "function": {{"name": ...}}}}')
        functions.append(function)
    legacy = data.get("functions") or []  # the deprecated `functions` parameter: the same objects, unwrapped
    if not isinstance(legacy, list):
        raise RequestError('"functions" must be a list')
    for index, function in enumerate(legacy):
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise RequestError(f'functions[{index}] must be an object with a "name"')
        functions.append(function)
    return functions


def formula_verified_for(model: str | None) -> bool:
    if model is None:
        return False
    return model in _VERIFIED_EXACT or model.startswith(_VERIFIED_FAMILIES)


def count_request(request: ChatRequest, encode: Callable[[str], int], encoding_name: str,
                  model: str | None) -> ChatCount:
    """Prompt tokens of a chat request; `encode(text)` returns the token count of a string."""
    notes: list[str] = []
    estimate = False
    per_message, per_name = (4, -1) if model == "gpt-3.5-turbo-0301" else (3, 1)
    total = 0
    for message in request.messages:
        total += per_message
        for key, value in message.items():
            tokens, value_estimate = _value_tokens(key, value, encode, notes)
            total += tokens
            estimate = estimate or value_estimate
            if key == "name":
                total += per_name
    total += REPLY_PRIMING
    tools = 0
    if request.functions:
        constants = TOOL_CONSTANTS.get(encoding_name, ToolConstants(func_init=7))
        tools = count_functions(request.functions, encode, constants)
        notes.append(f"{len(request.functions)} tool definition(s): {tools} tokens by the cookbook's "
                     "approximation (OpenAI does not publish how tools are rendered)")
        estimate = True
    if request.response_schema:
        notes.append("response_format json_schema: the schema's tokens are not counted (how the API adds it "
                     "to the prompt is not published)")
        estimate = True
    if not formula_verified_for(model):
        notes.append(f"the message formula was verified against the API for gpt-3.5-turbo, gpt-4, gpt-4o and "
                     f"gpt-4o-mini; for {model or 'a request without a model'} it may differ by a few tokens")
        estimate = True
    return ChatCount(total + tools, len(request.messages), tools, estimate, _unique(notes))


def _value_tokens(key: str, value: Any, encode: Callable[[str], int], notes: list[str]) -> tuple[int, bool]:
    """Tokens for one message field, and whether the count is an estimate."""
    if isinstance(value, str):
        return encode(value), False
    if value is None:
        return 0, False
    if key == "content" and isinstance(value, list):
        return _parts_tokens(value, encode, notes)
    if key in ("tool_calls", "function_call"):
        calls = value if isinstance(value, list) else [{"function": value}]
        tokens = 0
        for call in calls:
            function = call.get("function", {}) if isinstance(call, dict) else {}
            for part in (function.get("name"), function.get("arguments")):
                if isinstance(part, str):
                    tokens += encode(part)
        notes.append(f"{key}: the function names and arguments are counted; the API's framing of calls is "
                     "not published")
        return tokens, True
    notes.append(f"{key}: a non-text value, counted as its compact JSON")
    return encode(json.dumps(value, ensure_ascii=False, separators=(",", ":"))), True


def _parts_tokens(parts: list[Any], encode: Callable[[str], int], notes: list[str]) -> tuple[int, bool]:
    tokens = 0
    texts = 0
    skipped: dict[str, int] = {}
    for part in parts:
        if isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str):
            tokens += encode(part["text"])
            texts += 1
        else:
            kind = part.get("type", "?") if isinstance(part, dict) else type(part).__name__
            skipped[str(kind)] = skipped.get(str(kind), 0) + 1
    estimate = False
    if texts > 1:
        notes.append("several text parts in one message are counted one by one (how the API joins them "
                     "is not published)")
        estimate = True
    for kind, count in sorted(skipped.items()):
        notes.append(f"{count} {kind} part(s) not counted: their tokens depend on the media (an image's size "
                     "and detail), which a token count of the request cannot know")
        estimate = True
    return tokens, estimate


def count_functions(functions: list[dict[str, Any]], encode: Callable[[str], int], c: ToolConstants) -> int:
    """The cookbook's `num_tokens_for_tools` approximation for tool definitions."""
    total = 0
    for function in functions:
        total += c.func_init
        total += encode(f"{function['name']}:{_drop_period(_text(function.get('description')))}")
        parameters = function.get("parameters")
        properties = parameters.get("properties") if isinstance(parameters, dict) else None
        if isinstance(properties, dict) and properties:
            total += c.prop_init
            for name, spec in properties.items():
                spec = spec if isinstance(spec, dict) else {}
                total += c.prop_key
                enum = spec.get("enum")
                if isinstance(enum, list):
                    total += c.enum_init
                    for item in enum:
                        total += c.enum_item + encode(_text(item))
                line = f"{name}:{_text(spec.get('type'))}:{_drop_period(_text(spec.get('description')))}"
                total += encode(line)
    if functions:
        total += c.func_end
    return total


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _drop_period(text: str) -> str:
    return text.removesuffix(".")


def _unique(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))
