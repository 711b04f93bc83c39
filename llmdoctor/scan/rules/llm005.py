"""LLM005: prompts or completions logged at INFO or above on every call, unsampled.

Knowledge: rules/sdk-logging.yaml (sinks, payload vs metadata, sampling guards) and the SDK tables
(generation calls, their payload_kwargs, `imports`); see docs/sdk-knowledge.md. What an expression carries,
whether the code runs under a sampling guard or in an error branch, is asked of `PayloadFlowRule`
(payloadflow.py, on payload.py and the semantic model's per-def facts); this module decides what a sink is,
at which level it logs, and reports an unsampled payload logged at INFO or above.
"""

from __future__ import annotations

import libcst as cst

from llmdoctor.scan.functionfacts import first_word
from llmdoctor.scan.project.link import ERROR_PATH, IN_MODEL_PROGRAM, LEVEL_NAMES, LOGGED_THROUGH
from llmdoctor.scan.rules.logging_knowledge import NOT_LOGGED_KEYWORDS
from llmdoctor.scan.rules.payload import LEVELS, Source, attribute_chain
from llmdoctor.scan.rules.payloadflow import PayloadFlowRule


class UnsampledPayloadLogging(PayloadFlowRule):
    code = "LLM005"

    def visit_Call(self, node: cst.Call) -> None:
        super().visit_Call(node)  # `parts.append(answer)`: `parts` carries it from here on
        sink = self._sink_of(node)
        if sink is None:
            self._handed_to_helper(node)
            return
        shown, level, skip_first = sink
        if level < self.knowledge.min_level or self.under_sampling_guard():
            return
        if level >= self.knowledge.error_path_level and self.in_branch():
            return  # `if not reply: logger.warning(...); raise`: logged when something went wrong
        args = [arg for arg in node.args if not arg.star
                and not (arg.keyword is not None and arg.keyword.value in NOT_LOGGED_KEYWORDS)]
        if skip_first and args and args[0].keyword is None:
            args = args[1:]
        values = [arg.value for arg in args]
        if shown != "print" and len(values) > 1 and args[0].keyword is None:  # logging's lazy `%` arguments
            values = values[:1] + self.evaluator.formatted_arguments(values[0], values[1:])
        for value_expr in values:
            value = self.evaluate(value_expr)
            if isinstance(value, Source) and not value.stream:
                self._report(node, shown, level, value_expr, value)
                return

    def _handed_to_helper(self, node: cst.Call) -> None:
        """`log.color_print(f"<query> {query} </query>")`: a payload handed to a function of the program. A
        candidate the project model keeps where that function logs the parameter it lands in (Function.logs)."""
        func = node.func
        name = func.value if isinstance(func, cst.Name) else func.attr.value if isinstance(func, cst.Attribute) \
            else None
        if name is None or not node.args or not self.knowledge.may_be_helper(name) or self.under_sampling_guard():
            return
        callee = self.context.callee_name(node)
        if callee is not None and (callee.startswith("builtins.") or callee in self.knowledge.functions):
            return
        position = 0
        for arg in node.args:
            if arg.star:
                return  # `*args`: which parameter each lands in is unknown from here on
            if arg.keyword is not None and arg.keyword.value in NOT_LOGGED_KEYWORDS:
                continue
            where = arg.keyword.value if arg.keyword is not None else str(position)
            position += arg.keyword is None
            value = self.evaluate(arg.value)
            if isinstance(value, Source) and not value.stream:
                shown = _shown(node.func, callee)
                text = _brief(_source_text(value, arg.value))
                self.report(
                    node,
                    f"`{shown}()` is handed `{text}`, which carries {value.what}, and logs it unsampled. Prompts "
                    "and completions copy user data into every log sink, ~16 kB per line for a 4,000-token prompt",
                    fix="hand the helper metadata instead (`len(...)`, ids, `.usage` token counts, latency), or log "
                        "the text only under a sampling guard (`if random.random() < SAMPLE_RATE:`) or redacted",
                    sink=shown, payload=text,
                    **{LOGGED_THROUGH: where, **({ERROR_PATH: True} if self.in_branch() else {}),
                       **({} if self.llm_module() else {IN_MODEL_PROGRAM: True})},
                )
                return

    def _report(self, node: cst.Call, shown: str, level: int, expr: cst.BaseExpression, source: Source) -> None:
        text = _brief(_source_text(source, expr))
        level_name = LEVEL_NAMES.get(level, str(level))
        where = {} if self.llm_module() else {IN_MODEL_PROGRAM: True}
        self.report(
            node,
            f"`{shown}()` logs `{text}` at {level_name}, unsampled: it carries {source.what}. Prompts and "
            "completions copy user data into every log sink, ~16 kB per line for a 4,000-token prompt",
            fix="log metadata instead (`len(...)`, ids, `.usage` token counts, latency); log the text only under "
                "a sampling guard (`if random.random() < SAMPLE_RATE:`) or redacted",
            sink=shown,
            level=level_name,
            payload=text,
            **where,
        )

    def _sink_of(self, node: cst.Call) -> tuple[str, int, bool] | None:
        """(shown name, level, level is the first argument) of a logging call at a known level, else None."""
        sinks = self.knowledge
        func = node.func
        callee = self.context.callee_name(node)
        if callee is not None:
            if callee == "builtins.print":
                if "print" in sinks.functions and self.imports_at_runtime(sinks.print_modules):
                    return "print", self._print_level() or sinks.functions["print"] or LEVELS["INFO"], False
                return None
            if callee in sinks.functions:
                return self._leveled(callee, sinks.functions[callee], node)
            owner, _, method = callee.rpartition(".")
            if method in sinks.logger_methods and (
                    owner in sinks.logger_factories or owner in sinks.logger_objects
                    or (isinstance(func, cst.Attribute) and sinks.is_logger_name(owner.rpartition(".")[2]))):
                return self._leveled(_shown(func, callee), sinks.logger_methods[method], node)  # `from app.log import logger`
            return None
        if not isinstance(func, cst.Attribute) or func.attr.value not in sinks.logger_methods:
            return None
        receiver = func.value
        name = receiver.value if isinstance(receiver, cst.Name) else (
            receiver.attr.value if isinstance(receiver, cst.Attribute) and isinstance(receiver.value, cst.Name)
            and receiver.value.value in ("self", "cls") else None)
        if name is not None and sinks.is_logger_name(name):
            return self._leveled(_shown(func, callee), sinks.logger_methods[func.attr.value], node)
        return None

    def _print_level(self) -> int | None:
        """The level a block's prints announce (`print("ERROR. NO CHUNKS SENT. TRYING AGAIN.")`, then
        `print("Messages:", messages)`): the first word of a print's literal, in this block up to this line."""
        words = self.knowledge.print_level_words
        block = self.current_block
        if not words or not isinstance(block, cst.IndentedBlock):
            return None
        statements = self.context.statements
        for statement in block.body:
            if isinstance(statement, cst.SimpleStatementLine):
                for small in statement.body:
                    call = small.value if isinstance(small, cst.Expr) else None
                    if isinstance(call, cst.Call) and isinstance(call.func, cst.Name) and call.func.value == "print" \
                            and call.args and call.args[0].keyword is None:
                        word = first_word(call.args[0].value)
                        if word in words:
                            return words[word]
            if any(statement is current for current in statements):
                break
        return None

    def _leveled(self, shown: str, level: int | None, node: cst.Call) -> tuple[str, int, bool] | None:
        if level is not None:
            return shown, level, False
        first = node.args[0] if node.args and node.args[0].keyword is None and not node.args[0].star else None
        if first is None:
            return None
        if isinstance(first.value, cst.Integer):
            return shown, int(first.value.value, 0), True
        constant = self.context.qualified_name(first.value)
        if constant in self.knowledge.level_constants:
            return shown, self.knowledge.level_constants[constant], True
        return None  # a level we cannot read: no guess


def _source_text(source: Source, expr: cst.BaseExpression) -> str:
    return " ".join(cst.Module([]).code_for_node(source.node or expr).split())


def _brief(text: str) -> str:
    return text if len(text) <= 60 else text[:57] + "..."


def _shown(func: cst.BaseExpression, callee: str | None) -> str:
    chain = attribute_chain(func)
    return ".".join(chain) if chain else (callee or "<logger>")
