"""Reading proxy configs safely: bounded files, no special files behind an include, YAML with line numbers.

Bounds (the same for every kind): a file larger than MAX_FILE_BYTES is not read; an include nested deeper
than MAX_INCLUDE_DEPTH is refused (a cycle is reported where it closes); a FIFO, device or socket reached
through an include or a glob is refused by name (reading one could block forever). An input named on the
command line may be a pipe (`llmdoctor proxy <(kubectl get ingress -A -o yaml)`): it is read once, bounded.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

MAX_FILE_BYTES = 16 * 2**20
MAX_INCLUDE_DEPTH = 32
MAX_YAML_DEPTH = 200
MAX_YAML_NODES = 200_000  # values once aliases are expanded (llmdoctor.limits.MAX_NODES): no billion laughs


class InputProblem(Exception):
    """An input (or a file it includes) could not be read or parsed: file, line and reason."""

    def __init__(self, path: str, reason: str, line: int | None = None) -> None:
        super().__init__(reason)
        self.path = path
        self.reason = reason
        self.line = line


def read_text(path: str, *, shown: str, named: bool = False) -> str:
    """The file's text (UTF-8, undecodable bytes replaced), or InputProblem naming `shown`.

    `named`: the user gave this path on the command line, so a pipe is read (once, bounded; a FIFO nobody
    writes to is an error at once: llmdoctor.limits.read_bounded); files reached through an include or a
    glob must be regular files.
    """
    from llmdoctor import limits

    if os.path.isdir(path):
        raise InputProblem(shown, "is a directory")
    try:
        raw = limits.read_bounded(path, MAX_FILE_BYTES, streams=named, what="proxy config")
    except limits.InputProblem as problem:
        reason = problem.reason
        if not named and reason.startswith("is ") and "regular" in reason:
            reason = f"{reason}: refusing to read it through an include"
        raise InputProblem(shown, reason) from None
    return raw.decode("utf-8", errors="replace")


# ----------------------------------------------------------------------------- YAML with line numbers


@dataclass
class YNode:
    """A YAML value with the 1-based line it starts on (and the line of the key that holds it)."""

    value: Any  # dict[str, YNode], list[YNode] or a plain scalar
    line: int
    key_line: int = 0
    style: str | None = None  # a scalar's style: "|", ">", '"', "'" or None (plain)
    fields: dict[str, YNode] = field(default_factory=dict, repr=False)

    def get(self, *keys: str | int) -> YNode | None:
        node: YNode | None = self
        for key in keys:
            if node is None:
                return None
            if isinstance(key, int):
                node = node.value[key] if isinstance(node.value, list) and -len(node.value) <= key < len(node.value) else None
            else:
                node = node.value.get(key) if isinstance(node.value, dict) else None
        return node

    def items(self) -> list[tuple[str, YNode]]:
        return list(self.value.items()) if isinstance(self.value, dict) else []

    def elements(self) -> list[YNode]:
        return list(self.value) if isinstance(self.value, list) else []

    @property
    def at(self) -> int:
        """The line to report this value at: its key's line when it has one."""
        return self.key_line or self.line

    def plain(self, depth: int = 0) -> Any:
        if depth > MAX_YAML_DEPTH:
            raise RecursionError
        if isinstance(self.value, dict):
            return {k: v.plain(depth + 1) for k, v in self.value.items()}
        if isinstance(self.value, list):
            return [v.plain(depth + 1) for v in self.value]
        return self.value

    def text_line(self, index: int) -> int:
        """The file line of line `index` (0-based) of a multi-line string value."""
        if self.style in ("|", ">"):
            return self.line + 1 + index
        return self.line + index


def load_yaml_documents(text: str, shown: str) -> list[YNode]:
    """Every document of a (multi-document) YAML or JSON text, as YNodes; InputProblem on a syntax error."""
    import yaml

    try:
        nodes = list(yaml.compose_all(text, Loader=yaml.SafeLoader))
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        problem = err.problem or err.context or "invalid YAML"
        raise InputProblem(shown, f"YAML syntax error: {problem}", mark.line + 1 if mark else None) from None
    except yaml.YAMLError as err:
        raise InputProblem(shown, f"YAML syntax error: {err}") from None
    constructor = yaml.SafeLoader("")
    out = []
    budget = [MAX_YAML_NODES]
    for node in nodes:
        if node is None:
            continue
        try:
            out.append(_convert(node, constructor, 0, shown, budget=budget))
        except RecursionError:
            raise InputProblem(shown, f"YAML nested deeper than {MAX_YAML_DEPTH} levels (or a recursive alias)",
                               node.start_mark.line + 1) from None
        except OverflowError:
            raise InputProblem(shown, f"YAML expands to more than {MAX_YAML_NODES:,} values (aliases): not a "
                                      "config llmdoctor reads", node.start_mark.line + 1) from None
    return out


def _convert(node, constructor, depth: int, shown: str, key_line: int = 0, *, budget: list[int]) -> YNode:
    import yaml

    if depth > MAX_YAML_DEPTH:
        raise RecursionError
    budget[0] -= 1
    if budget[0] < 0:
        raise OverflowError
    line = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        mapping: dict[str, YNode] = {}
        merges: list[YNode] = []
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else str(key_node.value)
            child = _convert(value_node, constructor, depth + 1, shown, key_node.start_mark.line + 1,
                             budget=budget)
            if key == "<<" and key_node.tag == "tag:yaml.org,2002:merge":
                merges.extend([child] if isinstance(child.value, dict) else child.elements())
                continue
            mapping[str(key)] = child
        for merged in merges:
            for key, value in merged.items():
                mapping.setdefault(key, value)
        return YNode(mapping, line, key_line)
    if isinstance(node, yaml.SequenceNode):
        return YNode([_convert(item, constructor, depth + 1, shown, budget=budget) for item in node.value], line,
                     key_line)
    try:
        value = constructor.construct_object(node, deep=True)
    except yaml.YAMLError:
        value = node.value
    if not isinstance(value, (str, int, float, bool, type(None))):
        value = str(node.value)
    return YNode(value, line, key_line, node.style)


# ----------------------------------------------------------------------------- JSON with line numbers


def load_json_document(text: str, shown: str) -> YNode:
    """A JSON text as YNodes (YAML cannot read the tab-indented JSON `caddy adapt --pretty` prints)."""
    import json

    try:
        json.loads(text)
    except ValueError as err:
        line = getattr(err, "lineno", None)
        raise InputProblem(shown, f"JSON syntax error: {getattr(err, 'msg', err)}", line) from None
    parser = _JsonLines(text)
    return parser.value(parser.skip(0), 0)[0]


class _JsonLines:
    _NUMBER = __import__("re").compile(r"-?(?:0|[1-9]\d*)(\.\d+)?([eE][-+]?\d+)?")

    def __init__(self, text: str) -> None:
        self.text = text
        self.newlines = [i for i, ch in enumerate(text) if ch == "\n"]

    def line(self, pos: int) -> int:
        import bisect

        return bisect.bisect_right(self.newlines, pos - 1) + 1

    def skip(self, pos: int) -> int:
        while pos < len(self.text) and self.text[pos] in " \t\r\n":
            pos += 1
        return pos

    def value(self, pos: int, depth: int, key_line: int = 0) -> tuple[YNode, int]:
        from json.decoder import scanstring

        if depth > MAX_YAML_DEPTH:
            raise InputProblem("<json>", f"JSON nested deeper than {MAX_YAML_DEPTH} levels")
        ch = self.text[pos]
        line = self.line(pos)
        if ch == "{":
            mapping: dict[str, YNode] = {}
            pos = self.skip(pos + 1)
            while self.text[pos] != "}":
                key, pos = scanstring(self.text, pos + 1)
                this_key_line = self.line(pos)
                pos = self.skip(self.skip(pos) + 1)  # past ':'
                child, pos = self.value(pos, depth + 1, this_key_line)
                mapping[key] = child
                pos = self.skip(pos)
                if self.text[pos] == ",":
                    pos = self.skip(pos + 1)
            return YNode(mapping, line, key_line), pos + 1
        if ch == "[":
            items: list[YNode] = []
            pos = self.skip(pos + 1)
            while self.text[pos] != "]":
                child, pos = self.value(pos, depth + 1)
                items.append(child)
                pos = self.skip(pos)
                if self.text[pos] == ",":
                    pos = self.skip(pos + 1)
            return YNode(items, line, key_line), pos + 1
        if ch == '"':
            text, end = scanstring(self.text, pos + 1)
            return YNode(text, line, key_line, '"'), end
        for word, val in (("true", True), ("false", False), ("null", None)):
            if self.text.startswith(word, pos):
                return YNode(val, line, key_line), pos + len(word)
        match = self._NUMBER.match(self.text, pos)
        number = match.group(0)
        val = float(number) if match.group(1) or match.group(2) else int(number)
        return YNode(val, line, key_line), match.end()
