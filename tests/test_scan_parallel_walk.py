"""fastwalk.walk visits the same nodes, in the same order, as libcst's own `node.visit`."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from llmdoctor.scan import fastwalk

REPO = Path(__file__).resolve().parents[1]
SOURCES = sorted((REPO / "fixtures" / "python").rglob("*.py")) + sorted((REPO / "llmdoctor").rglob("*.py"))

TRICKY = '''
@decorator(arg)
async def f(a, /, b: int = 1, *args, c, d=2, **kw) -> "T":
    global g
    x = [i async for i in y if await i] if (z := w) else {**m, "k": v}
    async with a as (b, c), d:
        yield from e[1:2, ::3]
    lambda q=1, *r, s, **t: (q, r)
    match cmd:
        case Point(x=0, y=[1, *rest]) | {"k": _, **others} if rest:
            pass
    try:
        del a.b, c[d]
    except* (ValueError, TypeError) as err:
        raise Exception("x") from err
    finally:
        print(f"{x!r:>{width}} {y=}", sep="", end="\\n")  # comment
    return not a < b <= c is not d in e and -f ** ~g
'''


class Recorder(cst.CSTVisitor):
    def __init__(self) -> None:
        super().__init__()
        self.events: list[tuple[str, int]] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        self.events.append(("visit", id(node)))
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        self.events.append(("leave", id(original_node)))


def libcst_events(module: cst.Module) -> list[tuple[str, int]]:
    recorder = Recorder()
    module.visit(recorder)
    return recorder.events


def walk_events(module: cst.Module, wanted) -> list[tuple[str, int]]:
    events: list[tuple[str, int]] = []
    fastwalk.walk(module, lambda n: events.append(("visit", id(n))), lambda n: events.append(("leave", id(n))),
                  wanted=wanted)
    return events


ALL_TYPES = frozenset(cls.__name__ for cls in vars(cst).values() if isinstance(cls, type))


@pytest.mark.parametrize("path", SOURCES[:60], ids=lambda p: str(p.relative_to(REPO)))
def test_same_events_as_libcst_on_real_files(path: Path) -> None:
    module = cst.parse_module(path.read_text(encoding="utf-8", errors="replace"))
    assert walk_events(module, ALL_TYPES) == libcst_events(module)


def test_same_events_on_every_syntax_form() -> None:
    module = cst.parse_module(TRICKY)
    assert walk_events(module, ALL_TYPES) == libcst_events(module)


def test_trivia_is_skipped_unless_wanted() -> None:
    module = cst.parse_module(TRICKY)
    full = libcst_events(module)
    pruned = walk_events(module, frozenset())
    by_id = {}

    class Types(cst.CSTVisitor):
        def on_visit(self, node):
            by_id[id(node)] = node
            return True

    module.visit(Types())
    trivia = {i for i, n in by_id.items() if type(n).__module__ in fastwalk.TRIVIA_MODULES}
    assert trivia, "the sample has whitespace, comments and operators"
    # exactly the non-trivia events, in the same order (a trivia subtree holds only trivia)
    assert pruned == [e for e in full if e[1] not in trivia]
    comments = walk_events(module, frozenset({"Comment"}))
    assert any(type(by_id[i]).__name__ == "Comment" for _, i in comments)


def test_deep_nesting_does_not_recurse() -> None:
    source = "x = " + "(" * 150 + "1" + ")" * 150 + "\n"
    module = cst.parse_module(source)
    count = []
    fastwalk.walk(module, count.append, lambda n: None)
    assert len(count) > 150


@pytest.mark.parametrize("path", SOURCES[:30], ids=lambda p: str(p.relative_to(REPO)))
def test_provider_positions_equal_the_metadata_wrapper(path: Path) -> None:
    from libcst.metadata import MetadataWrapper, PositionProvider

    from llmdoctor.scan.positions import provider_positions

    module = cst.parse_module(path.read_text(encoding="utf-8", errors="replace"))
    assert dict(provider_positions(module)) == dict(MetadataWrapper(module, unsafe_skip_copy=True)
                                                    .resolve(PositionProvider))
