"""The validated `rules/sdk-logging.yaml` (log sinks and their levels, payload vs metadata shapes, sampling
guards), shared by LLM005 (rules/payload.py) and the pre-filters, which read it without libcst: building it
must not import the parser (a scan whose changed files are all pre-filtered out parses nothing)."""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass

from llmdoctor.errors import UserError

LEVELS = {"TRACE": 5, "DEBUG": 10, "INFO": 20, "SUCCESS": 25, "WARNING": 30, "ERROR": 40, "CRITICAL": 50}
FIRST_ARGUMENT = "first_argument"
# keywords of a logging call or `print` that say how to log, not what
NOT_LOGGED_KEYWORDS = frozenset({"exc_info", "stack_info", "stacklevel", "file", "sep", "end", "flush"})
KNOWLEDGE_STEM = "sdk-logging"


# printf-style conversions (`%(key)s`, `%-10.50r`, `%*d`, `%%`), as the `%` operator and logging read them
_PRINTF = re.compile(r"%(?P<key>\([^)]*\))?[#0\- +]*(?P<width>\*|\d+)?(?:\.(?P<precision>\*|\d*))?[hlL]?"
                     r"(?P<type>[diouxXeEfFgGcrsa%])")
# a format spec (`format()`'s mini-language): [[fill]align][sign][z][#][0][width][grouping][.precision][type]
_FORMAT_SPEC = re.compile(r"(?:.?[<>=^])?[+\- ]?z?#?0?\d*[_,]?(?:\.(?P<precision>\d+))?(?P<type>[bcdeEfFgGnosxX%])?")


def printf_excerpts(template: str, limit: int) -> set[int] | None:
    """The positions of the arguments a printf-style template cuts to at most `limit` characters (`%.50s`,
    `%.60r`); None where its arguments are not positional (`%(name)s`) or `limit` is off."""
    if limit <= 0:
        return None
    cut: set[int] = set()
    position = 0
    for found in _PRINTF.finditer(template):
        if found["type"] == "%":
            continue
        if found["key"] is not None:
            return None
        position += found["width"] == "*"
        precision = found["precision"]
        if precision == "*":
            position += 1
        elif found["type"] in "rsa" and precision is not None and int(precision or 0) <= limit:
            cut.add(position)
        position += 1
    return cut


def _glob_regex(globs) -> re.Pattern | None:
    globs = list(globs or ())
    if not globs:
        return None
    return re.compile("|".join(fnmatch.translate(g) for g in globs))


@dataclass(frozen=True)
class LoggingKnowledge:
    min_level: int
    error_path_level: int  # at or above it, a log in a branch or an except handler is an error report
    functions: dict  # qualified function -> level number, or None (level is the first argument)
    print_modules: frozenset
    print_level_words: dict  # first word of a print's literal -> the level it announces (`print("ERROR ...")`)
    logger_factories: frozenset
    logger_objects: frozenset
    logger_methods: dict  # method -> level number or None
    logger_names: frozenset  # exact names
    logger_name_globs: frozenset  # `*_logger`
    helper_names: re.Pattern | None  # what a logging helper of the program may be called (`color_print`)
    level_constants: dict  # qualified constant -> level number
    payload_attributes: frozenset
    metadata_attributes: frozenset
    metadata_functions: frozenset
    preserving_functions: frozenset
    preserving_methods: frozenset
    stream_final_methods: frozenset  # a stream's method returning the whole accumulated completion
    payload_kwargs: frozenset
    payload_keys: frozenset  # dict keys holding a request's prompt
    chat_message_text: dict  # a chat platform's type -> the attribute paths holding the user's message text
    http_paths: tuple  # literals that make a module an LLM module
    payload_names: re.Pattern | None
    # ... of them, those that are payload only in a module that calls the model itself (`answer`, `*_answer`)
    names_beside_model: re.Pattern | None
    excerpt_max_chars: int  # `text[:50]`: a prefix (or suffix) this short is a label for the line, not the text
    metadata_name_parts: frozenset
    random_functions: frozenset
    sample_names: re.Pattern | None
    modulo: bool
    enabled_checks: frozenset

    def is_logger_name(self, name: str) -> bool:
        return name in self.logger_names or any(fnmatch.fnmatchcase(name, g) for g in self.logger_name_globs)

    def spec_cuts(self, spec: str) -> bool:
        """`{text:.50}` / `{text!r:.50s}`: a format spec (the text after `:`) whose precision cuts a string to an
        excerpt of at most `excerpt_max_chars` characters."""
        found = _FORMAT_SPEC.fullmatch(spec)
        limit = self.excerpt_max_chars
        return found is not None and found["precision"] is not None and found["type"] in (None, "s") \
            and 0 < limit and int(found["precision"]) <= limit

    def slice_cuts(self, lower: int | None, upper: int | None) -> bool:
        """`text[:N]` (no lower bound, `upper` N) or `text[-N:]` (`lower` -N, no upper bound) with N up to
        `excerpt_max_chars`: at most N characters, a label for the line (bounds given as the literals written)."""
        limit = self.excerpt_max_chars
        if limit <= 0:
            return False
        if lower is None and upper is not None:
            return 0 <= upper <= limit
        return upper is None and lower is not None and -limit <= lower < 0

    def may_be_helper(self, name: str) -> bool:
        return self.helper_names is not None and self.helper_names.fullmatch(name) is not None

    def fixed_level(self, owner: str | None, receiver: str | None, method: str) -> int | None:
        """The level of a logging call whose level its callee fixes: a module function (`logging.info`: owner
        `logging`), or a logger method (`info`) of a logger the program made or imported (owner
        `logging.getLogger`, `loguru.logger`) or of a receiver named like one (`progress_logger.info`).
        None for anything else, `print` and `logger.log(level, ...)` included."""
        if owner is not None and owner != "builtins":
            level = self.functions.get(f"{owner}.{method}")
            if level is not None:
                return level
        level = self.logger_methods.get(method)
        if level is None:
            return None
        if owner in self.logger_factories or owner in self.logger_objects:
            return level
        return level if receiver is not None and self.is_logger_name(receiver) else None

    def is_payload_name(self, name: str, beside_model: bool = True) -> bool:
        """`beside_model`: in a module that calls the model itself (else `names_beside_model` do not count)."""
        if self.payload_names is None or self.payload_names.fullmatch(name) is None:
            return False
        if not beside_model and self.names_beside_model is not None and self.names_beside_model.fullmatch(name):
            return False
        return not any(part.lower() in self.metadata_name_parts for part in name.split("_"))


def logging_knowledge(catalog) -> LoggingKnowledge:
    found = catalog.memo.get(KNOWLEDGE_STEM)
    if found is None:
        found = catalog.memo[KNOWLEDGE_STEM] = build_logging_knowledge(catalog.knowledge.get(KNOWLEDGE_STEM) or {})
    return found


def _level(stem_key: str, value) -> int | None:
    if value == FIRST_ARGUMENT:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.upper() in LEVELS:
        return LEVELS[value.upper()]
    raise UserError(f"rules file {KNOWLEDGE_STEM}.yaml: key '{stem_key}': level must be one of "
                    f"{', '.join(LEVELS)}, a number or {FIRST_ARGUMENT}")


def _attribute_paths(doc) -> dict[str, frozenset[tuple[str, ...]]]:
    """`telegram.Update: [message.text, ...]` -> {"telegram.Update": {("message", "text"), ...}}."""
    where = f"rules file {KNOWLEDGE_STEM}.yaml: key 'payload.chat_message_text'"
    if not isinstance(doc, dict):
        raise UserError(f"{where}: must map a type to a list of attribute paths")
    paths = {}
    for type_name, items in doc.items():
        if not isinstance(items, list) or not all(isinstance(i, str) and all(p.isidentifier() for p in i.split("."))
                                                  for i in items):
            raise UserError(f"{where}.{type_name}: must be a list of dotted attribute paths (`message.text`)")
        paths[str(type_name)] = frozenset(tuple(item.split(".")) for item in items)
    return paths


def _count(stem_key: str, value) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    raise UserError(f"rules file {KNOWLEDGE_STEM}.yaml: key '{stem_key}': must be a whole number >= 0")


def build_logging_knowledge(doc: dict) -> LoggingKnowledge:
    sinks = doc.get("log_sinks") or {}
    payload = doc.get("payload") or {}
    guards = doc.get("sampling_guards") or {}
    for key, value in (("log_sinks", sinks), ("payload", payload), ("sampling_guards", guards)):
        if not isinstance(value, dict):
            raise UserError(f"rules file {KNOWLEDGE_STEM}.yaml: key '{key}': must be a mapping")
    return LoggingKnowledge(
        min_level=_level("log_sinks.min_level", sinks.get("min_level", "INFO")),
        error_path_level=_level("log_sinks.error_path_level", sinks.get("error_path_level", "CRITICAL")),
        functions={name: _level(f"log_sinks.functions.{name}", level)
                   for name, level in (sinks.get("functions") or {}).items()},
        print_modules=frozenset(sinks.get("print_is_logging_in") or ()),
        print_level_words={str(word).lower(): _level(f"log_sinks.print_levels.{word}", level)
                           for word, level in (sinks.get("print_levels") or {}).items()},
        logger_factories=frozenset(sinks.get("logger_factories") or ()),
        logger_objects=frozenset(sinks.get("logger_objects") or ()),
        logger_methods={name: _level(f"log_sinks.logger_methods.{name}", level)
                        for name, level in (sinks.get("logger_methods") or {}).items()},
        logger_names=frozenset(n for n in sinks.get("logger_names") or () if "*" not in n),
        logger_name_globs=frozenset(n for n in sinks.get("logger_names") or () if "*" in n),
        helper_names=_glob_regex(sinks.get("helper_names")),
        level_constants={name: _level(f"log_sinks.level_constants.{name}", level)
                         for name, level in (sinks.get("level_constants") or {}).items()},
        payload_attributes=frozenset(payload.get("attributes") or ()),
        metadata_attributes=frozenset(payload.get("metadata_attributes") or ()),
        metadata_functions=frozenset(payload.get("metadata_functions") or ()),
        preserving_functions=frozenset(payload.get("preserving_functions") or ()),
        preserving_methods=frozenset(payload.get("preserving_methods") or ()),
        stream_final_methods=frozenset(payload.get("stream_final_methods") or ()),
        payload_kwargs=frozenset(payload.get("kwargs") or ()),
        payload_keys=frozenset(payload.get("keys") or ()),
        chat_message_text=_attribute_paths(payload.get("chat_message_text") or {}),
        http_paths=tuple(payload.get("http_paths") or ()),
        payload_names=_glob_regex(payload.get("names")),
        names_beside_model=_glob_regex(payload.get("names_beside_model")),
        excerpt_max_chars=_count("payload.excerpt_max_chars", payload.get("excerpt_max_chars", 0)),
        metadata_name_parts=frozenset(payload.get("metadata_name_parts") or ()),
        random_functions=frozenset(guards.get("random_functions") or ()),
        sample_names=_glob_regex([*(guards.get("name_globs") or ()), *(guards.get("opt_in_name_globs") or ())]),
        modulo=bool(guards.get("modulo", True)),
        enabled_checks=frozenset(guards.get("enabled_checks") or ()),
    )
