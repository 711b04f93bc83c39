"""The name pre-filter: a rule that only reports calls named in its tables can only fire in a file that
spells out every part of one of those names.

A qualified name such as `openai.OpenAI.chat.completions.create` is assembled by the semantic model from
identifiers written in the file (import statements, attribute names, constructor calls, annotations); the
only synthesised part is the `builtins.` prefix. So for a table entry to match anywhere in a file, each of
its components must occur in the file as a whole identifier, and each literal fragment of a wildcard
component (`*Tokenizer*`) as a substring. This is stricter than "the root name occurs" (`time` is in most
files; `time` AND `sleep` in far fewer) and still never skips a file where the entry could match.

`NameIndex` groups the names by their first required word, so a file is checked against the names whose
first word it contains, not against every name (the SDK tables hold thousands).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

_words_memo: list = [None, frozenset()]  # (source, its identifiers) of the last file asked about


def identifiers(source: str) -> frozenset[str]:
    if _words_memo[0] is not source:
        _words_memo[0], _words_memo[1] = source, frozenset(IDENTIFIER.findall(source))
    return _words_memo[1]


class NameIndex:
    def __init__(self, names: Iterable[str]) -> None:
        self.by_first: dict[str, list[tuple[tuple[str, ...], tuple[str, ...]]]] = {}
        self.always = False  # some name has no literal part at all: every file passes
        self.fragments_only: list[tuple[str, ...]] = []
        self.empty = True
        self.exact_by_last: dict[str, list[tuple[str, ...]]] = {}  # names without wildcards, by last part
        self.pattern_lasts: set[str] = set()  # last parts of wildcard names (`*` may span dots: no more known)
        self.last_is_pattern = False  # some name ends in a wildcard part: any call may be to it
        for name in names:
            self.empty = False
            parts = name.split(".")
            if parts[0] == "builtins":
                parts = parts[1:]
            if not parts or "*" in parts[-1]:
                self.last_is_pattern = True
            elif "*" in name:
                self.pattern_lasts.add(parts[-1])
            else:
                self.exact_by_last.setdefault(parts[-1], []).append(tuple(parts))
            words = tuple(p for p in parts if p and "*" not in p)
            fragments = tuple(f for p in parts if "*" in p for f in p.split("*") if f)
            if words:
                self.by_first.setdefault(words[0], []).append((words[1:], fragments))
            elif fragments:
                self.fragments_only.append(fragments)
            else:
                self.always = True

    def may_match(self, source: str) -> bool:
        """True when some name could resolve in `source` (no names: no condition)."""
        return self.may_match_words(identifiers(source), source)

    def may_match_words(self, words, source: str) -> bool:
        """`may_match` for text already split into its identifiers `words`."""
        if self.empty or self.always:
            return True
        for fragments in self.fragments_only:
            if all(f in source for f in fragments):
                return True
        for first in self.by_first.keys() & words:
            for rest, fragments in self.by_first[first]:
                if all(w in words for w in rest) and all(f in source for f in fragments):
                    return True
        return False


# ---------------------------------------------------------------------------------------------------------
# Second stage: the same pre-filters, asked again about the file's code only.
#
# The literal and name pre-filters read the raw text, so a word in a comment, a docstring or any string
# literal lets a file through. Every qualified name the semantic model builds, every `async def` and every
# keyword argument a rule reads comes from code, never from a string's contents or a comment (string
# annotations are not evaluated). `code_text` lists what the code spells out, read with CPython's own parser
# (codefacts.py): every identifier the grammar holds, every dotted attribute chain (for literals such as
# `chat.completions.create`), every Python keyword (so literals such as `async` never fail here), `async def`
# once per coroutine function, and `<keyword>=None` per keyword argument given a literal None. A rule that
# passed on the raw text is kept only if it also passes on this text. A file `ast` cannot parse (other
# Python versions' syntax) keeps every rule the first stage kept.

import ast
import warnings

from llmdoctor.scan.codefacts import read_code


def python_parse_problem(source: str) -> BaseException | None:
    """Why CPython's own parser rejects `source` (SyntaxError, RecursionError, MemoryError...), or None."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as err:
        return err
    return None


def code_text(source: str) -> str | None:
    """What the code of `source` spells out (see above), or None when `ast` cannot parse it."""
    facts = read_code(source)
    return None if facts is None else facts.code_text()


# ---------------------------------------------------------------------------------------------------------
# The three stages derived from a rule's declarative spec (the YAML `prefilter:`, catalog.py `Prefilter`).
#
# `Gate.text(source)`: the text pre-filter, on the raw text (cheap: sets of identifiers and a few regexes).
# `Gate.code(code, source)`: the same conditions on `code_text` (what the code spells out): a word written only
#   in a comment or a string no longer counts; a condition about string contents (`llm_literal`) still reads
#   the raw text, the only place it can be.
# `Gate.region(region)`: whether a def or class body can hold a finding (regions.py).
# Every derived test may let through what cannot fire; none may stop what can (tests/test_scan_prefilter_spec.py
# and the fixtures/examples runs with every stage disabled check it).

WordTest = tuple[frozenset[str], tuple[str, ...], "re.Pattern | None"]


def word_test(literals) -> WordTest | None:
    """A test that `passes` when a text holds one of `literals` as a whole word (`os` is not in `post`), or
    None for no literal. Identifier literals are looked up in the text's identifiers (a set, built once per
    text): that finds every whole-word match a regex would (and a few more: `foo` in `éfoo`), so no file is
    wrongly skipped; the others (`chat.completions.create`) go through a regex, run only when one of them
    is a substring of the text."""
    literals = [lit for lit in literals if lit]
    if not literals:
        return None
    plain = frozenset(lit for lit in literals if IDENTIFIER.fullmatch(lit))
    others = tuple(lit for lit in literals if lit not in plain)
    alternatives = "|".join(
        (r"\b" if lit[0].isalnum() or lit[0] == "_" else "") + re.escape(lit)
        + (r"\b" if lit[-1].isalnum() or lit[-1] == "_" else "")
        for lit in others
    )
    return plain, others, (re.compile(alternatives) if others else None)


def passes(test: WordTest, source: str) -> bool:
    plain, others, regex = test
    if plain and not plain.isdisjoint(identifiers(source)):
        return True
    return regex is not None and any(lit in source for lit in others) and regex.search(source) is not None


def knowledge_set(catalog, name: str) -> list[str]:
    """The names of a SET: a catalog table, or one of catalog.KNOWLEDGE_SETS read from the knowledge files."""
    if "." not in name:
        return catalog.table(name).names()
    from llmdoctor.scan.rules.sdk_knowledge import client_knowledge, sdk_knowledge

    family, kind = name.split(".", 1)
    if family == "sdk":
        sdk = sdk_knowledge(catalog)
        return list({"calls": sdk.calls, "unknown_chains": sdk.unknown_chains, "receivers": sdk.receivers,
                     "imports": sorted(sdk.imports)}[kind])
    clients = client_knowledge(catalog)
    if kind == "pooled_clients":
        return [n for n, receiver in clients.receivers.items() if receiver.pooled and not receiver.is_module]
    if kind == "module_functions":
        return list(clients.module_functions)
    if kind == "timeout_clients":
        return [n for n, receiver in clients.receivers.items() if receiver.timeout]
    timeouts = [(n, dict(library.timeout)) for n, library in clients.module_functions.items()]
    timeouts += [(n, dict(receiver.timeout)) for n, receiver in clients.receivers.items()]
    if kind == "timeout_required":
        return [n for n, timeout in timeouts if timeout.get("missing_is_finding")]
    if kind == "timeout_keywords":
        return sorted({t[key] for _, t in timeouts for key in ("kwarg", "per_call_kwarg")
                       if t.get(key) and t.get("none_disables")})
    raise KeyError(name)  # catalog.py validated the name


def _literal_roots(names) -> set[str] | None:
    """The word a file must contain to use one of `names`: its first part (the last for `builtins.open`,
    written `open`); None when a name starts with a wildcard (no word is known)."""
    out = set()
    for name in names:
        root = name.split(".", 1)[0]
        if "*" in root:
            return None
        out.add(name.rsplit(".", 1)[-1] if root == "builtins" else root)
    return out


class Gate:
    """A rule's three derived tests (see above), built once per catalog by `gate`: each stage's test takes
    (the text it reads, the raw source) and a body's takes its `Region`."""

    def __init__(self, text_test, code_test, region_test) -> None:
        self._text = text_test
        self._code = code_test
        self._region = region_test

    def text(self, source: str) -> bool:
        return self._text(source, source)

    def code(self, code: str, source: str) -> bool:
        """`code`: `code_text(source)`."""
        return self._code(code, source)

    def region(self, region) -> bool:
        return self._region(region)


def _always(*_) -> bool:
    return True


OPEN_GATE = Gate(_always, _always, _always)


def gate(spec, catalog) -> Gate:
    """The tests derived from `spec.prefilter` (no spec: every file and body)."""
    if spec.prefilter is None:
        return OPEN_GATE
    found = catalog.gates.get(spec.id)
    if found is None:
        builder = _Builder(catalog, spec.prefilter.names_are)
        file = spec.prefilter.file
        found = catalog.gates[spec.id] = Gate(builder.text(file, "text"), builder.text(file, "code"),
                                         builder.region(spec.prefilter.region))
    return found


class _Builder:
    def __init__(self, catalog, names_are: str) -> None:
        self.catalog = catalog
        self.callees = names_are == "callees"

    def names(self, sets) -> list[str]:
        return [name for one in sets for name in knowledge_set(self.catalog, one)]

    def _name_index(self, sets) -> NameIndex:
        """The NameIndex of these SETs, built once per catalog (a rule's text and code stages, and rules naming
        the same SETs, share it: the SDK calls are thousands of names)."""
        key = ("prefilter.NameIndex", tuple(sets))
        found = self.catalog.memo.get(key)
        if found is None:
            found = self.catalog.memo[key] = NameIndex(self.names(sets))
        return found

    # ------------------------------------------------------------------ the text and its code

    def text(self, condition, stage: str):
        """(text, source) -> bool: every part of `condition`, cheapest first; `stage`: "text" (the raw text)
        or "code" (its code_text)."""
        from llmdoctor.scan.catalog import CHAIN_SETS

        tests = []
        for literal in condition.all:
            tests.append(_passes_on_text(word_test([literal])))
        if condition.any:
            tests.append(self._any_text(condition.any))
        if condition.names:
            words: set[str] | None = set()
            for one in condition.names:
                names = knowledge_set(self.catalog, one)
                roots = set(names) if one in CHAIN_SETS else _literal_roots(names)
                words = None if roots is None or words is None else words | roots
            if words is not None:  # one name's first word, or a chain spelled whole
                tests.append(_passes_on_text(word_test(sorted(words))))
            index = self._name_index(condition.names)
            tests.append(lambda text, source: index.may_match(text))
        if condition.one_of:
            parts = [self.text(part, stage) for part in condition.one_of]
            tests.append(lambda text, source: any(part(text, source) for part in parts))
        if condition.keyword_none:
            tests.append(self._keyword_none_text(condition.keyword_none))
        for fact in condition.facts:
            tests.append(_text_fact(fact, self.catalog, stage))
        tests = [test for test in tests if test is not _always]
        if not tests:
            return _always
        if len(tests) == 1:
            return tests[0]
        return lambda text, source: all(test(text, source) for test in tests)

    def _any_text(self, items):
        literals: set[str] = set()
        for kind, value in items:
            if kind == "word":
                literals.add(value)
                continue
            roots = _literal_roots(knowledge_set(self.catalog, value))
            if roots is None:
                return _always
            literals |= roots
        return _passes_on_text(word_test(sorted(literals)))

    def _keyword_none_text(self, items):
        keywords = sorted({k for item in items for k in ((item,) if "." not in item
                                                          else knowledge_set(self.catalog, item))})
        if not keywords:
            return lambda text, source: False
        gap = r"(?:[\s\\]|#[^\n]*)*"  # blanks, line continuations and comments inside a call's parentheses
        regex = re.compile(rf"\b(?:{'|'.join(map(re.escape, keywords))}){gap}={gap}None\b")
        return lambda text, source: regex.search(text) is not None

    # ------------------------------------------------------------------ a def or class body

    def region(self, condition):
        tests = []
        for literal in condition.all:
            tests.append(_region_literal(literal))
        if condition.any:
            tests.append(self._any_region(condition.any))
        if condition.names:
            tests.append(self._names_region(condition.names))
        if condition.one_of:
            parts = [self.region(part) for part in condition.one_of]
            tests.append(lambda region: any(part(region) for part in parts))
        if condition.keyword_none:
            keywords = {k for item in condition.keyword_none for k in ((item,) if "." not in item
                                                                       else knowledge_set(self.catalog, item))}
            tests.append(lambda region: not keywords.isdisjoint(region.words))
        if condition.stores:
            attrs = frozenset(condition.stores)
            tests.append(lambda region: not attrs.isdisjoint(region.stored_attrs))
        for fact in condition.facts:
            tests.append(_region_fact(fact, self.catalog))
        if not tests:
            return _always
        if len(tests) == 1:
            return tests[0]
        return lambda region: all(test(region) for test in tests)

    def _names_region(self, sets):
        """One of the names' parts all among the body's words (with what its names were bound to) and, for a
        call rule, a call there that can resolve to one of them (`Region.may_call`)."""
        index = self._name_index(sets)
        if not self.callees:
            return lambda region: index.may_match_words(region.words, region.text)
        from llmdoctor.scan.rules.sdk_knowledge import sdk_knowledge

        transparent = sdk_knowledge(self.catalog).transparent
        return lambda region: index.may_match_words(region.words, region.text) and \
            region.may_call(index, transparent)

    def _any_region(self, items):
        literals = []
        for kind, value in items:
            if kind == "word":
                literals.append(_region_literal(value))
                continue
            roots = _literal_roots(knowledge_set(self.catalog, value))
            if roots is None:
                return _always
            words = frozenset(roots)
            literals.append(lambda region, words=words: not words.isdisjoint(region.words))
        return lambda region: any(test(region) for test in literals)


def _passes_on_text(test: WordTest | None):
    if test is None:
        return _always
    return lambda text, source: passes(test, text)


def _region_literal(literal: str):
    """A literal in a body: each of its dotted parts among the body's words."""
    parts = frozenset(literal.split("."))
    return lambda region: parts <= region.words


# ---------------------------------------------------------------------------------------------------------
# Code facts (catalog.FACTS): conditions no list of names says, each with its form per stage.

def _text_fact(fact: str, catalog, stage: str):
    if fact == "async_def":  # the text: the word; the code (code_text): `async def` once per coroutine
        if stage == "code":
            return lambda text, source: "async def" in text
        return lambda text, source: "async" in identifiers(text)
    if fact == "llm_literal":  # string contents: never in the code text, so always the raw source
        from llmdoctor.scan.rules.logging_knowledge import logging_knowledge

        sinks = logging_knowledge(catalog)
        paths = tuple(sinks.http_paths)
        keys = tuple(q + key + q for key in sinks.payload_keys for q in ('"', "'"))
        return lambda text, source: any(p in source for p in paths) or any(k in source for k in keys)
    if fact == "logging_sink":
        return _logging_sink_text(catalog)
    raise KeyError(fact)  # catalog.py allows only the file facts here


def _region_fact(fact: str, catalog):
    if fact == "async_def":
        return lambda region: region.is_async
    from llmdoctor.scan.rules.logging_knowledge import logging_knowledge
    from llmdoctor.scan.rules.sdk_knowledge import sdk_knowledge

    sinks, sdk = logging_knowledge(catalog), sdk_knowledge(catalog)
    if fact == "logging_sink":  # a call of a sink's function or method name at a reported level
        names = {name.rsplit(".", 1)[-1] for name, level in sinks.functions.items() if _reported(sinks, level)}
        names |= {name for name, level in sinks.logger_methods.items() if _reported(sinks, level)}
        called = frozenset(names)
        helper = sinks.may_be_helper
        return lambda region: not called.isdisjoint(region.called) or any(helper(name) for name in region.called)
    if fact == "payload":
        generation = [name for name, method in sdk.calls.items() if method.generates]
        generation += [path for path, method in sdk.unknown_chains.items() if method.generates]
        index = NameIndex(generation)
        payload_name = sinks.is_payload_name
        chat = [(frozenset({name.rsplit(".", 1)[-1]}), frozenset(path[-1] for path in paths))
                for name, paths in sinks.chat_message_text.items()]  # a value of the type, read to its text
        return lambda region: index.may_match_words(region.words, region.text) or any(
            payload_name(word) for word in (*region.words, *region.strings)) or any(
            not kind.isdisjoint(region.words) and not last.isdisjoint(region.words) for kind, last in chat)
    if fact == "sdk_import_in_body":
        prefixes = tuple(sdk.imports)
        return lambda region: bool(region.imports) and _imports_sdk(region, prefixes)
    raise KeyError(fact)


def _reported(sinks, level: int | None) -> bool:
    return level is None or level >= sinks.min_level


def _logging_sink_text(catalog):
    """A sink `visit_Call` of LLM005 can accept at a reported level: `print` (with a server module imported),
    a logging function, or a logger method (`info`, `log`...) on a logger (a factory or object name, or a
    logger-like name: `logger`, `*_logger`). `import print` (a module named print, called) is not a sink."""
    from llmdoctor.scan.rules.logging_knowledge import LEVELS, logging_knowledge

    sinks = logging_knowledge(catalog)
    print_gate = None
    if "print" in sinks.functions and _reported(sinks, sinks.functions["print"] or LEVELS["INFO"]) \
            and sinks.print_modules:
        print_gate = (word_test(["print"]), word_test(sorted({m.split(".", 1)[0] for m in sinks.print_modules})))
    functions = [name for name, level in sinks.functions.items() if name != "print" and _reported(sinks, level)]
    functions_index = NameIndex(functions) if functions else None
    methods = word_test(sorted(name for name, level in sinks.logger_methods.items() if _reported(sinks, level)))
    receivers = [*sinks.logger_factories, *sinks.logger_objects]
    receivers_index = NameIndex(receivers) if receivers else None
    globbed = [*map(re.escape, sinks.logger_names),
               *("".join(r"\w*" if ch == "*" else re.escape(ch) for ch in glob) for glob in sinks.logger_name_globs)]
    logger_names = re.compile("|".join(rf"\b{item}\b" for item in sorted(set(globbed)))) if globbed else None

    helpers = sinks.helper_names

    def test(text: str, source: str) -> bool:
        if helpers is not None and any(helpers.fullmatch(word) for word in identifiers(text)):
            return True
        if print_gate is not None and all(part is not None and passes(part, text) for part in print_gate):
            return True
        if functions_index is not None and functions_index.may_match(text):
            return True
        if methods is None or not passes(methods, text):
            return False
        return (receivers_index is not None and receivers_index.may_match(text)) or (
            logger_names is not None and logger_names.search(text) is not None)

    return test


def _imports_sdk(region, prefixes: tuple[str, ...]) -> bool:
    """The body imports an SDK module while the module-level imports (bound before the visit, unless a
    module-level def or class rebinds the name) do not."""
    def sdk(name: str) -> bool:
        return any(name == p or name.startswith(p + ".") for p in prefixes)

    if not any(sdk(name) for name in region.imports):
        return False
    found = region.memo.get("module-imports-sdk")
    if found is None:
        module = region.module
        found = region.memo["module-imports-sdk"] = any(
            sdk(qualified) for local, qualified in module.imported_as.items() if local not in module.defined)
    return not found
