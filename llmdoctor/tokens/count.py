"""Count the tokens of files, directories, stdin and chat requests, and check them against a budget."""

from __future__ import annotations

import re
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from llmdoctor.errors import UserError
from llmdoctor.limits import InputProblem
from llmdoctor.report.model import InputError, display_path
from llmdoctor.tokens import chat, hf
from llmdoctor.tokens.budget import DEFAULT_RESERVE, Budget, context_table, known_context, make_budget
from llmdoctor.tokens.encodings import (
    DEFAULT_ENCODING,
    EncodingSource,
    check_encoding_name,
    did_you_mean,
    load_encoding,
    model_encoding_name,
)
from llmdoctor.tokens.inputs import BINARY_SNIFF_BYTES, Discovered, discover, is_binary

if TYPE_CHECKING:
    import tiktoken

Mode = Literal["auto", "text", "request"]
OVER_BUDGET = "TOK001"  # rules/tok001.yaml (`llmdoctor explain TOK001`)
HF_KEY = "\x00hf"  # the pending batch of an open model's tokenizer (never a tiktoken encoding name)
STDIN_NAME = "<stdin>"


@dataclass(frozen=True)
class Options:
    encoding: str | None = None
    model: str | None = None
    encoding_file: str | None = None
    context: int | None = None
    reserve: float = DEFAULT_RESERVE
    glob: str | None = None
    mode: Mode = "auto"
    threads: int = 8
    tokenizer: str | None = None  # an open model's tokenizer: a folder, a tokenizer.json or org/name (HF cache)
    revision: str | None = None
    context_source: str = "--context"  # what set `context` (a live server's max_model_len names itself)


@dataclass
class FileCount:
    path: str
    kind: Literal["text", "chat"]
    encoding: str
    model: str | None
    tokens: int = 0
    budget: Budget | None = None
    estimate: bool = False
    notes: list[str] = field(default_factory=list)
    chat: chat.ChatCount | None = None

    @property
    def fits(self) -> bool | None:
        return None if self.budget is None else self.budget.fits(self.tokens)

    @property
    def over_by(self) -> int:
        if self.budget is None:
            return 0
        return max(0, self.tokens + self.budget.reserve - self.budget.context)

    def to_dict(self) -> dict:
        data: dict = {"path": self.path, "kind": self.kind, "tokens": self.tokens, "encoding": self.encoding,
                      "model": self.model, "estimate": self.estimate}
        if self.budget is not None:
            data.update({"context": self.budget.context, "reserve": self.budget.reserve,
                         "budget": self.budget.prompt_budget, "fits": self.fits, "over_by": self.over_by,
                         "context_source": self.budget.context_source})
        else:
            data.update({"context": None, "reserve": None, "budget": None, "fits": None})
        if self.chat is not None:
            data.update({"messages": self.chat.messages, "tool_tokens": self.chat.tools})
        if self.fits is False:
            data["rule"] = OVER_BUDGET
        data["notes"] = list(self.notes)
        return data

    def finding(self) -> dict | None:
        """TOK001 as every command's JSON carries findings, or None when it fits (or has no budget)."""
        if self.fits is not False or self.budget is None:
            return None
        b = self.budget
        return {"rule": OVER_BUDGET, "severity": "error", "path": self.path,
                "message": f"{self.tokens:,} tokens + {b.reserve:,} reserved for the answer exceed the context of "
                           f"{b.context:,} ({b.context_source}) by {self.over_by:,}"}


@dataclass
class TokensReport:
    files: list[FileCount] = field(default_factory=list)
    errors: list[InputError] = field(default_factory=list)
    encodings: dict[str, EncodingSource] = field(default_factory=dict)
    skipped_binary: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(f.tokens for f in self.files)

    @property
    def over_budget(self) -> list[FileCount]:
        return [f for f in self.files if f.fits is False]

    def exit_code(self) -> int:
        """1 something is over budget; 2 an input could not be counted; 0 otherwise (design.md §2)."""
        if self.over_budget:
            return 1
        return 2 if self.errors else 0

    def ordered(self) -> list[FileCount]:
        """Files over budget first (most over first), then the others in the order they were found."""
        over = sorted(self.over_budget, key=lambda f: -f.over_by)
        return over + [f for f in self.files if f.fits is not False]

    def to_dict(self) -> dict:
        return {
            "files": [f.to_dict() for f in self.ordered()],
            "total": self.total,
            "encodings": {name: {"path": s.path, "sha256": s.sha256, "verified_against": s.verified_against}
                          for name, s in sorted(self.encodings.items())},
            "errors": [e.to_dict() for e in self.errors],
            "findings": [f for f in (item.finding() for item in self.ordered()) if f],
            "notes": list(self.notes),
            "summary": {"files": len(self.files), "over_budget": len(self.over_budget),
                        "errors": len(self.errors), "skipped_binary": self.skipped_binary},
        }


def validate(options: Options) -> None:
    """Option errors stop the run (exit 2) before any file is read."""
    if options.tokenizer is not None and (options.encoding or options.encoding_file):
        raise UserError("give --tokenizer (an open model's tokenizer.json) or --encoding/--encoding-file "
                        "(tiktoken), not both")
    if options.encoding is not None:
        check_encoding_name(options.encoding)
    elif options.model is not None:
        model_encoding_name(options.model)
    if options.context is not None and options.context <= 0:
        raise UserError(f"--context must be a positive number of tokens, got {options.context}")
    if not 0 <= options.reserve < 1:
        raise UserError(f"--reserve is a fraction of the context in [0, 1), got {options.reserve}")
    if options.encoding_file is not None and not Path(options.encoding_file).is_file():
        what = "is a directory, not a .tiktoken file" if Path(options.encoding_file).is_dir() else "no such file"
        raise UserError(f"--encoding-file {options.encoding_file}: {what}")


@dataclass
class _Pending:
    """A text waiting for the batch encoder, and the FileCount its count goes to."""

    text: str
    target: FileCount


class Counter:
    def __init__(self, options: Options) -> None:
        self.options = options
        self.report = TokensReport()
        self._pending: dict[str, list[_Pending]] = {}
        self._hf: hf.HFTokenizer | None = None

    def hf_tokenizer(self) -> hf.HFTokenizer:
        if self._hf is None:
            assert self.options.tokenizer is not None
            self._hf = hf.load(self.options.tokenizer, self.options.revision)
            self.report.notes.append(f"counted with the tokenizer of {self._hf.source} (tokenizer.json sha256 "
                                     f"{self._hf.sha256[:16]}...)")
        return self._hf

    # -------------------------------------------------------------- encodings

    def encoding_for(self, model: str | None) -> str:
        if self.options.encoding:
            return self.options.encoding
        if model:
            return model_encoding_name(model)
        return DEFAULT_ENCODING

    def encoding(self, name: str) -> tiktoken.Encoding:
        custom_allowed = self.options.encoding is not None
        loaded = load_encoding(name, self.options.encoding_file, allow_custom=custom_allowed)
        self.report.encodings[loaded.source.name] = loaded.source
        return loaded.encoding

    # -------------------------------------------------------------- inputs

    def add_inputs(self, paths: list[str], stdin_text: Callable[[], bytes]) -> None:
        for given in paths:
            seen = len(self.report.files) + len(self.report.errors)
            for item in discover([given], self.options.glob):
                if item == "-":
                    self._add_bytes(STDIN_NAME, stdin_text(), explicit=True, json_suffix=False)
                else:
                    assert isinstance(item, Discovered)
                    self._add_file(item)
            if len(self.report.files) + len(self.report.errors) == seen:  # a folder with nothing to count
                glob = f" matching --glob {self.options.glob}" if self.options.glob else ""
                reason = f"no text files{glob} in this folder"
                self.report.errors.append(InputError(display_path(given), reason))

    def _add_file(self, item: Discovered) -> None:
        shown = display_path(item.path)
        try:
            data = _read_sniffing(item.path)
        except FileNotFoundError:
            self.report.errors.append(InputError(shown, "no such file or directory"))
            return
        except IsADirectoryError:
            self.report.errors.append(InputError(shown, "is a directory"))
            return
        except OSError as err:
            self.report.errors.append(InputError(shown, f"cannot read: {err.strerror or err}"))
            return
        except InputProblem as problem:  # a FIFO nobody writes to, a device without end, a huge file
            self.report.errors.append(InputError(shown, problem.reason))
            return
        self._add_bytes(shown, data, explicit=item.explicit, json_suffix=item.path.suffix.lower() == ".json")

    def _add_bytes(self, shown: str, data: bytes, *, explicit: bool, json_suffix: bool) -> None:
        if is_binary(data):
            if explicit:
                self.report.errors.append(InputError(shown, "binary file (contains NUL bytes): not counted"))
            else:
                self.report.skipped_binary += 1
            return
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as err:
            line = data[: err.start].count(b"\n") + 1
            self.report.errors.append(
                InputError(shown, f"not UTF-8 text (byte 0x{data[err.start]:02x}): not counted", line))
            return
        mode = self.options.mode
        if mode == "request" or (mode == "auto" and (json_suffix or (shown == STDIN_NAME
                                                                      and chat.looks_like_request(text)))):
            self._add_json(shown, text, required=mode == "request")
        else:
            self._add_text(shown, text)

    def _add_text(self, shown: str, text: str, note: str | None = None) -> None:
        if self.options.tokenizer:
            target = FileCount(shown, "text", self.options.tokenizer, self.options.model)
            if note:
                target.notes.append(note)
            target.budget = self._budget(target, self.options.model, None)
            self.report.files.append(target)
            self._pending.setdefault(HF_KEY, []).append(_Pending(text, target))
            return
        model = self.options.model
        try:
            encoding = self.encoding_for(model)
        except UserError as err:
            self.report.errors.append(InputError(shown, str(err)))
            return
        target = FileCount(shown, "text", encoding, model)
        if note:
            target.notes.append(note)
        target.budget = self._budget(target, model, None)
        self.report.files.append(target)
        self._pending.setdefault(encoding, []).append(_Pending(text, target))

    def _add_json(self, shown: str, text: str, *, required: bool) -> None:
        try:
            data = chat.parse_json(text)
            request = chat.as_request(data)
        except chat.RequestError as err:
            self.report.errors.append(InputError(shown, err.reason, err.line))
            return
        if request is None:
            if required:
                self.report.errors.append(InputError(shown, 'not a chat request: no "messages" list'))
            else:
                self._add_text(shown, text, note='JSON without a "messages" list: counted as text')
            return
        if self.options.tokenizer:
            self._add_hf_chat(shown, request, data)
            return
        model = self.options.model or request.model
        try:
            encoding_name = self.encoding_for(model)
            encoding = self.encoding(encoding_name)
        except UserError as err:
            self.report.errors.append(InputError(shown, str(err)))
            return

        try:
            result = chat.count_request(request, lambda value: encode_count(encoding, value), encoding_name,
                                        model)
        except EncoderCrash as crash:
            self.report.errors.append(InputError(shown, str(crash)))
            return
        target = FileCount(shown, "chat", encoding_name, model, result.tokens, estimate=result.estimate,
                           notes=list(result.notes), chat=result)
        if self.options.model and request.model and request.model != self.options.model:
            target.notes.append(f"counted for --model {self.options.model}; the request names "
                                f"{request.model}")
        target.budget = self._budget(target, model, request.max_output)
        self.report.files.append(target)

    def _add_hf_chat(self, shown: str, request: chat.ChatRequest, data: dict) -> None:
        """The request as the engine sees it: the model's chat template rendered, then encoded."""
        tokenizer = self.hf_tokenizer()
        tools = data.get("tools") if isinstance(data.get("tools"), list) else None
        extra = data.get("chat_template_kwargs") if isinstance(data.get("chat_template_kwargs"), dict) else None
        notes = []
        media = sum(1 for m in request.messages if isinstance(m.get("content"), list)
                    for part in m["content"] if isinstance(part, dict) and part.get("type") not in
                    ("text", "input_text"))
        try:
            prompt = tokenizer.render(request.messages, tools, extra)
            tool_tokens = 0
            if tools:
                tool_tokens = tokenizer.count(prompt) - tokenizer.count(tokenizer.render(request.messages, None,
                                                                                         extra))
        except hf.TemplateFailure as err:
            self.report.errors.append(InputError(shown, str(err)))
            return
        tokens = tokenizer.count(prompt)
        if media:
            notes.append(f"{media} non-text part(s) (images, audio) are not counted: their tokens depend on the "
                         "model's processor")
        result = chat.ChatCount(tokens, len(request.messages), tool_tokens, bool(media), notes)
        target = FileCount(shown, "chat", self.options.tokenizer or "", self.options.model or request.model,
                           tokens, estimate=bool(media), notes=list(notes), chat=result)
        target.budget = self._budget(target, None, request.max_output)
        self.report.files.append(target)

    def _budget(self, target: FileCount, model: str | None, max_output: int | None) -> Budget | None:
        if self.options.context is not None:
            return make_budget(self.options.context, self.options.reserve, max_output,
                               self.options.context_source)
        if self.options.tokenizer:
            return None
        if model is None:
            return None
        window = known_context(model)
        if window is None:
            close = did_you_mean(model, list(context_table()))
            target.notes.append(f"no known context window for {model}{close}: "
                                "pass --context N to check a budget")
            return None
        return make_budget(window.tokens, self.options.reserve, max_output, window.source)

    # -------------------------------------------------------------- counting

    def finish(self, progress: Callable[[int, int], None] | None = None) -> TokensReport:
        """Encode the pending texts, a batch per encoding, on threads (tiktoken's core releases the GIL);
        `progress(done, total)` after each text."""
        total = sum(len(pending) for pending in self._pending.values())
        done = 0
        counting = threading.Lock()  # advance runs on count_texts' worker threads

        def advance() -> None:
            nonlocal done
            with counting:
                done += 1
                if progress is not None:
                    progress(done, total)

        for encoding_name, pending in self._pending.items():
            if encoding_name == HF_KEY:
                hf_counts = self.hf_tokenizer().count_batch([p.text for p in pending])
                for item, tokens in zip(pending, hf_counts, strict=True):
                    item.target.tokens = tokens
                    advance()
                continue
            encoding = self.encoding(encoding_name)
            counts = count_texts(encoding, [p.text for p in pending], self.options.threads, advance)
            for item, tokens in zip(pending, counts, strict=True):
                if isinstance(tokens, EncoderCrash):
                    self.report.files.remove(item.target)
                    self.report.errors.append(InputError(item.target.path, str(tokens)))
                else:
                    item.target.tokens = tokens
        self._pending.clear()
        unbudgeted = sum(1 for f in self.report.files if f.budget is None and f.model is None)
        if unbudgeted:
            have = "inputs have" if unbudgeted != 1 else "input has"
            fix = "--context N, or --url to take a running server's max_model_len" if self.options.tokenizer \
                else "--context N or --model NAME"
            self.report.notes.append(f"{unbudgeted} {have} no context window to check against: pass {fix}")
        return self.report


class EncoderCrash(Exception):
    """tiktoken's Rust core panicked on a text. Known cause: its regex engine overflows the stack on very long
    runs of one character (openai/tiktoken#15, #245); a custom vocabulary missing single bytes is another.
    There is no count to give: the input is reported instead."""


_LONG_RUN = re.compile(r"(.)\1{999,}", re.DOTALL)


def crash_reason(text: str, panic: BaseException) -> str:
    reason = f"tiktoken could not encode this text ({panic})"
    runs = [(match.end() - match.start(), match.group(1)) for match in _LONG_RUN.finditer(text)]
    if runs:
        length, char = max(runs)
        reason += (f": it holds a run of {length:,} × {char!r}, which overflows tiktoken's regex engine "
                   "(openai/tiktoken#15)")
    return reason + "; no count is given rather than a wrong one"


def encode_count(encoding: tiktoken.Encoding, text: str) -> int:
    """len(encoding.encode_ordinary(text)), counted in chunks that add up to it (tokens/chunks.py: bounded
    memory); EncoderCrash when tiktoken's Rust core panics or one piece is too long to count."""
    from llmdoctor.tokens.chunks import PieceTooLong, count

    try:
        return count(encoding, text)
    except PieceTooLong as long:
        raise EncoderCrash(f"a run of {long.length:,} characters that tiktoken encodes as one piece (no "
                           "whitespace, digit or line break to split at): counting it takes ~3 s and ~45 MB "
                           "per MB; no count is given (split the text)") from None
    except BaseException as err:  # pyo3's PanicException derives from BaseException, not Exception
        # the panic surfaces as PanicException from encode_ordinary, as ValueError("Regex error while
        # tokenizing: ... Max stack size exceeded") from the token-buffer call
        if type(err).__name__ != "PanicException" and not (isinstance(err, ValueError) and "Regex error" in str(err)):
            raise
        raise EncoderCrash(crash_reason(text, err)) from None


def count_texts(encoding: tiktoken.Encoding, texts: list[str], threads: int,
                advance: Callable[[], None] | None = None) -> list[int | EncoderCrash]:
    """Token counts of `texts`, as `encode_ordinary_batch` would give, without keeping the token lists.

    A text tiktoken cannot encode gives its EncoderCrash in place of a count.
    """

    def count(text: str) -> int | EncoderCrash:
        try:
            return encode_count(encoding, text)
        except EncoderCrash as crash:
            return crash
        finally:
            if advance is not None:
                advance()

    if threads <= 1 or len(texts) <= 1:
        return [count(text) for text in texts]
    with ThreadPoolExecutor(max_workers=min(threads, len(texts))) as pool:
        return list(pool.map(count, texts))


def count_tokens(paths: list[str], options: Options, stdin: Callable[[], bytes] | None = None,
                 progress: Callable[[int, int], None] | None = None) -> TokensReport:
    validate(options)
    counter = Counter(options)
    if options.tokenizer:
        counter.hf_tokenizer()  # a missing or broken tokenizer stops the run before any file is read
    counter.add_inputs(paths, stdin or (lambda: sys.stdin.buffer.read()))
    return counter.finish(progress)


def default_threads() -> int:
    from llmdoctor.machine import available_cpus

    return min(8, available_cpus())


MAX_INPUT_BYTES = 256 * 2**20  # one input (the longest context windows, ~10M tokens, are ~40 MB of text)


def _read_sniffing(path: Path) -> bytes:
    """The file's bytes, at most MAX_INPUT_BYTES; a pipe or device (`/dev/zero`) that starts binary is not read
    to its (maybe no) end, and a named pipe nobody writes to is an error at once (llmdoctor/limits.py)."""
    from llmdoctor.limits import read_bounded

    if not path.exists() and not path.is_symlink():
        raise FileNotFoundError(path)
    try:
        return read_bounded(path, MAX_INPUT_BYTES, streams=True, what="a text to count",
                            stop=lambda head: is_binary(head[:BINARY_SNIFF_BYTES]))
    except InputProblem as problem:
        if problem.reason == "is a directory":
            raise IsADirectoryError(path) from None
        raise
