"""`scan --since REF`: keep only the findings on lines added or changed since the merge base of REF and HEAD
(what a pull request adds), so CI can gate new code in a legacy codebase.

Changed lines come from `git diff --unified=0 --find-renames <merge-base>` (the work tree against the base:
committed, staged and unstaged changes) plus every line of untracked files that are not ignored. A finding
counts as new when any line of its span is one of them. A file that was only renamed has no new lines.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass, field

from llmdoctor.errors import UserError
from llmdoctor.report.model import Finding

_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@")
GIT_TIMEOUT = 120


@dataclass
class ChangedLines:
    ref: str
    base: str  # the merge-base commit
    root: str  # the work tree's top folder
    lines: dict[str, set[int]] = field(default_factory=dict)  # absolute path -> changed line numbers
    whole: set[str] = field(default_factory=set)  # untracked files: every line is new

    def covers(self, finding: Finding, cwd: str) -> bool:
        path = os.path.realpath(os.path.join(cwd, finding.path))
        if path in self.whole:
            return True
        changed = self.lines.get(path)
        if not changed:
            return False
        last = finding.end_line or finding.line
        return any(line in changed for line in range(finding.line, last + 1))


def _git(args: list[str], cwd: str) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=GIT_TIMEOUT,
                              check=False, errors="surrogateescape")
    except FileNotFoundError:
        raise UserError("--since needs git, which is not installed (or not on PATH)") from None
    except subprocess.TimeoutExpired:
        raise UserError(f"--since: git did not answer within {GIT_TIMEOUT} s") from None


def changed_lines(ref: str, cwd: str) -> ChangedLines:
    if not ref or ref.startswith("-"):
        raise UserError(f"--since {ref!r}: give a git ref such as origin/main, a tag or a commit")
    top = _git(["rev-parse", "--show-toplevel"], cwd)
    if top.returncode != 0:
        raise UserError(f"--since {ref}: {cwd} is not inside a git work tree (git says: "
                        f"{_first_line(top.stderr)}); run it in the repository, or scan without --since")
    root = os.path.realpath(top.stdout.strip())
    resolved = _git(["rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"], root)
    if resolved.returncode != 0:
        raise UserError(f"--since {ref}: unknown git ref (not a branch, tag or commit here; in CI fetch it "
                        "first, e.g. `git fetch origin main` and `--since origin/main`)")
    head = _git(["rev-parse", "--verify", "--quiet", "HEAD"], root)
    commit = resolved.stdout.strip()
    if head.returncode == 0:
        merge = _git(["merge-base", commit, "HEAD"], root)
        if merge.returncode != 0:
            raise UserError(f"--since {ref}: no common ancestor with HEAD (unrelated histories, or a shallow "
                            "clone: fetch more history, e.g. `git fetch --unshallow`)")
        base = merge.stdout.strip()
    else:
        base = commit
    result = ChangedLines(ref=ref, base=base, root=root)
    diff = _git(["-c", "core.quotePath=false", "diff", "--unified=0", "--no-color", "--no-ext-diff",
                 "--no-textconv", "--src-prefix=a/", "--dst-prefix=b/", "--find-renames",
                 "--diff-filter=ACMRT", base, "--"], root)
    if diff.returncode != 0:
        raise UserError(f"--since {ref}: git diff failed: {_first_line(diff.stderr)}")
    current = None
    for line in diff.stdout.splitlines():
        if line.startswith("+++ "):
            name = line[4:]
            current = None if name == "/dev/null" else os.path.realpath(os.path.join(root, _unquote(name)[2:]))
            if current is not None:
                result.lines.setdefault(current, set())
        elif current is not None and (match := _HUNK.match(line)):
            start, count = int(match.group(1)), int(match.group(2) or "1")
            result.lines[current].update(range(start, start + count))
    untracked = _git(["-c", "core.quotePath=false", "ls-files", "--others", "--exclude-standard", "-z"], root)
    if untracked.returncode == 0:
        result.whole = {os.path.realpath(os.path.join(root, name)) for name in untracked.stdout.split("\0") if name}
    return result


def _unquote(name: str) -> str:
    """git quotes names with special characters as a C string ("b/a\\tb.py")."""
    if len(name) >= 2 and name[0] == name[-1] == '"':
        body = name[1:-1]
        raw = body.encode("latin-1", "backslashreplace").decode("unicode_escape").encode("latin-1")
        return raw.decode("utf-8", "surrogateescape")
    return name


def _first_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[0] if lines else "no message"
