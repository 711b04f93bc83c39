"""Token counts with an open model's own tokenizer: its `tokenizer.json` through the `tokenizers` package, and
for chat requests its chat template rendered the way the serving engines render it. Offline only.

Loading: a folder (or a tokenizer.json) on disk, or `org/name` from the local Hugging Face cache
(`llmdoctor.kv.hf_cache`). The chat template is `chat_template.jinja` beside it when present (what recent
transformers saves), else `chat_template` in tokenizer_config.json (a string, or a list of named templates:
"tool_use" when the request has tools and the list has one, else "default").

Rendering follows transformers (`utils/chat_template_utils.py: _compile_jinja_template`), which vLLM and SGLang
call through `apply_chat_template`: jinja2's `ImmutableSandboxedEnvironment(trim_blocks=True,
lstrip_blocks=True)` with the `loopcontrols` extension and a `{% generation %}` block, a `tojson` filter that
does not escape HTML (`json.dumps(ensure_ascii=False)`), `raise_exception` and `strftime_now` globals; the
template sees `messages`, `tools`, `documents`, `add_generation_prompt=True`, the special tokens (bos_token,
eos_token, ...) and the request's `chat_template_kwargs` (e.g. Qwen3's `enable_thinking`).
vLLM's own steps before that (`vllm/entrypoints/chat_utils.py`): text parts of a list content are joined with
"\\n" for templates that expect a string (those that do not loop over `message.content`), and tool-call
arguments given as JSON strings are parsed into objects. The rendered prompt is encoded without adding special
tokens again (vLLM's ChatCompletionRequest `add_special_tokens` defaults to False: the template has them).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from llmdoctor.errors import UserError

_SPECIAL_KEYS = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")
_LOOPS_OVER_CONTENT = re.compile(r"for\s+\w+\s+in\s+\w+(?:\[\s*['\"]content['\"]\s*\]|\.content)")
_MAX_TOKENIZER_BYTES = 256 * 2**20


class TemplateFailure(ValueError):
    """The chat template raised (raise_exception) or failed to render this request."""


@dataclass
class HFTokenizer:
    name: str
    source: str
    sha256: str
    tokenizer: Any  # tokenizers.Tokenizer
    chat_template: str | None
    templates: dict[str, str] = field(default_factory=dict)
    special: dict[str, str] = field(default_factory=dict)
    model_max_length: int | None = None

    def count(self, text: str) -> int:
        return len(self.tokenizer.encode(text, add_special_tokens=False).ids)

    def count_batch(self, texts: list[str]) -> list[int]:
        return [len(e.ids) for e in self.tokenizer.encode_batch(texts, add_special_tokens=False)]

    def template_for(self, tools: bool) -> str | None:
        if self.templates:
            if tools and "tool_use" in self.templates:
                return self.templates["tool_use"]
            return self.templates.get("default")
        return self.chat_template

    def render(self, messages: list[dict], tools: list[dict] | None = None,
               extra: dict[str, Any] | None = None) -> str:
        template = self.template_for(bool(tools))
        if template is None:
            raise TemplateFailure(f"{self.name} has no chat template (tokenizer_config.json has no chat_template "
                                  "and there is no chat_template.jinja): serving engines refuse chat requests "
                                  "for it unless started with --chat-template")
        compiled = _compile(template)
        messages = _as_engine_messages(messages, string_content=not _LOOPS_OVER_CONTENT.search(template))
        kwargs = {**self.special, **(extra or {})}
        try:
            return compiled.render(messages=messages, tools=tools or None, documents=None,
                                   add_generation_prompt=True, **kwargs)
        except Exception as err:  # noqa: BLE001 - a template can raise anything; reported for this input
            raise TemplateFailure(f"the chat template of {self.name} refused this request: "
                                  f"{type(err).__name__}: {err}") from None


def _as_engine_messages(messages: list[dict], string_content: bool) -> list[dict]:
    out = []
    for message in messages:
        item = dict(message)
        content = item.get("content")
        if isinstance(content, list) and string_content:
            texts = [part.get("text", "") for part in content if isinstance(part, dict) and
                     part.get("type") in ("text", "input_text")]
            item["content"] = "\n".join(texts)
        calls = item.get("tool_calls")
        if isinstance(calls, list):
            fixed = []
            for call in calls:
                call = dict(call) if isinstance(call, dict) else call
                function = call.get("function") if isinstance(call, dict) else None
                if isinstance(function, dict) and isinstance(function.get("arguments"), str):
                    try:
                        call["function"] = {**function, "arguments": json.loads(function["arguments"])}
                    except (ValueError, RecursionError):
                        pass
                fixed.append(call)
            item["tool_calls"] = fixed
        out.append(item)
    return out


_COMPILED: dict[str, Any] = {}


def _compile(template: str) -> Any:
    if template in _COMPILED:
        return _COMPILED[template]
    import jinja2
    from jinja2.ext import Extension, loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class GenerationBlock(Extension):
        """transformers' AssistantTracker tag: `{% generation %}...{% endgeneration %}` renders its body."""

        tags: ClassVar[set[str]] = {"generation"}

        def parse(self, parser):  # type: ignore[no-untyped-def]
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return jinja2.nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

        def _body(self, caller):  # type: ignore[no-untyped-def]
            return caller()

    def raise_exception(message: str) -> None:
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x: Any, ensure_ascii: bool = False, indent: Any = None, separators: Any = None,
               sort_keys: bool = False) -> str:
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt: str) -> str:
        from datetime import datetime

        return datetime.now().strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[GenerationBlock, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    try:
        compiled = env.from_string(template)
    except jinja2.exceptions.TemplateSyntaxError as err:
        raise TemplateFailure(f"the chat template does not parse: line {err.lineno}: {err.message}") from None
    _COMPILED[template] = compiled
    return compiled


def _token_text(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return value["content"]  # an AddedToken written out: {"content": ..., "__type": "AddedToken"}
    return None


def _read_json(path: Path, what: str) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as err:  # ValueError: bad JSON, a 5,000-digit number
        raise UserError(f"--tokenizer: {path}: cannot read {what} ({str(err)[:200]})") from None
    except RecursionError:
        raise UserError(f"--tokenizer: {path}: cannot read {what} (nested too deeply)") from None
    if not isinstance(data, dict):
        raise UserError(f"--tokenizer: {path}: {what} is not a JSON object")
    return data


def find_files(spec: str, revision: str | None = None) -> tuple[Path, str]:
    """(the folder holding tokenizer.json, how to name it) for a path or an `org/name` in the HF cache."""
    path = Path(spec).expanduser()
    if path.is_file() and path.name.endswith(".json"):
        return path.parent, str(path)
    if path.is_dir():
        if not (path / "tokenizer.json").is_file():
            raise UserError(f"--tokenizer {spec}: no tokenizer.json in this folder (a model saved with only a "
                            "SentencePiece tokenizer.model needs converting with transformers first)")
        return path, str(path)
    from llmdoctor.kv import hf_cache

    if "/" in spec and hf_cache.looks_like_repo_id(spec):
        snapshot = hf_cache.require_snapshot(spec, revision, "--tokenizer", "tokenizer.json")
        return snapshot.path, snapshot.shown
    raise UserError(f"--tokenizer {spec!r}: no such file or folder, and not an org/name Hub id")


_LOADED: dict[tuple[str, str | None], HFTokenizer] = {}


def load(spec: str, revision: str | None = None) -> HFTokenizer:
    key = (spec, revision)
    if key in _LOADED:
        return _LOADED[key]
    folder, shown = find_files(spec, revision)
    tokenizer_file = folder / "tokenizer.json" if not spec.endswith(".json") else Path(spec).expanduser()
    try:
        raw = tokenizer_file.read_bytes()
    except OSError as err:
        raise UserError(f"--tokenizer: cannot read {tokenizer_file}: {err.strerror}") from None
    if len(raw) > _MAX_TOKENIZER_BYTES:
        raise UserError(f"--tokenizer: {tokenizer_file} is larger than 256 MiB: not a tokenizer.json")
    from tokenizers import Tokenizer

    try:
        tokenizer = Tokenizer.from_str(raw.decode("utf-8"))
    except Exception as err:  # noqa: BLE001 - tokenizers' Rust side raises plain Exception on a bad file
        raise UserError(f"--tokenizer: {tokenizer_file} is not a tokenizers JSON file ({err})") from None
    config_path = folder / "tokenizer_config.json"
    config = _read_json(config_path, "tokenizer_config.json") if config_path.is_file() else {}
    special = {k: v for k in _SPECIAL_KEYS if (v := _token_text(config.get(k))) is not None}
    templates: dict[str, str] = {}
    template = config.get("chat_template")
    jinja_file = folder / "chat_template.jinja"
    if jinja_file.is_file():
        template = jinja_file.read_text(encoding="utf-8")
    elif isinstance(template, list):
        templates = {str(t.get("name")): str(t.get("template")) for t in template
                     if isinstance(t, dict) and t.get("template")}
        template = templates.get("default")
    elif template is not None and not isinstance(template, str):
        raise UserError(f"--tokenizer: {config_path}: chat_template must be a string or a list of templates")
    length = config.get("model_max_length")
    loaded = HFTokenizer(spec, shown, hashlib.sha256(raw).hexdigest(), tokenizer, template, templates, special,
                         length if isinstance(length, int) and 0 < length < 10**9 else None)
    _LOADED[key] = loaded
    return loaded
