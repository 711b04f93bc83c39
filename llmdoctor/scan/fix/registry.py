"""Every fixer, by the `kind` the rule YAMLs name in `fixes` (tests check the two agree)."""

from __future__ import annotations

from llmdoctor.scan.fix.asyncio_sleep import AsyncioSleep
from llmdoctor.scan.fix.base import Fixer
from llmdoctor.scan.fix.cache_tokenizer import CacheTokenizer
from llmdoctor.scan.fix.timeout import Timeout
from llmdoctor.scan.fix.to_thread import ToThread

FIXERS: dict[str, Fixer] = {cls.kind: cls() for cls in (AsyncioSleep, ToThread, Timeout, CacheTokenizer)}
