"""The statement-local position path gives exactly what libcst's whole-module PositionProvider gives."""

from __future__ import annotations

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
        yield pytest.param(path.read_text(encoding="utf-8"), id=str(path.relative_to(FIXTURES)))
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


def test_small_files_use_the_whole_module_provider_and_agree():
    source = "import time\nasync def f():\n    time.sleep(1)\n"
    module = cst.parse_module(source)
    collector = _Collect()
    module.visit(collector)
    assert P.positions_for(module, source, collector.found) == P.positions_for(
        module, source, collector.found, min_chars=0)


def test_ast_warnings_are_not_printed(recwarn):
    source = "x = '\\d'\n" * 3000 + "y = f(1)\n"
    module = cst.parse_module(source)
    statement = module.body[-1]
    call = statement.body[0].value
    spans = P.positions_for(module, source, [(call, statement)])
    assert spans[id(call)].start_line == 3001
    assert not [w for w in recwarn if issubclass(w.category, (SyntaxWarning, DeprecationWarning))]
