"""A progress bar for long runs (rich.progress on stderr): only on a terminal, only once the work has run for
a while, never when the report is machine-read (json, sarif, github). Commands hand its `advance` to the
runner as a callback, so the engine itself knows nothing about it.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import final

SHOW_AFTER_S = 0.5  # a run that ends sooner never shows a bar (a warm scan, a handful of prompts)


@final
class Progress:
    """`update(done, total)` after each unit of work, from any thread; `close()` at the end (also on errors)."""

    def __init__(self, label: str, enabled: bool) -> None:
        self.label = label
        self.enabled = enabled
        self._start = time.monotonic()
        self._after = float(os.environ.get("LLMDOCTOR_PROGRESS_AFTER_S", SHOW_AFTER_S))  # tests set 0
        self._bar = None
        self._task = None
        self._lock = threading.Lock()  # tokens counts on worker threads: one bar, opened once

    @classmethod
    def for_report(cls, label: str, fmt: str) -> Progress:
        return cls(label, enabled=fmt == "text" and sys.stderr.isatty())

    def update(self, done: int, total: int) -> None:
        if not self.enabled:
            return
        with self._lock:
            if self._bar is None:
                if time.monotonic() - self._start < self._after or done >= total:
                    return
                self._open(total)
            self._bar.update(self._task, completed=done, total=total)

    def _open(self, total: int) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
        from rich.progress import Progress as RichProgress

        console = Console(file=sys.stderr, highlight=False)
        self._bar = RichProgress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), console=console, transient=True)
        self._bar.start()
        self._task = self._bar.add_task(self.label, total=total)

    def close(self) -> None:
        with self._lock:
            if self._bar is not None:
                self._bar.stop()
                self._bar = None

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
