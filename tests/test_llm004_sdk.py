"""LLM004's SDK part: generation calls on sync LLM SDK clients inside `async def`, read from the SDK index
(`sdk_knowledge(catalog)`, rules/sdk-*.yaml), with the async twin as the fix."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from llmdoctor.scan.catalog import load_catalog
from llmdoctor.scan.engine import analyze_source
from llmdoctor.scan.settings import ScanConfig

ROOT = Path(__file__).resolve().parents[1]
CATALOG = load_catalog()
ONLY_LLM004 = ScanConfig(select=("LLM004",))


def findings(source: str, catalog=CATALOG):
    result = analyze_source("t.py", textwrap.dedent(source).encode(), catalog, ONLY_LLM004)
    assert result.errors == []
    return [f for f in result.findings if f.rule == "LLM004"]


def lines(source: str, catalog=CATALOG) -> list[int]:
    return [f.line for f in findings(source, catalog)]


@pytest.mark.parametrize("source, shown, receiver, twin", [
    ("""
     from openai import OpenAI
     client = OpenAI()
     async def f(q):
         return client.chat.completions.create(model="m", messages=[])
     """, "client.chat.completions.create", "openai.OpenAI", "openai.AsyncOpenAI().chat.completions.create"),
    ("""
     import openai
     async def f(q):
         return openai.chat.completions.create(model="m", messages=[])
     """, "openai.chat.completions.create", "openai", "openai.AsyncOpenAI().chat.completions.create"),
    ("""
     from anthropic import Anthropic as Claude
     class Bot:
         def __init__(self):
             self.claude = Claude()
         async def reply(self, q):
             return self.claude.messages.create(model="m", max_tokens=512, messages=[])
     """, "self.claude.messages.create", "anthropic.Anthropic", "anthropic.AsyncAnthropic().messages.create"),
    ("""
     import litellm
     async def f(messages):
         return litellm.completion(model="gpt-4o-mini", messages=messages)
     """, "litellm.completion", "litellm", "litellm.acompletion"),
    ("""
     from litellm import completion
     async def f(messages):
         return completion("gpt-4o-mini", messages)
     """, "completion", "litellm", "litellm.acompletion"),
    ("""
     from litellm import Router
     router = Router(model_list=[])
     async def f(messages):
         return router.completion(model="default", messages=messages)
     """, "router.completion", "litellm.Router", "router.acompletion"),
    ("""
     import ollama
     async def f(prompt):
         return ollama.chat(model="llama3.2", messages=[])
     """, "ollama.chat", "ollama", "ollama.AsyncClient().chat"),
    ("""
     from huggingface_hub import InferenceClient
     hf = InferenceClient()
     async def f(prompt):
         return hf.chat_completion(messages=[])
     """, "hf.chat_completion", "huggingface_hub.InferenceClient",
     "huggingface_hub.AsyncInferenceClient().chat_completion"),
    ("""
     from google import genai
     client = genai.Client()
     async def f(text):
         return client.models.generate_content(model="gemini-2.5-flash", contents=text)
     """, "client.models.generate_content", "google.genai.Client", "client.aio.models.generate_content"),
    ("""
     from mistralai.client import Mistral
     mistral = Mistral(api_key="k")
     async def f(q):
         return mistral.chat.complete(model="m", messages=[])
     """, "mistral.chat.complete", "mistralai.client.Mistral", "mistral.chat.complete_async"),
    ("""
     import groq
     async def f(q):
         with groq.Groq() as client:
             return client.chat.completions.create(model="m", messages=[])
     """, "client.chat.completions.create", "groq.Groq", "groq.AsyncGroq().chat.completions.create"),
])
def test_sync_generation_in_async_def_names_the_async_twin(source, shown, receiver, twin):
    [finding] = findings(source)
    assert finding.message.startswith(f"`{shown}()` is a call on the sync `{receiver}` ")
    assert "blocks the event loop" in finding.message
    assert f"`await {twin}(...)`" in finding.fix


def test_streaming_and_structured_calls_block_too():
    source = """
        from openai import OpenAI
        client = OpenAI()
        async def f(q):
            with client.chat.completions.stream(model="m", messages=[]) as stream:
                pass
            a = client.chat.completions.parse(model="m", messages=[], response_format=dict)
            b = client.chat.completions.create(model="m", messages=[], stream=True)
            c = client.chat.completions.create(model="m", messages=[], max_tokens=1)
            client.chat.completions.create(model="m", messages=[])
        """
    assert lines(source) == [5, 7, 8, 9, 10]  # LLM001's exemptions (stream, parse, probes) do not apply


def test_every_request_method_of_a_sync_client_blocks_not_only_generation():
    found = findings("""
        import litellm
        from openai import OpenAI
        client = OpenAI()
        async def f(texts):
            client.embeddings.create(model="e", input=texts)
            client.moderations.create(input=texts)
            client.models.list()
            return litellm.embedding(model="e", input=texts)
        """)
    assert [f.line for f in found] == [6, 7, 8, 9]
    assert "for the whole API request" in found[0].message
    assert found[0].fix.startswith("use `await openai.AsyncOpenAI().embeddings.create(...)`")
    assert found[3].fix.startswith("use `await litellm.aembedding(...)`")


def test_batch_job_and_file_operations_of_a_sync_client_block():
    # a batch gateway polling, fetching and cancelling jobs from async handlers (airlock-llm's backends);
    # methods read from the mistralai 3.7.0 and google-genai 3.6.1 wheels (rules/sdk-*.yaml `verified`)
    found = findings("""
        from google import genai
        from mistralai.client import Mistral
        mistral = Mistral(api_key="k")
        gemini = genai.Client()
        async def poll(job_id):
            job = mistral.batch.jobs.get(job_id=job_id)
            mistral.files.download(file_id=job.output_file)
            mistral.batch.jobs.cancel(job_id=job_id)
            batch = gemini.batches.get(name=job_id)
            return gemini.files.download(file=batch.dest.file_name)
        """)
    assert [f.line for f in found] == [7, 8, 9, 10, 11]


def test_sync_object_storage_clients_block_but_building_references_and_signing_urls_do_not():
    # agent-framework-lib's MinIO and GCS file backends; methods read from the minio 7.2.20 and
    # google-cloud-storage 3.17.2 wheels (rules/llm004.yaml)
    found = findings("""
        from google.cloud import storage
        from minio import Minio
        minio = Minio("minio:9000", access_key="a", secret_key="b")
        gcs = storage.Client()
        async def store(name, data):
            minio.put_object("files", name, data, len(data))
            minio.stat_object("files", name)
            blob = gcs.bucket("files").blob(name)
            blob.upload_from_string(data)
            gcs.get_bucket("files").blob(name).download_as_bytes()
            objects = minio.list_objects("files")  # a generator: its requests run as it is iterated
            return minio.presigned_get_object("files", name)  # signed locally
        """)
    assert [(f.line, f.extra["call"]) for f in found] == [
        (7, "minio.Minio.put_object"), (8, "minio.Minio.stat_object"),
        (10, "google.cloud.storage.Client.bucket.blob.upload_from_string"),
        (11, "google.cloud.storage.Client.get_bucket"),  # a request of its own (`bucket()` is a reference)
        (11, "google.cloud.storage.Client.get_bucket.blob.download_as_bytes")]


def test_duckdb_runs_a_query_when_executed_and_a_relation_when_fetched():
    # agentic-code-editor's vector store (`self.conn = duckdb.connect(path)`); names read from the duckdb 1.1.3
    # wheel's stubs (rules/llm004.yaml)
    found = findings("""
        import duckdb
        class VectorDB:
            def __init__(self, path):
                self.conn = duckdb.connect(path)
            async def search(self, query):
                rows = self.conn.execute("SELECT * FROM docs WHERE text LIKE ?", [query]).fetchall()
                relation = self.conn.sql("SELECT count(*) FROM docs")  # lazy: it runs when fetched
                return duckdb.execute("SELECT 1"), rows, relation
        """)
    assert [(f.line, f.extra["call"]) for f in found] == [(7, "duckdb.connect.execute"), (9, "duckdb.execute")]


def test_a_langchain_model_invoked_synchronously_blocks_until_the_whole_answer():
    # langchain-core 1.8.4 `BaseChatModel.invoke` runs the request in the calling thread; `ainvoke` is its twin
    found = findings("""
        from langchain_anthropic import ChatAnthropic
        from langchain_openai import ChatOpenAI
        llm = ChatOpenAI(model="gpt-4o-mini")
        class Agent:
            def __init__(self):
                self.model = ChatAnthropic(model="claude-sonnet-4-5")
            async def answer(self, question):
                first = llm.invoke(question)
                many = llm.batch([question, question])
                second = await llm.ainvoke(question)
                return self.model.invoke(question), first, many, second
        """)
    assert [(f.line, f.extra["call"]) for f in found] == [
        (9, "langchain_openai.ChatOpenAI.invoke"), (10, "langchain_openai.ChatOpenAI.batch"),
        (12, "langchain_anthropic.ChatAnthropic.invoke")]
    assert "ainvoke" in found[0].fix


def test_an_atomic_save_through_a_temporary_file_writes_on_the_loop():
    # ductor's `atomic_text_save` (mkstemp, os.fdopen, write, replace), a prompt written to a NamedTemporaryFile
    # per turn: CPython 3.11 tempfile creates and opens the file, os.fdopen is io.open on a descriptor
    found = findings("""
        import os
        import tempfile
        async def save(path, text):
            fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path))
            with os.fdopen(fd, "w") as f:
                f.write(text)
            os.replace(tmp, path)
        async def prompt_file(text):
            with tempfile.NamedTemporaryFile("w", suffix=".md", delete=False) as f:
                f.write(text)
            return f.name
        """)
    assert [(f.line, f.extra["call"]) for f in found] == [
        (5, "tempfile.mkstemp"), (6, "os.fdopen"), (10, "tempfile.NamedTemporaryFile")]


def test_a_path_built_with_slash_or_a_path_method_is_a_path():
    # folderbot's uploads (`self.config.root_folder / ".folderbot" / "uploads"`), gpt-researcher's report store
    # (`self._path.with_suffix(...)`): rules/common.yaml `library_results`, from CPython's pathlib
    found = findings("""
        from pathlib import Path
        BASE = Path("/srv")
        class Store:
            def __init__(self, path: Path):
                self._path = path
            async def save(self, data: bytes, name: str):
                (BASE / "uploads" / name).write_bytes(data)
                uploads = self._path.parent / "uploads"
                uploads.joinpath(name).write_bytes(data)
                self._path.with_suffix(".tmp").write_text("x")
                Path.home().joinpath(".app", name).read_text()
                total = len(data) / 2
                return total.hex(), str(BASE / name).upper()
        """)
    assert [(f.line, f.extra["call"]) for f in found] == [
        (8, "pathlib.Path.write_bytes"), (10, "pathlib.Path.write_bytes"), (11, "pathlib.Path.write_text"),
        (12, "pathlib.Path.read_text")]


def test_transparent_spellings_resolve():
    source = """
        from openai import OpenAI
        client = OpenAI()
        async def f(q):
            a = client.with_options(timeout=5).chat.completions.create(model="m", messages=[])
            b = client.chat.completions.with_raw_response.create(model="m", messages=[])
        """
    assert lines(source) == [5, 6]


def test_genai_chat_from_the_sync_client_factory():
    source = """
        from google import genai
        client = genai.Client()
        async def f(q):
            chat = client.chats.create(model="gemini-2.5-flash")
            achat = client.aio.chats.create(model="gemini-2.5-flash")
            await achat.send_message(q)
            return chat.send_message(q)
        """
    assert lines(source) == [8]


@pytest.mark.parametrize("source", [
    # async clients and async methods, awaited
    """
    from openai import AsyncOpenAI
    client = AsyncOpenAI()
    async def f(q):
        return await client.chat.completions.create(model="m", messages=[])
    """,
    """
    import litellm
    async def f(q):
        return await litellm.acompletion(model="m", messages=[])
    """,
    """
    from google import genai
    client = genai.Client()
    async def f(q):
        return await client.aio.models.generate_content(model="m", contents=q)
    """,
    # sync code, module level, nested def and lambda
    """
    from openai import OpenAI
    client = OpenAI()
    reply = client.chat.completions.create(model="m", messages=[])
    def f(q):
        return client.chat.completions.create(model="m", messages=[])
    async def g(q):
        def work():
            return client.chat.completions.create(model="m", messages=[])
        return work
    """,
    # offloaded to a worker thread
    """
    import asyncio, functools
    from anthropic import Anthropic
    claude = Anthropic()
    async def f(q):
        a = await asyncio.to_thread(claude.messages.create, model="m", max_tokens=9, messages=[])
        loop = asyncio.get_running_loop()
        b = await loop.run_in_executor(None, lambda: claude.messages.create(model="m", max_tokens=9, messages=[]))
        return a, b
    """,
    # methods that send no request (`local: true`), and the async ones of a sync module
    """
    import litellm
    from google import genai
    client = genai.Client()
    async def f(texts, messages):
        chat = client.chats.create(model="m")
        n = litellm.token_counter(model="gpt-4o", messages=messages)
        return chat, n, await litellm.aembedding(model="e", input=texts)
    """,
    # litellm's mock_response: no model request
    """
    import litellm
    async def health():
        return litellm.completion(model="m", messages=[], mock_response="pong")
    """,
    # unknown receivers: a parameter, a helper's return value, an attribute of an unknown object
    """
    from myapp import get_client
    async def f(client, q):
        other = get_client()
        a = client.chat.completions.create(model="m", messages=[])
        b = other.models.generate_content(model="m", contents=q)
        c = client.messages.create(model="m", max_tokens=9, messages=[])
        return a, b, c
    """,
    # a name that is not the SDK's
    """
    from mylib import completion
    async def f(q):
        return completion(q)
    """,
    # test modules (openai's own tests run both clients against a mock transport in one async test)
    """
    import pytest
    from openai import OpenAI
    @pytest.mark.parametrize("sync", [True, False])
    async def test_parse(sync, client: OpenAI, async_client):
        if sync:
            client.chat.completions.parse(model="m", messages=[], response_format=dict)
        else:
            await async_client.chat.completions.parse(model="m", messages=[], response_format=dict)
    """,
])
def test_near_misses(source):
    assert lines(source) == []


def test_a_test_file_without_a_test_framework_import_is_offline():
    # openai's tests/test_large_payload_contract.py imports no test framework: its path says it is a test
    source = b"""\
from openai import OpenAI
async def check_large_responses():
    with OpenAI(api_key="k") as client:
        return client.responses.create(model="m", input="x")
async def test_large_responses():
    await check_large_responses()
"""
    result = analyze_source("tests/test_large_payload_contract.py", source, CATALOG, ONLY_LLM004)
    assert result.findings == []
    assert [f.line for f in analyze_source("large_payload.py", source, CATALOG, ONLY_LLM004).findings] == [4]


def test_test_modules_are_quiet_for_the_generic_list_too():
    source = """
        import time, unittest
        from openai import OpenAI
        client = OpenAI()
        class TestChat(unittest.IsolatedAsyncioTestCase):
            async def test_chat(self):
                client.chat.completions.create(model="m", messages=[])
                time.sleep(1)
                open("fixture.json").read()
        """
    assert lines(source) == []
    assert lines(source.replace("import time, unittest", "import time, myunittest")
                 .replace("class TestChat(unittest.IsolatedAsyncioTestCase)", "class Chat")) == [7, 8, 9]


def test_an_app_endpoint_named_test_is_not_a_test_module():
    source = """
        import litellm
        from fastapi import APIRouter
        router = APIRouter()
        @router.get("/test")
        async def test_endpoint():
            return litellm.completion(model="m", messages=[])
        """
    assert lines(source) == [7]


def test_prefilter_skips_files_without_an_sdk_or_blocking_name():
    source = b"async def f(client):\n    return client.chat.completions.create(model='m', messages=[])\n"
    assert analyze_source("t.py", source, CATALOG, ONLY_LLM004).prefiltered
    hit = b"from openai import OpenAI\nc = OpenAI()\nasync def f():\n    c.chat.completions.create()\n"
    result = analyze_source("t.py", hit, CATALOG, ONLY_LLM004)
    assert [f.line for f in result.findings] == [4]  # the project model's rule: no libcst parse needed


def test_the_sdk_part_reads_the_sdk_index_not_a_generated_table():
    assert "sync_sdk_calls" not in CATALOG.tables
    assert not (ROOT / "rules" / "sdk-sync-calls.yaml").exists()
    # flipping a receiver to async in the knowledge silences it: the rule reads the index
    catalog = load_catalog()
    catalog.knowledge["sdk-ollama"] = {**catalog.knowledge["sdk-ollama"], "modules": [
        {**catalog.knowledge["sdk-ollama"]["modules"][0], "async": True}]}
    source = "import ollama\nasync def f():\n    return ollama.chat(model='m', messages=[])\n"
    assert lines(source) == [3]
    assert lines(source, catalog) == []


def test_explain_mentions_the_sdk_part(cli):
    result = cli("explain", "LLM004")
    assert result.returncode == 0
    for needle in ("OpenAI()", "Anthropic()", "litellm.completion", "ollama.chat", "InferenceClient",
                   "client.models.*", "client.aio.models.*", "AsyncOpenAI", "litellm.acompletion",
                   "mock_response", "get_client()"):
        assert needle in result.stdout, needle


def test_asyncio_itself_runs_a_dns_lookup_off_the_loop():
    """rules/llm004.yaml counts `socket.getaddrinfo` as blocking on the grounds that asyncio's own
    `loop.getaddrinfo` hands it to the default executor (CPython asyncio/base_events.py): read from the source."""
    import asyncio.base_events
    import inspect

    source = inspect.getsource(asyncio.base_events.BaseEventLoop.getaddrinfo)
    assert "run_in_executor" in source and "socket.getaddrinfo" in source
