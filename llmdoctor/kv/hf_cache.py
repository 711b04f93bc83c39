"""Files of a model in the local Hugging Face cache, found the way `huggingface_hub` finds them; never the network.

Layout and look-up follow huggingface_hub (`constants.py`, `file_download.py: try_to_load_from_cache`):
- the hub cache is `$HF_HUB_CACHE`, else `$HUGGINGFACE_HUB_CACHE`, else `$HF_HOME/hub`, where `HF_HOME` defaults
  to `$XDG_CACHE_HOME/huggingface` (`~/.cache/huggingface`);
- a model `org/name` lives in `models--org--name/`; `refs/<revision>` holds the commit a branch or tag points
  to, and the files of each commit are under `snapshots/<commit>/`;
- a revision is looked up in `refs/` first (default `main`), else taken as a commit folder in `snapshots/`.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from llmdoctor.errors import UserError

DEFAULT_REVISION = "main"
_REPO_ID = re.compile(r"^(?:[A-Za-z0-9][A-Za-z0-9._-]*/)?[A-Za-z0-9][A-Za-z0-9._-]*$")


def hub_cache_dir(environ: dict[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    explicit = env.get("HF_HUB_CACHE") or env.get("HUGGINGFACE_HUB_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    home = env.get("HF_HOME") or os.path.join(env.get("XDG_CACHE_HOME") or "~/.cache", "huggingface")
    return Path(home).expanduser() / "hub"


def looks_like_repo_id(text: str) -> bool:
    return bool(_REPO_ID.match(text)) and "--" not in text and ".." not in text


def repo_folder(repo_id: str) -> str:
    return "--".join(["models", *repo_id.split("/")])


@dataclass(frozen=True)
class Snapshot:
    repo_id: str
    revision: str  # as asked (a branch, tag or commit)
    commit: str
    path: Path

    def file(self, name: str) -> Path | None:
        candidate = self.path / name
        return candidate if candidate.is_file() else None

    @property
    def shown(self) -> str:
        short = self.commit[:12]
        return f"{self.repo_id} (HF cache, {self.revision} = {short})" if self.revision != self.commit \
            else f"{self.repo_id} (HF cache, commit {short})"


def find_snapshot(repo_id: str, revision: str | None = None, cache: Path | None = None) -> Snapshot | None:
    """The cached snapshot of `repo_id` at `revision` (default main), or None when it is not cached."""
    cache = hub_cache_dir() if cache is None else cache
    base = cache / repo_folder(repo_id)
    if not base.is_dir():
        return None
    wanted = revision or DEFAULT_REVISION
    commit = wanted
    ref = base / "refs" / wanted
    if ref.is_file():
        try:
            commit = ref.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError):
            return None
    if not commit or "/" in commit or commit.startswith("."):
        return None
    path = base / "snapshots" / commit
    return Snapshot(repo_id, wanted, commit, path) if path.is_dir() else None


def available_revisions(repo_id: str, cache: Path | None = None) -> list[str]:
    """What `--revision` can name for a cached repo: its refs, then its snapshot commits."""
    cache = hub_cache_dir() if cache is None else cache
    base = cache / repo_folder(repo_id)
    refs = sorted(p.name for p in (base / "refs").glob("*") if p.is_file()) if (base / "refs").is_dir() else []
    snaps = sorted(p.name for p in (base / "snapshots").glob("*") if p.is_dir()) \
        if (base / "snapshots").is_dir() else []
    return refs + snaps


def cached_repos(cache: Path | None = None) -> list[str]:
    """Model repos in the cache (`models--org--name` folders), as `org/name`."""
    cache = hub_cache_dir() if cache is None else cache
    if not cache.is_dir():
        return []
    found = []
    for entry in sorted(cache.glob("models--*")):
        if entry.is_dir():
            found.append("/".join(entry.name.split("--")[1:]))
    return found


def require_snapshot(repo_id: str, revision: str | None, option: str, wanted_file: str) -> Snapshot:
    """The snapshot holding `wanted_file`, or a UserError that says where it looked and how to get it."""
    cache = hub_cache_dir()
    snapshot = find_snapshot(repo_id, revision, cache)
    if snapshot is None:
        revisions = available_revisions(repo_id, cache)
        if revisions:
            raise UserError(f"{option} {repo_id}: revision {revision or DEFAULT_REVISION!r} is not in the local "
                            f"Hugging Face cache ({cache / repo_folder(repo_id)}); cached: "
                            f"{', '.join(revisions[:6])}; pass --revision with one of them")
        raise UserError(f"{option} {repo_id}: not in the local Hugging Face cache ({cache}; set HF_HOME or "
                        f"HF_HUB_CACHE if it lives elsewhere). llmdoctor never downloads: fetch it with "
                        f"`hf download {repo_id} {wanted_file}`, or pass a local path")
    if snapshot.file(wanted_file) is None:
        raise UserError(f"{option} {repo_id}: the cached snapshot {snapshot.commit[:12]} has no {wanted_file} "
                        f"({snapshot.path}); fetch it with `hf download {repo_id} {wanted_file}`")
    return snapshot
