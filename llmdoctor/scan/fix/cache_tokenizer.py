"""LLM002 an uncached tokenizer constructor with literal arguments, inside a function -> one instance:

    @functools.lru_cache(maxsize=None)
    def _tokenizer_gpt2():
        return AutoTokenizer.from_pretrained("gpt2")

placed at module level before the statement that uses it, and the call becomes `_tokenizer_gpt2()`. The
tokenizer is still built at first use (not at import), once. Unsafe: every caller now shares one object
(a caller that adds tokens or changes padding changes it for all), held for the life of the process.
`lru_cache(maxsize=None)` is `functools.cache` on every Python version a project may still support."""

from __future__ import annotations

import ast
import re

import libcst as cst

from llmdoctor.scan.fix.base import FixContext, Fixer, FixRequest, Skip
from llmdoctor.scan.fix.literals import literal_arguments

HELPER_PREFIX = "_tokenizer"


class CacheTokenizer(Fixer):
    kind = "cache_tokenizer"
    priority = 30

    def plan(self, node: cst.Call, request: FixRequest, context: FixContext):
        if not literal_arguments(node):
            raise Skip("the arguments are not all literals: each call may build a different tokenizer; "
                       "write a cached factory taking them as parameters")
        root = _root_name(node.func)
        if root is None:
            raise Skip("the constructor is not a plain (dotted) name")
        if not context.resolves_globally(root, node):
            raise Skip(f"`{root}` is not a module-level name where the call is (imported or bound inside the "
                       "function): import it at the top of the module and run the fix again")
        top = context.top_level_statement(node)
        expression = context.module.code_for_node(node.with_changes(lpar=[], rpar=[]))
        name = _existing_helper(context.module, expression) or _planned(context, expression)
        if name is None:
            functools = context.module_name("functools", top)
            name = context.fresh_name(_helper_stem(node))
            helper = cst.parse_statement(
                f"@{functools}.lru_cache(maxsize=None)\ndef {name}():\n{context.module.default_indent}return "
                f"{expression}{context.module.default_newline}",
                config=context.module.config_for_parsing,
            )
            context.add_helper(top, helper)
            _planned_helpers(context)[expression] = name

        def rewrite(updated: cst.Call) -> cst.CSTNode:
            return cst.Call(func=cst.Name(name), args=[], lpar=updated.lpar, rpar=updated.rpar)

        return rewrite


def _root_name(func: cst.BaseExpression) -> str | None:
    while isinstance(func, cst.Attribute):
        func = func.value
    return func.value if isinstance(func, cst.Name) else None


def _helper_stem(call: cst.Call) -> str:
    for arg in call.args:
        if isinstance(arg.value, cst.SimpleString):
            try:
                text = ast.literal_eval(arg.value.value)
            except (ValueError, SyntaxError):
                continue
            if isinstance(text, bytes):
                text = text.decode("ascii", "replace")
            slug = re.sub(r"[^0-9a-z]+", "_", text.lower()).strip("_")[:40].strip("_")
            if slug:
                return f"{HELPER_PREFIX}_{slug}"
    return HELPER_PREFIX


def _planned_helpers(context: FixContext) -> dict[str, str]:
    return context.memo.setdefault("cache_tokenizer", {})


def _planned(context: FixContext, expression: str) -> str | None:
    return _planned_helpers(context).get(expression)


def _existing_helper(module: cst.Module, expression: str) -> str | None:
    """A module-level `@...lru_cache(maxsize=None)` / `@...cache` function returning exactly `expression`
    (added by an earlier fix): one instance per tokenizer, also across runs."""
    for statement in module.body:
        if (not isinstance(statement, cst.FunctionDef) or statement.params.params or not statement.decorators
                or not isinstance(statement.body, cst.IndentedBlock)):
            continue
        body = statement.body.body
        if len(body) != 1 or not isinstance(body[0], cst.SimpleStatementLine) or len(body[0].body) != 1:
            continue
        returned = body[0].body[0]
        if not isinstance(returned, cst.Return) or returned.value is None:
            continue
        if module.code_for_node(returned.value) == expression and any(
                _is_cache(d.decorator) for d in statement.decorators):
            return statement.name.value
    return None


def _is_cache(decorator: cst.BaseExpression) -> bool:
    target = decorator.func if isinstance(decorator, cst.Call) else decorator
    name = target.attr.value if isinstance(target, cst.Attribute) else getattr(target, "value", "")
    return name in ("cache", "lru_cache")
