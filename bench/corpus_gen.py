"""A deterministic synthetic corpus of LLM-serving Python code for `bench/bench_scan.py`.

    python bench/corpus_gen.py OUT_DIR FILES [--seed 0]

The same (files, seed) gives the same bytes on every machine (random.Random(seed) only; no clock, no
hash ordering). The mix mirrors a real serving repository: FastAPI/Starlette handlers calling OpenAI /
Anthropic / LiteLLM clients (streaming and not), async workers with httpx, tokenizer helpers, logging,
pydantic schemas, config and utility modules, and tests. About a quarter of the files hold something a
rule should report (a blocking call in `async def`, a tokenizer per call, a non-streaming generation),
the rest are near misses or code no rule cares about, so the pre-filter and the parser both get work.
Average file size is about 3.3 KB (a 1,000-file corpus is 3.3 MB).
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

PACKAGES = ["api", "workers", "clients", "tokenization", "schemas", "utils", "config", "tests", "eval"]

HEADERS = {
    "api": "from __future__ import annotations\n\nimport asyncio\nimport logging\nimport time\n\n"
           "import httpx\nfrom fastapi import APIRouter, HTTPException\nfrom fastapi.responses import StreamingResponse\n"
           "from openai import AsyncOpenAI, OpenAI\n\nlogger = logging.getLogger(__name__)\nrouter = APIRouter()\n"
           "client = AsyncOpenAI(timeout=30)\nsync_client = OpenAI(timeout=30)\n",
    "workers": "from __future__ import annotations\n\nimport asyncio\nimport json\nimport os\nimport subprocess\n"
               "import time\n\nimport httpx\nimport requests\n\nQUEUE_URL = os.environ.get('QUEUE_URL', 'http://localhost:8080')\n",
    "clients": "from __future__ import annotations\n\nimport anthropic\nimport litellm\nfrom openai import OpenAI\n\n"
               "DEFAULT_MODEL = 'gpt-4o-mini'\n",
    "tokenization": "from __future__ import annotations\n\nimport functools\n\nimport tiktoken\n"
                    "from transformers import AutoTokenizer\n\nENCODING = tiktoken.get_encoding('cl100k_base')\n",
    "schemas": "from __future__ import annotations\n\nfrom datetime import datetime\nfrom typing import Literal\n\n"
               "from pydantic import BaseModel, Field\n",
    "utils": "from __future__ import annotations\n\nimport hashlib\nimport itertools\nimport re\nfrom collections import defaultdict\n"
             "from typing import Iterable, Iterator\n",
    "config": "from __future__ import annotations\n\nimport os\nfrom dataclasses import dataclass, field\n",
    "tests": "from __future__ import annotations\n\nimport pytest\n\nfrom app.utils import chunk, normalise\n",
    "eval": "from __future__ import annotations\n\nimport asyncio\nimport statistics\n\nfrom openai import AsyncOpenAI\n\n"
            "client = AsyncOpenAI()\n",
}

# {n}: a unique suffix; {m}: a model name; {k}: a small number
SNIPPETS = {
    "api": [
        ("ok", '''
@router.post("/v1/chat/{n}")
async def chat_{n}(request: dict) -> StreamingResponse:
    stream = await client.chat.completions.create(
        model="{m}", messages=request["messages"], stream=True, max_tokens={k}00,
    )

    async def events():
        async for chunk in stream:
            yield f"data: {{chunk.model_dump_json()}}\\n\\n"

    return StreamingResponse(events(), media_type="text/event-stream")
'''),
        ("hit", '''
@router.post("/v1/complete/{n}")
async def complete_{n}(request: dict) -> dict:
    time.sleep(0.{k})  # back-off copied from a sync script
    answer = await client.chat.completions.create(model="{m}", messages=request["messages"], stream=True)
    return {{"ok": True, "stream": str(answer)}}
'''),
        ("ok", '''
@router.get("/health/{n}")
async def health_{n}() -> dict:
    started = time.monotonic()
    async with httpx.AsyncClient(timeout={k}) as http:
        response = await http.get("http://localhost:8000/ready")
    return {{"status": response.status_code, "elapsed": time.monotonic() - started}}
'''),
        ("ok", '''
@router.post("/v1/embed/{n}")
async def embed_{n}(texts: list[str]) -> list[list[float]]:
    if not texts:
        raise HTTPException(status_code=400, detail="no input")
    result = await client.embeddings.create(model="text-embedding-3-small", input=texts)
    logger.info("embedded %d texts", len(texts))
    return [item.embedding for item in result.data]
'''),
        ("hit", '''
@router.post("/v1/summarise/{n}")
async def summarise_{n}(body: dict) -> dict:
    reply = sync_client.chat.completions.create(model="{m}", messages=body["messages"])
    return {{"summary": reply.choices[0].message.content}}
'''),
        ("ok", '''
async def _rate_limited_{n}(tokens: int) -> None:
    await asyncio.sleep(tokens / {k}000)
    logger.debug("rate limit slept for %d tokens", tokens)
'''),
    ],
    "workers": [
        ("hit", '''
async def poll_queue_{n}() -> list[dict]:
    response = requests.get(QUEUE_URL + "/jobs", timeout={k})
    response.raise_for_status()
    return response.json()
'''),
        ("ok", '''
async def fetch_jobs_{n}(http: httpx.AsyncClient) -> list[dict]:
    response = await http.get(QUEUE_URL + "/jobs/{n}")
    response.raise_for_status()
    return response.json()
'''),
        ("ok", '''
async def run_tool_{n}(args: list[str]) -> str:
    result = await asyncio.to_thread(subprocess.run, args, capture_output=True, text=True, timeout={k}0)
    return result.stdout
'''),
        ("hit", '''
async def export_{n}(rows: list[dict], path: str) -> None:
    with open(path, "w") as handle:
        json.dump(rows, handle)
'''),
        ("ok", '''
def backoff_{n}(attempt: int) -> None:
    time.sleep(min(2 ** attempt, {k}0))


async def retry_{n}(job) -> None:
    for attempt in range({k}):
        try:
            return await job()
        except httpx.HTTPError:
            await asyncio.sleep(2 ** attempt)
'''),
    ],
    "clients": [
        ("hit", '''
def ask_{n}(prompt: str) -> str:
    client = OpenAI()
    reply = client.chat.completions.create(model=DEFAULT_MODEL, messages=[{{"role": "user", "content": prompt}}])
    return reply.choices[0].message.content
'''),
        ("ok", '''
def stream_{n}(prompt: str):
    client = OpenAI()
    for chunk in client.chat.completions.create(model="{m}", messages=[{{"role": "user", "content": prompt}}], stream=True):
        yield chunk.choices[0].delta.content or ""
'''),
        ("hit", '''
def claude_{n}(prompt: str) -> str:
    message = anthropic.Anthropic().messages.create(
        model="claude-3-5-sonnet-latest", max_tokens={k}00, messages=[{{"role": "user", "content": prompt}}],
    )
    return message.content[0].text
'''),
        ("ok", '''
async def route_{n}(messages: list[dict]):
    return await litellm.acompletion(model="{m}", messages=messages, stream=True)
'''),
    ],
    "tokenization": [
        ("hit", '''
def count_{n}(text: str) -> int:
    encoding = tiktoken.get_encoding("o200k_base")
    return len(encoding.encode(text))
'''),
        ("ok", '''
def count_cached_{n}(text: str) -> int:
    return len(ENCODING.encode(text))
'''),
        ("hit", '''
def truncate_{n}(text: str, limit: int = {k}00) -> str:
    tokenizer = AutoTokenizer.from_pretrained("meta-llama/Llama-3.1-8B")
    ids = tokenizer.encode(text)[:limit]
    return tokenizer.decode(ids)
'''),
        ("ok", '''
@functools.lru_cache(maxsize=None)
def tokenizer_for_{n}(name: str):
    return AutoTokenizer.from_pretrained(name)
'''),
    ],
    "schemas": [
        ("ok", '''
class Message{n}(BaseModel):
    role: Literal["system", "user", "assistant", "tool"]
    content: str = Field(default="", max_length={k}0000)
    created: datetime | None = None
'''),
        ("ok", '''
class Usage{n}(BaseModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total(self) -> int:
        return self.prompt_tokens + self.completion_tokens
'''),
        ("ok", '''
class Request{n}(BaseModel):
    model: str = "{m}"
    messages: list[dict] = Field(default_factory=list)
    temperature: float = 0.{k}
    stream: bool = True
    max_tokens: int | None = None
'''),
    ],
    "utils": [
        ("ok", '''
def chunk_{n}(items: Iterable[str], size: int = {k}) -> Iterator[list[str]]:
    iterator = iter(items)
    while batch := list(itertools.islice(iterator, size)):
        yield batch
'''),
        ("ok", '''
def normalise_{n}(text: str) -> str:
    text = re.sub(r"\\s+", " ", text)
    return text.strip().lower()
'''),
        ("ok", '''
def fingerprint_{n}(parts: list[str]) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode())
    return digest.hexdigest()[:{k}6]
'''),
        ("ok", '''
def group_{n}(rows: list[dict], key: str) -> dict[str, list[dict]]:
    groups: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        groups[str(row.get(key))].append(row)
    return dict(groups)
'''),
    ],
    "config": [
        ("ok", '''
@dataclass
class Settings{n}:
    model: str = os.environ.get("MODEL_{n}", "{m}")
    max_tokens: int = int(os.environ.get("MAX_TOKENS", "{k}000"))
    stop: list[str] = field(default_factory=list)
'''),
        ("ok", '''
def load_{n}() -> dict[str, str]:
    return {{key: value for key, value in os.environ.items() if key.startswith("LLM_{n}_")}}
'''),
    ],
    "tests": [
        ("ok", '''
def test_chunk_{n}():
    assert list(chunk(["a", "b", "c"], {k})) != []


@pytest.mark.parametrize("text", ["  A  b ", "a b"])
def test_normalise_{n}(text):
    assert normalise(text) == "a b"
'''),
    ],
    "eval": [
        ("hit", '''
async def grade_{n}(question: str, answer: str) -> float:
    result = await client.chat.completions.create(
        model="{m}", messages=[{{"role": "user", "content": f"Grade {{answer}} for {{question}}"}}],
    )
    return float(result.choices[0].message.content or 0)
'''),
        ("ok", '''
async def latency_{n}(prompts: list[str]) -> float:
    timings = []
    for prompt in prompts:
        stream = await client.chat.completions.create(model="{m}", messages=[{{"role": "user", "content": prompt}}], stream=True)
        async for _ in stream:
            break
        timings.append({k})
    return statistics.median(timings)
'''),
    ],
}

MODELS = ["gpt-4o-mini", "gpt-4.1", "claude-3-5-haiku", "llama-3.1-8b-instruct", "mistral-small"]
# how often each package appears (a serving repo has more utils/schemas/tests than clients)
WEIGHTS = {"api": 10, "workers": 8, "clients": 5, "tokenization": 4, "schemas": 16, "utils": 20,
           "config": 9, "tests": 20, "eval": 8}


def generate(out: Path, files: int, seed: int = 0) -> tuple[int, int]:
    """Write `files` modules under `out`; return (files, bytes)."""
    rng = random.Random(seed)
    out.mkdir(parents=True, exist_ok=True)
    # a project root marker: Fixit lints nothing below a .gitignore'd folder (bench/corpus/) otherwise
    (out / "pyproject.toml").write_text("# synthetic benchmark corpus (bench/corpus_gen.py)\n")
    packages = [p for p in PACKAGES for _ in range(WEIGHTS[p])]
    total = 0
    for index in range(files):
        package = rng.choice(packages)
        folder = out / package / f"part{index // 200:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        body = [HEADERS[package]]
        pool = SNIPPETS[package]
        # a quarter of the files may contain a reportable pattern; the rest only near misses
        allow_hits = rng.random() < 0.25
        candidates = pool if allow_hits else [s for s in pool if s[0] == "ok"] or pool
        for part in range(rng.randint(6, 24)):
            _, template = rng.choice(candidates)
            body.append(template.format(n=f"{index}_{part}", m=rng.choice(MODELS), k=rng.randint(1, 9)))
        text = "\n".join(body)
        (folder / f"module_{index:05d}.py").write_text(text, encoding="utf-8")
        total += len(text.encode())
    return files, total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("files", type=int)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    count, size = generate(args.out, args.files, args.seed)
    print(f"{count} files, {size / 1e6:.2f} MB in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
