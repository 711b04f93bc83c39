"""The statement-local position path gives exactly what libcst's whole-module PositionProvider gives."""

from __future__ import annotations

import ast
from pathlib import Path

import libcst as cst
import pytest

from llmdoctor.scan import positions as P

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "python"

TRICKY = [
    "# header comment\n\n\n@decorator\n# between\n@other(\n    1,\n)\nasync def f():\n    x = g(1)\n",
    "import os; import time\nx = 1; y = f(x)\n\n\nclass A:\n    '''doc'''\n    def m(self):\n        return h()\n",
    "(\n    f(1)\n)\nz = [\n    g(2),\n]\n",
    "x = '\\x0c form \x0c feed'\ny = f('\\u2028')\nif a:\n    b(1)\nelif c:\n    d(2)\nelse:\n    e(3)\n",
    "try:\n    a()\nexcept E as e:\n    b()\nelse:\n    c()\nfinally:\n    d()\n",
    "x = 1\r\ny = f(2)\r\nif y:\r\n    g(3)\r\n",
    "with open(p) as f, open(q) as g:\n    h(f)\nfor i in r(3):\n    while w():\n        k(i)\n",
    "match x:\n    case [a, b]:\n        f(a)\n    case _:\n        g()\n",
    "def outer():\n    def inner(x=f(1)):\n        return [g(y) for y in x]\n    return inner\n",
    "x = '''\nmulti\nline\n''' + f(\n    1,\n)\n",
]


class _Collect(cst.CSTVisitor):
    def __init__(self) -> None:
        super().__init__()
        self.statements: list[cst.CSTNode] = []
        self.found: list[tuple[cst.CSTNode, cst.CSTNode]] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            self.statements.append(node)
        if isinstance(node, (cst.Call, cst.Name)) and self.statements:
            self.found.append((node, self.statements[-1]))
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        if isinstance(original_node, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            self.statements.pop()


def _sources():
    for path in sorted(FIXTURES.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if all(type(s) is ast.Expr and type(s.value) is ast.Constant for s in ast.parse(text).body):
            continue  # a package's __init__.py holding a docstring at most: nothing to position
        yield pytest.param(text, id=str(path.relative_to(FIXTURES)))
    for index, text in enumerate(TRICKY):
        yield pytest.param(text, id=f"tricky-{index}")


@pytest.mark.parametrize("source", list(_sources()))
def test_statement_local_positions_equal_whole_module_positions(source):
    module = cst.parse_module(source)
    collector = _Collect()
    module.visit(collector)
    wanted = collector.found
    assert wanted
    fast = P._by_statement(module, source, wanted)
    assert fast is not None, "the fast path should handle ordinary code"
    slow = P._whole_module(module, [n for pair in wanted for n in pair])
    assert fast == slow


def test_small_files_agree_with_the_whole_module_provider():
    source = "import time\nasync def f():\n    time.sleep(1)\n"
    module = cst.parse_module(source)
    collector = _Collect()
    module.visit(collector)
    whole = P._whole_module(module, [n for pair in collector.found for n in pair])
    assert P.positions_for(module, source, collector.found) == whole
    assert P.positions_for(module, source, collector.found, min_chars=10**9) == whole


def test_a_statement_that_does_not_render_as_written_falls_back_to_the_whole_module():
    source = "if a:\n    pass\nelif c(1):\n    d(2)\n"
    module = cst.parse_module(source)
    collector = _Collect()
    module.visit(collector)
    elif_call = [(n, s) for n, s in collector.found if isinstance(n, cst.Call) and n.func.value == "c"]
    assert P._by_statement(module, source, elif_call)[id(elif_call[0][0])].start_line == 3  # rendered in its if
    text = source.replace("d(2)", "d( 2)")  # not what the tree renders: every rendered line is checked
    assert P._by_statement(module, text, collector.found) is None
    assert P.positions_for(module, text, collector.found) == P._whole_module(
        module, [n for pair in collector.found for n in pair])


def test_ast_warnings_are_not_printed(recwarn):
    source = "x = '\\d'\n" * 3000 + "y = f(1)\n"
    module = cst.parse_module(source)
    statement = module.body[-1]
    call = statement.body[0].value
    spans = P.positions_for(module, source, [(call, statement)])
    assert spans[id(call)].start_line == 3001
    assert not [w for w in recwarn if issubclass(w.category, (SyntaxWarning, DeprecationWarning))]
