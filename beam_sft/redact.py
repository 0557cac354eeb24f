"""The one home of redaction: what the project writes (rejects, kept rows' ``meta.reasoning``, report.json,
summaries, cache entries, stderr) never holds an API key or a credential a URL carries.

A credential in a URL is its user information (``https://user:password@host``: both parts, a key is
often the user) and the value of a query parameter whose name says it is one (``api-key``, ``key``,
``token``, ``access_token``, ``sig``, ... see ``CREDENTIAL_PARAMS``). ``redact_url`` masks them in
one URL; ``Redactor`` masks the secrets it was given (the key, and those of the endpoint's URL, raw
and percent-decoded) and every URL credential and ``Bearer`` token it finds in any text.

>>> redact_url("https://me:s3cret@h.example/v1?api-version=2&api-key=abc123")
'https://***@h.example/v1?api-version=2&api-key=***'
>>> r = Redactor.for_endpoint("http://127.0.0.1:8/v1?token=t0k3n", "sk-live-1234")
>>> r("401: Bearer sk-live-1234 from http://127.0.0.1:8/v1?token=t0k3n")
'401: Bearer *** from http://127.0.0.1:8/v1?token=***'
>>> r("ftp://u:PASSWORD@x/y and Authorization: Basic dTpw")
'ftp://***@x/y and Authorization: Basic ***'
>>> redact_text("the token budget, Basic rules, bearer of news")
'the token budget, Basic rules, bearer of news'
>>> Redactor.for_endpoint("http://u:secret-pw@h/v1", None)("user u, secret-pw")  # "u" is too short to hunt
'user u, ***'
"""

from __future__ import annotations

import base64
import logging
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

MASK = "***"
# A secret shorter than this is not searched for as plain text: it would mask ordinary words (a URL's
# user "u"). Where it stands in a URL or an Authorization value the text rules still mask it.
SHORTEST_SECRET = 4

# Query parameter names (lower case, "-" read as "_") that carry a credential in the APIs people point
# a teacher at: Azure (api-key), Google (key), SAS (sig), OAuth (access_token), S3/GCS signed URLs.
CREDENTIAL_PARAMS = frozenset({
    "api_key", "apikey", "key", "token", "access_token", "refresh_token", "id_token", "auth", "authorization",
    "sig", "signature", "password", "passwd", "pwd", "pass", "secret", "client_secret", "session_token",
    "x_api_key", "x_amz_signature", "x_amz_credential", "x_amz_security_token", "x_goog_signature",
    "x_goog_credential", "code",
})

# scheme://userinfo@ : the user information of any URL in a text (no "/", "@" or blank inside it)
_USERINFO = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://)[^/@\s'\"<>]+@")
# ?name=value / &name=value of a credential parameter, in any text
_PARAM = re.compile(r"([?&;]([A-Za-z0-9_.-]+)=)([^&#\s'\"<>]*)")
# an Authorization value as a server echoes it: "Bearer X" anywhere (spelt as HTTP sends it, so
# prose like "the token budget" is untouched), any scheme right after an Authorization key
_AUTH = re.compile(r"\b(Bearer)\s+[A-Za-z0-9._~+/=-]+"
                   r"|((?i:authorization)[\"']?\s*[:=]\s*[\"']?[A-Za-z]+)\s+[A-Za-z0-9._~+/=-]+")


def _is_credential(name: str) -> bool:
    return name.lower().replace("-", "_") in CREDENTIAL_PARAMS


def _mask_params(text: str) -> str:
    return _PARAM.sub(lambda m: m.group(1) + MASK if _is_credential(m.group(2)) and m.group(3) else m.group(0), text)


def redact_url(url: str) -> str:
    """``url`` with its user information and credential query values masked (a non-URL: the text rules)."""
    return _mask_params(_USERINFO.sub(lambda m: m.group(1) + MASK + "@", url))


def redact_text(text: str) -> str:
    """The rules that need no secret: URL credentials and Authorization values anywhere in ``text``."""
    return _AUTH.sub(lambda m: f"{m.group(1) or m.group(2)} {MASK}", redact_url(text))


def url_secrets(url: str) -> tuple[str, ...]:
    """The credential strings of one URL (user, password, credential query values), raw and decoded."""
    try:
        parts = urlsplit(url)
        found = [parts.username, parts.password]
        found += [v for k, v in parse_qsl(parts.query, keep_blank_values=False) if _is_credential(k)]
    except ValueError:  # a URL urlsplit refuses (a bad port, a bad IPv6 literal): the text rules still apply
        return ()
    raw_user = parts.netloc.rpartition("@")[0] if "@" in parts.netloc else ""
    found += raw_user.split(":", 1) if raw_user else []
    out: list[str] = []
    for value in found:
        for form in (value, unquote(value or "")):
            if form and form not in out:
                out.append(form)
    return tuple(out)


@dataclass(frozen=True)
class Redactor:
    """Masks the given secrets (longest first, so one that holds another goes whole) and the text rules."""

    secrets: tuple[str, ...] = ()

    @classmethod
    def for_endpoint(cls, base_url: str, api_key: str | None) -> Redactor:
        found = ([api_key] if api_key else []) + list(url_secrets(base_url))
        try:
            parts = urlsplit(base_url)
            if parts.username is not None:  # as httpx sends it: Authorization: Basic base64(user:password)
                pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
                found.append(base64.b64encode(pair.encode("utf-8")).decode("ascii"))
        except ValueError:
            pass
        found = [s for s in found if len(s) >= SHORTEST_SECRET]
        return cls(tuple(sorted(set(found), key=len, reverse=True)))

    def __call__(self, text: str) -> str:
        for secret in self.secrets:
            text = text.replace(secret, MASK)
        return redact_text(text)

    def cut(self, text: str) -> str:
        """``self(text)`` for a text that may have been cut short (a body read up to a byte bound): a
        secret the cut split leaves its start at the end, which no whole-secret match can see.

        >>> Redactor(("sk-live-1234",)).cut("bad key sk-live-12")
        'bad key ***'
        """
        text = self(text)
        for secret in self.secrets:
            for n in range(len(secret) - 1, SHORTEST_SECRET - 1, -1):
                if text.endswith(secret[:n]):
                    return text[: len(text) - n] + MASK
        return text

    def holds(self, text: str, *, shortest: int = 8) -> bool:
        """Whether ``text`` quotes a secret of at least ``shortest`` characters (a shorter one turns up
        in ordinary text by chance, so a reply is not refused for it)."""
        return any(len(s) >= shortest and s in text for s in self.secrets)


class LogFilter(logging.Filter):
    """Redacts the records of a logger it is added to (httpx logs each request's whole URL at INFO)."""

    def __init__(self, redact: Redactor):
        super().__init__()
        self._redact = redact

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg, record.args = self._redact(record.getMessage()), None
        return True


def redact_strings(value: Any, redact=redact_url) -> Any:
    """Every string inside a JSON-like value redacted (a config about to be published: by the URL
    rules, so free text such as a system prompt is left as it is).

    >>> redact_strings({"reasoning": {"base_url": "http://u:p@h/v1"}, "n": [1, "x?key=k"]})
    {'reasoning': {'base_url': 'http://***@h/v1'}, 'n': [1, 'x?key=***']}
    """
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: redact_strings(v, redact) for k, v in value.items()}
    if isinstance(value, list):
        return [redact_strings(v, redact) for v in value]
    if isinstance(value, tuple):
        return tuple(redact_strings(v, redact) for v in value)
    return value


# Keys of a record (a recipe, a config) whose value is itself a secret, whatever it looks like: the URL
# rules above cannot know that ``sft.hub_token: hf_...`` is one.
SECRET_KEYS = CREDENTIAL_PARAMS | {"hub_token", "hf_token", "auth_token", "bearer_token", "private_key"}


def redact_record(value: Any) -> Any:
    """A config about to be recorded (``beam_run.json``, a model card): every string by the URL rules, and
    the value of a key named as a secret (``hub_token``, ``api_key``, ``password``, ...) masked whole.

    >>> redact_record({"sft": {"hub_token": "hf_abc", "hub_model_id": "me/m"}, "url": "http://u:p@h/v1", "key": None})
    {'sft': {'hub_token': '***', 'hub_model_id': 'me/m'}, 'url': 'http://***@h/v1', 'key': None}
    """
    if isinstance(value, dict):
        return {k: MASK if isinstance(k, str) and k.lower().replace("-", "_") in SECRET_KEYS
                and isinstance(v, str) and v else redact_record(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(redact_record(v) for v in value)
    return redact_url(value) if isinstance(value, str) else value


__all__ = ["LogFilter", "MASK", "Redactor", "SECRET_KEYS", "redact_record", "redact_strings", "redact_text",
           "redact_url", "url_secrets"]
