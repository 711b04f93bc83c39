"""The per-file index of the project model (llmdoctor/scan/project/index.py): what it reads from a module, and
that its cached JSON form gives the same index back."""

from __future__ import annotations

import ast
import json
import textwrap

from llmdoctor.scan.project.index import ASSIGNED, ModuleIndex, index_module

SOURCE = textwrap.dedent("""
    import os
    import requests
    _clients = {}
    HERE = os.path.dirname(__file__)

    def make_client(key):
        return requests.Session()

    def speak(text):
        return text

    def fetch(key, status=None, synthesize=False):
        client = _clients.get(key)
        if not client:
            client = make_client(key)
            _clients[key] = client
        if not status:
            status = requests.get("http://status", timeout=5)
        if synthesize:
            speak(status)
        with open(os.path.join(HERE, "task.json")) as f:
            return f.read()
    """)


def calls(index: ModuleIndex, function: str) -> dict[str, object]:
    (found,) = [f for f in index.functions if f.key == function]
    return {call.text: call for call in found.calls}


def test_what_the_index_reads_of_each_call():
    index = index_module(SOURCE, ast.parse(SOURCE))
    by_text = calls(index, "fetch")
    assert by_text["make_client"].lazy and by_text["make_client"].memo  # kept in a module-level dict
    assert not by_text["requests.get"].lazy and not by_text["requests.get"].memo  # a parameter's guard: per call
    assert by_text["speak"].guards == ("synthesize",)
    assert by_text["open"].shipped and not by_text["requests.get"].shipped


def test_the_cached_form_gives_the_same_index():
    index = index_module(SOURCE, ast.parse(SOURCE))
    again = ModuleIndex.from_json(json.loads(json.dumps(index.to_json())))
    assert calls(again, "fetch") == calls(index, "fetch")
    assert again.to_json() == index.to_json()


def test_a_callable_assigned_to_an_object_s_attribute_is_an_assigned_call_kept_in_the_cached_form():
    source = textwrap.dedent("""
        from telegram.ext import Application

        async def on_start(application):
            pass

        def run():
            application = Application.builder().token("T").build()
            application.post_init = on_start
            application.retries = 3
            application.client = make_client()
        """)
    index = index_module(source, ast.parse(source))
    assigned = [c for c in calls(index, "run").values() if c.kind == ASSIGNED]
    assert [(c.text, c.args) for c in assigned] == [("application.post_init", (("0", assigned[0].args[0][1]),))]
    again = ModuleIndex.from_json(json.loads(json.dumps(index.to_json())))
    assert again.to_json() == index.to_json()


def test_a_container_literal_is_one_of_its_elements_and_a_loop_variable_an_element():
    source = textwrap.dedent("""
        import httpx
        from .providers import Github, Google, P
        providers = [Github(), Google(), Github()]
        by_name = {"a": Github, "b": httpx.Client()}
        names = ["github", "google"]
        table = [Github() for _ in range(3)]
        many = [""" + ", ".join(f"P(n={n})" for n in range(33)) + """]

        def pick(name):
            for p in providers:
                return p

        def each():
            for key, value in by_name.items():
                value.get("x")
            for position, item in enumerate(providers):
                item.run()
            by_name[0].get("y")
        """)
    index = index_module(source, ast.parse(source))
    assert index.bindings["providers"] == "A:{R1:providers.Github()|R1:providers.Google()}"
    assert index.bindings["by_name"] == "A:{I:httpx.Client()|R1:providers.Github}"
    assert index.bindings["names"] is None  # strings: nothing to resolve
    assert index.bindings["table"] == "A:{R1:providers.Github()}"  # a comprehension of calls: their results
    assert index.bindings["many"] is None  # more than MAX_MEMBERS elements: data, not a table of implementations
    (pick,) = [f for f in index.functions if f.key == "pick"]
    assert pick.returns == "A:{R1:providers.Github()|R1:providers.Google()}[]"
    refs = {call.line: call.ref for call in next(f for f in index.functions if f.key == "each").calls}
    assert refs[16] == "A:{I:httpx.Client()|R1:providers.Github}[].get"
    assert refs[18] == "A:{R1:providers.Github()|R1:providers.Google()}[].run"
    assert refs[19] == "A:{I:httpx.Client()|R1:providers.Github}[0].get"


def test_a_method_without_a_body_of_its_own_is_abstract():
    source = textwrap.dedent('''
        import abc

        class Base:
            @abc.abstractmethod
            def decorated(self): return 1
            def ellipsis(self): ...
            def passes(self):
                """Subclasses say."""
                pass
            def raises(self): raise NotImplementedError("subclass")
            def docstring_only(self):
                """Subclasses say."""
            def concrete(self): return 1
            def raises_other(self): raise ValueError()

        def module_function(): ...
        ''')
    index = index_module(source, ast.parse(source))
    abstract = {f.key: f.abstract for f in index.functions if f.key}  # "": the module level
    assert abstract == {"Base.decorated": True, "Base.ellipsis": True, "Base.passes": True, "Base.raises": True,
                        "Base.docstring_only": True, "Base.concrete": False, "Base.raises_other": False,
                        "module_function": False}


def test_a_returned_tuple_is_read_item_by_item_and_a_none_says_nothing_of_its_item():
    """`tool, params, error = registry.prepare_call(...)` (holdout22's nanobot tool registry): each returned tuple
    agrees on the tool where it gives one; an item the returns disagree on is unknown, the others stay known."""
    source = textwrap.dedent('''
        class Registry:
            def __init__(self):
                self.tools: dict[str, Tool] = {}

            def prepare_call(self, name, params):
                tool = self.tools.get(name)
                if not tool:
                    return None, params, "not found"
                cast = tool.cast(params)
                if cast is None:
                    return tool, params, "invalid"
                return tool, cast, None

            def pair(self):
                if self.tools:
                    return 1, None
                return None, None
        ''')
    index = index_module(source, ast.parse(source))
    functions = {f.key: f for f in index.functions}
    assert functions["Registry.prepare_call"].returns_items == ["S:tools.get()", None, None]
    assert functions["Registry.pair"].returns_items == [None, None]
    again = ModuleIndex.from_json(json.loads(json.dumps(index.to_json())))
    assert again.to_json() == index.to_json()


def test_an_attribute_annotated_in_a_method_has_the_declared_type():
    """`self._collection: chromadb.Collection | None = None` in `__init__`, set elsewhere from a client call
    (holdout22's agent-brain-rag): the annotation declares the attribute's type, as a class-level one does."""
    source = textwrap.dedent('''
        import chromadb

        class Store:
            def __init__(self):
                self._client = chromadb.PersistentClient(path="index")
                self._collection: chromadb.Collection | None = None

            def initialize(self):
                self._collection = self._client.get_or_create_collection("docs")
        ''')
    index = index_module(source, ast.parse(source))
    (store,) = index.classes
    assert store.attributes["_collection"] == "I:chromadb.Collection()"  # an instance of it


def test_a_property_getter_is_an_accessor_and_its_setter_is_not_the_method():
    source = textwrap.dedent('''
        import functools

        class Session:
            @property
            def history(self):
                return self.transcript.read()

            @history.setter
            def history(self, value):
                self.transcript.write(value)

            @functools.cached_property
            def client(self):
                return make_client()

            def save(self):
                pass
        ''')
    index = index_module(source, ast.parse(source))
    accessors = {f.key: f.accessor for f in index.functions if f.key}
    assert accessors == {"Session.history": True, "Session.history#2": False, "Session.client": True,
                         "Session.save": False}
    (session,) = index.classes
    assert session.methods["history"] == "Session.history"  # the getter, not the setter
    again = ModuleIndex.from_json(json.loads(json.dumps(index.to_json())))
    assert again.to_json() == index.to_json()


def test_a_cached_index_with_a_field_of_the_wrong_type_is_refused():
    """The fields later rounds added to the cached index (`Call.answers`, `Function.accessor`, `runs_coroutine`,
    `callables`): an edited or corrupt cache entry holding another type is a ValueError (the cache then re-reads
    the file)."""
    import pytest

    source = "import asyncio\n\ndef run(coro):\n    return asyncio.run(coro)\n\nclass A:\n    @property\n" \
             "    def p(self):\n        return run(None)\n"
    good = index_module(source, ast.parse(source)).to_json()
    assert ModuleIndex.from_json(json.loads(json.dumps(good))).to_json() == good
    for function, position, bad in [(1, -2, "coro"), (2, -3, "yes"), (2, 8, [[*good["f"][2][8][0][:-1], "no"]]),
                                    (1, -1, {"call": [3]}), (1, -1, ["call"])]:
        data = json.loads(json.dumps(good))
        data["f"][function][position] = bad
        with pytest.raises((ValueError, TypeError)):
            ModuleIndex.from_json(data)



def test_a_module_calls_a_model_by_its_imports_anywhere_or_a_model_api_path():
    """`ModuleIndex.calls_model` (what makes the program one that calls a model, for LLM005): an import of an
    LLM SDK or framework at any depth, or a model API's HTTP path in the text; a mention in a docstring, a
    module whose name only starts like one, or a relative import is none."""
    from llmdoctor.scan.catalog import load_catalog
    from llmdoctor.scan.project.knowledge import index_interest

    interest = index_interest(load_catalog())

    def calls_model(source: str) -> bool:
        source = textwrap.dedent(source)
        return index_module(source, ast.parse(source), interest).calls_model

    assert calls_model("import os, openai\n")
    assert calls_model("def ask():\n    from google import genai\n    return genai\n")
    assert calls_model("from langchain_core.messages import HumanMessage\n")
    assert calls_model('URL = "http://vllm:8000/v1/chat/completions"\n')
    assert not calls_model('"""Call it as: import openai"""\nimport openai_utils\nfrom . import openai\n')
    assert not calls_model("import requests\n")
    assert not index_module("import openai\n", ast.parse("import openai\n")).calls_model  # no knowledge given
