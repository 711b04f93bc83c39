"""Keep secrets out of the probe's output: header values, URL credentials and query tokens.

Values of sensitive headers are replaced by `[redacted]`; as a second line of defence every secret value
sent is also scrubbed from the final text (a server may echo a key back in an error message).
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

REDACTED = "[redacted]"
_SENSITIVE = re.compile(
    r"auth|token|secret|key|cookie|session|passw|credential|signature|bearer|jwt", re.IGNORECASE
)
# Secrets shorter than this are not scrubbed from free text (they would match ordinary words).
_MIN_SCRUB = 6
_SCHEMES = {"", "bearer", "basic", "token", "digest", "apikey"}


def is_sensitive(name: str) -> bool:
    return bool(_SENSITIVE.search(name))


def redact_headers(headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [(name, REDACTED if is_sensitive(name) else value) for name, value in headers]


def redact_url(url: str) -> str:
    try:
        parts = urlsplit(url)
    except ValueError:  # e.g. an unclosed `[`: still hide `user:password@` and `secret=value`
        url = re.sub(r"(//[^/@:]*:)[^/@]*@", rf"\g<1>{REDACTED}@", url)
        return re.sub(r"([?&][^=&#]*(?:" + _SENSITIVE.pattern + r")[^=&#]*=)[^&#]*",
                      rf"\g<1>{REDACTED}", url, flags=re.IGNORECASE)
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, hostport = netloc.rpartition("@")
        user = userinfo.split(":", 1)[0]
        netloc = f"{user}:{REDACTED}@{hostport}" if ":" in userinfo else f"{REDACTED}@{hostport}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(is_sensitive(k) for k, _ in pairs):
            query = urlencode([(k, REDACTED if is_sensitive(k) else v) for k, v in pairs], safe="[]")
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def secret_values(headers: list[tuple[str, str]], url: str) -> list[str]:
    """Every secret string the request carries (whole values and their last word, e.g. a Bearer token)."""
    values: set[str] = set()
    for name, value in headers:
        if is_sensitive(name):
            values.add(value.strip())
            values.update(part for part in re.split(r"[\s,;=]+", value) if part.lower() not in _SCHEMES)
    try:
        parts = urlsplit(url)
        if parts.password:
            values.add(parts.password)
        values.update(v for k, v in parse_qsl(parts.query, keep_blank_values=True) if is_sensitive(k))
    except ValueError:
        pass
    return sorted((v for v in values if len(v) >= _MIN_SCRUB), key=len, reverse=True)


def scrub(text: str, secrets: list[str]) -> str:
    for secret in secrets:
        text = text.replace(secret, REDACTED)
    return text
