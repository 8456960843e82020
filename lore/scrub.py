"""Secret and PII scrubber.

Every write path and every query log passes text through :func:`scrub`, which
replaces each secret or piece of personal data with ``[REDACTED:<kind>]``.

The module is on the latency-critical hook path: it imports only the standard
library and compiles every pattern once, at import time.

Design, in short (``docs/redaction.md`` has the full table and the measured
recall / false-positive rate):

* Each detector proposes candidate spans ``(kind, start, end)``. Candidates are
  resolved by kind priority (the order of :data:`KINDS`), then by length, so a
  GitHub token inside ``GITHUB_TOKEN=...`` is reported once, as
  ``github_token``, never twice and never as a broken half.
* ``[REDACTED:...]`` markers already in the input are masked before detection
  and can never be matched again, so ``scrub`` is idempotent.
* Precision first. Provider tokens are matched by their shape; shapes that are
  not distinctive (a 40-character base64 string, a value assigned to
  ``password``) need context and pass an entropy test. Git SHAs, UUIDs,
  versions, checksums, colours, paths, timestamps and IP addresses are not
  matched.

Finding offsets are character offsets into the *input* text.
"""

from __future__ import annotations

import math
import re
from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator, Mapping
from types import MappingProxyType
from typing import NamedTuple, cast

__all__ = ["KINDS", "Finding", "ScrubResult", "scrub", "shannon_entropy"]


class _LazyPattern:
    """A regular expression compiled on first use.

    Compiling this module's 38 patterns took 10 ms, paid by every process that
    imports it (the prompt hook scrubs every prompt); the hints of ``_DETECTORS``
    skip most of them for plain prose, so most are never compiled at all.
    """

    __slots__ = ("_args", "_compiled")

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self._args = (pattern, flags)
        self._compiled: re.Pattern[str] | None = None

    def __getattr__(self, name: str) -> object:
        compiled = self._compiled
        if compiled is None:
            compiled = self._compiled = re.compile(*self._args)
        return getattr(compiled, name)


def _lazy(pattern: str, flags: int = 0) -> re.Pattern[str]:
    return cast("re.Pattern[str]", _LazyPattern(pattern, flags))

#: Every kind the scrubber reports, with a one-line description. The order is
#: the priority used when two candidates overlap (earlier wins).
KINDS: Mapping[str, str] = MappingProxyType(
    {
        "private_key": "PEM / OpenSSH / PGP private key block, from the BEGIN line through the END line",
        "aws_access_key_id": "AWS access key id: AKIA, ASIA, ABIA or ACCA followed by 16 upper-case letters or digits",
        "github_token": "GitHub token: ghp_, gho_, ghu_, ghs_ or ghr_ plus 36+ characters, or github_pat_...",
        "gitlab_token": "GitLab access token: glpat- (also gldt-, glrt-, glptt-, ...) plus 20+ characters",
        "slack_token": "Slack token (xoxa-, xoxb-, xoxp-, xoxr-, xoxs-, xapp-) or a hooks.slack.com webhook URL",
        "stripe_key": "Stripe secret or restricted key (sk_live_, rk_live_, sk_test_, rk_test_) or webhook secret whsec_",
        "anthropic_key": "Anthropic API key: sk-ant-...",
        "openai_key": "OpenAI API key: sk-..., sk-proj-..., sk-svcacct-..., sk-admin-...",
        "jwt": "JSON Web Token: eyJ... header and eyJ... payload (base64url), with its signature",
        "url_password": "password in a URL's userinfo (scheme://user:PASSWORD@host); only the password is replaced",
        "aws_secret_key": "40-character base64 AWS secret access key, only after 'aws', 'secret access key' or an access key id",
        "assigned_secret": "high-entropy value assigned to a key/secret/token/password-like name, or an Authorization / Bearer credential",
        "credit_card": "13-19 digit card number (spaces or dashes allowed) with a known issuer prefix and a valid Luhn checksum",
        "email": "e-mail address",
        "phone": "phone number: +international (8-15 digits), North American NXX-NXX-XXXX, or digits after phone/tel/mobile",
    }
)

_PRIORITY = {kind: i for i, kind in enumerate(KINDS)}


class Finding(NamedTuple):
    """One redacted span: ``text[start:end]`` of the input was of ``kind``."""

    kind: str
    start: int
    end: int


class ScrubResult(NamedTuple):
    """The scrubbed text and what was removed from it (sorted by ``start``)."""

    text: str
    findings: tuple[Finding, ...]

    @property
    def redacted(self) -> bool:
        """True when at least one span was replaced."""
        return bool(self.findings)


def shannon_entropy(value: str) -> float:
    """Shannon entropy of ``value`` in bits per character (0.0 for '')."""
    if not value:
        return 0.0
    counts: dict[str, int] = {}
    for ch in value:
        counts[ch] = counts.get(ch, 0) + 1
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in counts.values())


# --------------------------------------------------------------------------
# Markers already in the text
# --------------------------------------------------------------------------

_MARKER_RE = _lazy(r"\[REDACTED:[A-Za-z0-9_]+\]")
_MASK = "\x00"  # a non-word, non-space character; no pattern matches it


def _words(words: str) -> frozenset[str]:
    return frozenset(words.split())


def _marker(kind: str) -> str:
    return f"[REDACTED:{kind}]"


# --------------------------------------------------------------------------
# Shape-based provider tokens
# --------------------------------------------------------------------------

_AWS_ID_RE = _lazy(r"(?<![A-Za-z0-9])(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?![A-Za-z0-9])")
_GITHUB_RE = _lazy(
    r"(?<![A-Za-z0-9_])(?:gh[pousr]_[A-Za-z0-9]{36,251}|github_pat_[A-Za-z0-9_]{22,255})(?![A-Za-z0-9])"
)
_GITLAB_RE = _lazy(
    r"(?<![A-Za-z0-9_\-])gl(?:pat|dt|rt|ptt|ft|soat|cbt|imt|oas)-[A-Za-z0-9_\-]{20,}"
    r"(?:\.[A-Za-z0-9]{2}\.[A-Za-z0-9_\-]{6,})?"
)
_SLACK_RE = _lazy(
    r"(?<![A-Za-z0-9])(?:xox[abprs]-[A-Za-z0-9\-]{10,}|xapp-\d-[A-Za-z0-9\-]{10,})"
    r"|https?://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/\-]{8,}"
)
_STRIPE_RE = _lazy(
    r"(?<![A-Za-z0-9])(?:[sr]k_(?:live|test)_[A-Za-z0-9]{10,}|whsec_[A-Za-z0-9]{20,})(?![A-Za-z0-9])"
)
_ANTHROPIC_RE = _lazy(r"(?<![A-Za-z0-9_\-])sk-ant-[A-Za-z0-9_\-]{20,}")
_JWT_RE = _lazy(r"(?<![A-Za-z0-9_\-])eyJ[A-Za-z0-9_\-]{5,}\.eyJ[A-Za-z0-9_\-]{5,}(?:\.[A-Za-z0-9_\-]+)?")

_OPENAI_RE = _lazy(r"(?<![A-Za-z0-9_\-])sk-(?!ant-)[A-Za-z0-9_\-]{20,}")
_OPENAI_PREFIX_RE = _lazy(r"^(?:proj|svcacct|admin|None)-")
_ALNUM_RUN_RE = _lazy(r"[A-Za-z0-9]{16,}")


def _openai(text: str) -> Iterator[tuple[str, int, int]]:
    for m in _OPENAI_RE.finditer(text):
        body = _OPENAI_PREFIX_RE.sub("", m.group()[3:])
        # A random key has a long unbroken alphanumeric run with digits and
        # letters; kebab-case names like sk-learn-release-notes do not.
        if (
            _ALNUM_RUN_RE.search(body)
            and any(c.isdigit() for c in body)
            and any(c.isalpha() for c in body)
            and shannon_entropy(body) >= 3.5
        ):
            yield "openai_key", m.start(), m.end()


# --------------------------------------------------------------------------
# Private key blocks
# --------------------------------------------------------------------------

_PK_BEGIN_RE = _lazy(r"-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----")
_PK_END_RE = _lazy(r"-----END[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----")
# Without an END line (a truncated paste), take the lines that look like key
# material: base64 runs, "Proc-Type: ..." headers, blank lines, in real or
# JSON-escaped newlines.
_PK_BODY_RE = _lazy(r"(?:(?:\r?\n|\\r?\\n)(?:[A-Za-z0-9+/=]{16,}|[A-Za-z\-]+: [^\n\\]*|[ \t]*))*")


def _private_keys(text: str) -> Iterator[tuple[str, int, int]]:
    pos = 0
    ends_exhausted = False  # no END line after pos: don't search again (O(n^2))
    while True:
        m = _PK_BEGIN_RE.search(text, pos)
        if m is None:
            return
        end_m = None if ends_exhausted else _PK_END_RE.search(text, m.end())
        ends_exhausted = end_m is None
        if end_m is not None:
            end = end_m.end()
        else:
            body = _PK_BODY_RE.match(text, m.end())
            end = body.end() if body else m.end()
            end = len(text[:end].rstrip())
        yield "private_key", m.start(), end
        pos = end


# --------------------------------------------------------------------------
# Placeholders shared by url_password and assigned_secret
# --------------------------------------------------------------------------

_PLACEHOLDER_WORDS = _words(
    "password passwd pass pwd pw secret token key apikey changeme change_me change-me "
    "changeit example placeholder redacted hidden masked none null nil undefined empty todo "
    "tbd xxx dummy sample foo bar foobar"
)
# Matched against the lower-cased value.
_PLACEHOLDER_RE = _lazy(
    r"""^(?:
        \$\{?[a-z_][a-z0-9_.:\-]*\}?           # $VAR, ${VAR}, ${VAR:-x}
      | \$\{\{.*\}\}|\{\{.*\}\}|\$\(.*\)        # ${{ secrets.X }}, {{ x }}, $(cmd)
      | <[^<>]*>|\[[^\[\]]*\]                   # <your-password>, [token]
      | %\(?[a-z_]*\)?s|%[a-z_]+%             # %s, %(pw)s, %PASSWORD%
      | [*x•.·\#\-]+                          # ****, xxxx, ...
      | (?:your|my|enter|insert|replace|some)[_\-]?[a-z_\-]*   # your_api_key_here (no digits)
      | .*(?:[_\-]here|[_\-]placeholder|example)
      | (?:os\.environ|os\.getenv|process\.env|env|getenv|secrets|vault|ssm|op)[.\[(:].*
    )$""",
    re.VERBOSE,
)


def _is_placeholder(value: str) -> bool:
    v = value.strip().lower()
    return v in _PLACEHOLDER_WORDS or _PLACEHOLDER_RE.match(v) is not None


# --------------------------------------------------------------------------
# Passwords in URLs
# --------------------------------------------------------------------------

_URL_PW_RE = _lazy(
    r"(?<![A-Za-z0-9+.\-])[A-Za-z][A-Za-z0-9+.\-]{1,30}://"
    r"[^\s:/?#@\[\]\"'<>\x00]*:"  # user (may be empty: redis://:pw@host)
    r"(?P<pw>[^\s/\"'<>\x00]*[^\s/\"'<>@\x00])"  # greedy: an unescaped @ stays in the password
    r"@(?=[A-Za-z0-9\[_\-])"
)


def _url_passwords(text: str) -> Iterator[tuple[str, int, int]]:
    for m in _URL_PW_RE.finditer(text):
        if not _is_placeholder(m.group("pw")):
            yield "url_password", m.start("pw"), m.end("pw")


# --------------------------------------------------------------------------
# AWS secret access keys (need context)
# --------------------------------------------------------------------------

_AWS_SECRET_RE = _lazy(r"(?<![A-Za-z0-9/+])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])")
_AWS_CONTEXT_RE = _lazy(
    r"(?<![a-z])aws(?![a-z])|secret[ _\-]?access[ _\-]?key|(?<![a-z0-9])a(?:kia|sia)[a-z0-9]{16}",
    re.IGNORECASE,
)
_AWS_CONTEXT_WINDOW = 160


def _aws_secrets(text: str) -> Iterator[tuple[str, int, int]]:
    for m in _AWS_SECRET_RE.finditer(text):
        v = m.group()
        if v.startswith("/") or v.count("/") > 4:
            continue  # a path, not a key
        if not (any(c.isupper() for c in v) and any(c.islower() for c in v) and any(c.isdigit() for c in v)):
            continue  # hex SHAs and plain words are single-case or digit-free
        if shannon_entropy(v) < 4.0:
            continue
        window = text[max(0, m.start() - _AWS_CONTEXT_WINDOW) : m.start()]
        if _AWS_CONTEXT_RE.search(window):
            yield "aws_secret_key", m.start(), m.end()


# --------------------------------------------------------------------------
# Values assigned to secret-looking names
# --------------------------------------------------------------------------

# name = value, name: value, "name": "value", name => 'value', name := value
_ASSIGN_RE = _lazy(
    r"(?<![A-Za-z0-9_.\-])(?P<name>[A-Za-z_][A-Za-z0-9_.\-]{0,80})[\"']?[ \t]*(?:=>|:=|=|:)[ \t]*"
    r"(?:\"(?P<v1>[^\"\n\x00]*)\"|'(?P<v2>[^'\n\x00]*)'|(?P<v3>[^\s\"',;\x00]+))"
)
# --password value, --api-key=value
_FLAG_RE = _lazy(
    r"(?<![A-Za-z0-9_\-])--(?P<name>[A-Za-z0-9][A-Za-z0-9_\-]{0,60})(?:=|[ \t]+)"
    r"(?:\"(?P<v1>[^\"\n\x00]*)\"|'(?P<v2>[^'\n\x00]*)'|(?P<v3>[^\s\"'\x00]+))"
)
# Authorization: Bearer <v>, Authorization: Basic <v>, and a bare "Bearer <v>"
_AUTH_RE = _lazy(
    r"(?i:\b(?:proxy-)?authorization)[\"']?[ \t]*[:=][ \t]*[\"']?"
    r"(?:(?i:bearer|basic|token|digest|apikey|bot)[ \t]+)?(?P<v3>[^\s\"',;\x00]+)"
    r"|(?i:\bbearer)[ \t]+(?P<v1>[A-Za-z0-9._~+/\-]{16,}=*)"
)

_SEGMENT_SPLIT_RE = _lazy(
    r"[_\-.\s]+|(?<=[a-z])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])|(?<=[A-Za-z])(?=\d)|(?<=\d)(?=[A-Za-z])"
)
_PASSWORD_SEGMENTS = frozenset(
    {"password", "passwords", "passwd", "pwd", "pass", "passphrase", "passcode", "pw"}
)
_SECRET_SEGMENTS = _words(
    "key keys secret secrets token tokens credential credentials creds apikey auth pat "
    "authtoken accesstoken refreshtoken accesskey secretkey privatekey clientsecret "
    "sessionkey signingkey"
)
_SECRET_SUFFIXES = (
    "password",
    "passwd",
    "secret",
    "token",
    "apikey",
    "accesskey",
    "secretkey",
    "privatekey",
    "credentials",
    "passphrase",
)
# The name is about something other than the secret itself (key_id, token_count,
# password_policy, ssh_key_path, ...): the *last* segment says so.
_HEAD_EXCLUDE = _words(
    "id ids count counts type types name names file files path paths dir url uri endpoint "
    "field header env var ttl expiry expires expiration exp timeout format algorithm alg "
    "usage used limit limits length len size budget policy hint prompt strength rotation "
    "prefix suffix version label kind mode method scheme location ref arn region store "
    "manager provider source command cmd helper required enabled set valid changed reset at "
    "date time index column col template pattern regex min max rate fingerprint reuse age "
    "lifetime ok status error message msg hash hashed digest checksum sha sha1 sha256 salt "
    "rounds cost"
)
# Not a secret at all, whatever else the name says (public_key, primary_key,
# next_page_token, max_tokens, ...).
_MODIFIER_EXCLUDE = _words(
    "public pub primary foreign sort partition cache idempotency dedup dedupe lookup shard "
    "routing object row composite unique page next continuation cursor max min num total "
    "input output prompt completion hotkey keyboard s3 map dict translation i18n group"
)

_IDENT_PATH_RE = _lazy(r"^[A-Za-z_][A-Za-z0-9_]*(?:(?:\.|::|->)[A-Za-z_][A-Za-z0-9_]*)+(?:\(\))?$")
_CALL_RE = _lazy(r"^[A-Za-z_][\w.]*\(.*\)?$")
_PATHLIKE_RE = _lazy(r"^(?:~?/|\.\.?/|[A-Za-z]:\\|file:)")
_FILENAME_RE = _lazy(r"(?:^|/)[\w.\-]+\.[A-Za-z][A-Za-z0-9]{0,4}$")
# snake_case / kebab-case identifiers (test_login_flow_2, deploy-bot-v2):
# every part is letters only or at most 3 characters.
_IDENTIFIER_RE = _lazy(r"^[a-z]+(?:[a-z]*|[a-z0-9]{0,2})(?:[_\-](?:[a-z]+|[a-z0-9]{1,3}))+$")
_DATE_RE = _lazy(r"\d{4}-\d{2}-\d{2}|\d{1,2}:\d{2}(?::\d{2})?")
_SEPARATORS = frozenset("_-.")


def _segments(name: str) -> list[str]:
    return [s.lower() for s in _SEGMENT_SPLIT_RE.split(name) if s]


def _name_family(name: str) -> str | None:
    """'password', 'secret' or None for an assignment's left-hand side."""
    segs = _segments(name)
    if not segs or segs[-1] in _HEAD_EXCLUDE or any(s in _MODIFIER_EXCLUDE for s in segs):
        return None
    if any(s in _PASSWORD_SEGMENTS or s.endswith(("password", "passwd")) for s in segs):
        return "password"
    if any(s in _SECRET_SEGMENTS or s.endswith(_SECRET_SUFFIXES) for s in segs):
        return "secret"
    return None


def _looks_secret(value: str, family: str) -> bool:
    """The assigned_secret rule (documented in docs/redaction.md).

    A value assigned to a secret-looking name is redacted when it is not a
    placeholder, reference, path, URL or date, has no whitespace, and:

    * it mixes letters with digits or symbols, is at least 6 characters
      (password-like names) or 12 characters (key/secret/token names) long,
      and has a Shannon entropy of at least 2.3 (password) or 3.0 (other)
      bits per character, or 2.5 for other values of 16+ characters that mix
      upper case, lower case and digits; or
    * it is letters only, at least 16 characters, mixed case with 20-80%
      upper-case letters (random, not CamelCase) and an entropy of at least
      3.5 bits per character.
    """
    if not value or any(c.isspace() for c in value) or _MASK in value:
        return False
    if "://" in value or _is_placeholder(value):
        return False
    if _PATHLIKE_RE.match(value) or _IDENT_PATH_RE.match(value) or _CALL_RE.match(value):
        return False
    if _FILENAME_RE.search(value) and (
        "/" in value or (value.count(".") == 1 and not any(c.isdigit() for c in value))
    ):
        return False
    if _IDENTIFIER_RE.match(value):
        return False
    if _DATE_RE.search(value) and sum(c.isalpha() for c in value) <= 2:
        return False  # 2025-03-14T09:12:00Z
    letters = sum(c.isalpha() for c in value)
    digits = sum(c.isdigit() for c in value)
    symbols = sum(1 for c in value if not c.isalnum() and c not in _SEPARATORS)
    if letters == 0:
        return False  # numbers, versions, dates: max_tokens: 4096
    entropy = shannon_entropy(value)
    if digits or symbols:
        if family == "password":
            return len(value) >= 6 and entropy >= 2.3
        # Short random strings repeat characters by chance, which lowers their measured
        # entropy (a random 16-character key scored 2.95): with all three of upper case,
        # lower case and digits, 16+ characters need only 2.5 bits.
        classes = any(c.isupper() for c in value) + any(c.islower() for c in value) + bool(digits)
        return len(value) >= 12 and (entropy >= 3.0 or (classes == 3 and len(value) >= 16 and entropy >= 2.5))
    upper = sum(c.isupper() for c in value)
    return len(value) >= 16 and 0.2 <= upper / letters <= 0.8 and entropy >= 3.5


_CLOSERS = {")": "(", "]": "[", "}": "{", ">": "<"}


def _value_span(m: re.Match[str]) -> tuple[str, int, int] | None:
    for group in ("v1", "v2", "v3"):
        try:
            v = m.group(group)
        except IndexError:
            continue
        if v is not None:
            start, end = m.start(group), m.end(group)
            if group == "v3":
                # An unquoted value ending a sentence or a bracket: drop the
                # trailing punctuation unless it closes a bracket in the value.
                while v and (v[-1] in ".:" or (v[-1] in _CLOSERS and _CLOSERS[v[-1]] not in v)):
                    v = v[:-1]
                    end -= 1
            return v, start, end
    return None


# Prose: "the password is X", "password for staging was X", "temp password X".
_PROSE_PW_RE = _lazy(
    r"(?i:\b(?:password|passwd|passcode|passphrase|pwd)\b)"
    r"(?P<verb>(?:[ \t]+(?i:for|on|of)[ \t]+[\w.\-@]+)?[ \t]+(?i:is|was|is now|now is|set to|changed to|reset to|=|->)[ \t]*:?)?"
    r"[ \t]+[`\"']?(?P<v3>[^\s`\"',;\x00]+)"
)


def _prose_passwords(text: str) -> Iterator[tuple[str, int, int]]:
    for m in _PROSE_PW_RE.finditer(text):
        span = _value_span(m)
        if span is None:
            continue
        value, start, end = span
        if len(value) < 8 or not _looks_secret(value, "password"):
            continue
        classes = (
            any(c.islower() for c in value)
            + any(c.isupper() for c in value)
            + any(c.isdigit() for c in value)
            + any(not c.isalnum() and c not in _SEPARATORS for c in value)
        )
        # Without "is"/"was" the next word must look typed-by-a-machine.
        if classes >= (2 if m.group("verb") else 3):
            yield "assigned_secret", start, end


def _assigned_pairs(regex: re.Pattern[str], text: str) -> Iterator[tuple[str, int, int]]:
    for m in regex.finditer(text):
        family = _name_family(m.group("name"))
        if family is None:
            continue
        span = _value_span(m)
        if span is None:
            continue
        value, start, end = span
        if value.startswith("-") and regex is _FLAG_RE:
            continue  # --password-stdin --other-flag
        if _looks_secret(value, family):
            yield "assigned_secret", start, end


def _assigned_kv(text: str) -> Iterator[tuple[str, int, int]]:
    return _assigned_pairs(_ASSIGN_RE, text)


def _assigned_flags(text: str) -> Iterator[tuple[str, int, int]]:
    return _assigned_pairs(_FLAG_RE, text)


def _authorization(text: str) -> Iterator[tuple[str, int, int]]:
    for m in _AUTH_RE.finditer(text):
        span = _value_span(m)
        if span is not None and _looks_secret(span[0], "secret"):
            yield "assigned_secret", span[1], span[2]


# --------------------------------------------------------------------------
# Credit cards
# --------------------------------------------------------------------------

_CC_RE = _lazy(r"(?<![\w\-.,/:#])\d(?:[ \-]?\d){12,18}(?![\w\-]|[.,]\d)")
_CC_ISSUER_RE = _lazy(
    r"^(?:4\d{12}(?:\d{3}){0,2}"  # Visa 13/16/19
    r"|(?:5[1-5]\d{2}|222[1-9]|22[3-9]\d|2[3-6]\d{2}|27[01]\d|2720)\d{12}"  # Mastercard
    r"|3[47]\d{13}"  # Amex
    r"|3(?:0[0-5]|[68]\d)\d{11,16}"  # Diners
    r"|6(?:011|5\d{2}|4[4-9]\d)\d{12,15}"  # Discover
    r"|35(?:2[89]|[3-8]\d)\d{12,15}"  # JCB
    r"|62\d{14,17}"  # UnionPay
    r"|(?:5018|5020|5038|6304|6759|676[1-3])\d{8,15})$"  # Maestro
)
_CC_GROUPS_OK = frozenset({(4, 6, 5), (4, 6, 4)})


def _luhn_ok(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2 == 1:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


def _credit_cards(text: str) -> Iterator[tuple[str, int, int]]:
    for m in _CC_RE.finditer(text):
        raw = m.group()
        seps = {c for c in raw if not c.isdigit()}
        if len(seps) > 1:
            continue
        if seps:
            groups = tuple(len(g) for g in re.split(r"[ \-]", raw))
            fours = all(g == 4 for g in groups[:-1]) and 1 <= groups[-1] <= 4
            if not (fours or groups in _CC_GROUPS_OK):
                continue
        digits = raw.replace(" ", "").replace("-", "")
        if _CC_ISSUER_RE.match(digits) and _luhn_ok(digits):
            yield "credit_card", m.start(), m.end()


# --------------------------------------------------------------------------
# E-mail
# --------------------------------------------------------------------------

_EMAIL_RE = _lazy(
    r"(?<![A-Za-z0-9._%+\-])[A-Za-z0-9][A-Za-z0-9._%+\-]{0,63}"
    r"@(?:[A-Za-z0-9](?:[A-Za-z0-9\-]{0,61}[A-Za-z0-9])?\.){1,8}[A-Za-z]{2,24}(?![A-Za-z0-9\-]|\.[A-Za-z0-9])"
)
_FILE_TLDS = _words(
    "png jpg jpeg gif svg webp ico bmp css scss js mjs cjs ts tsx jsx json yaml yml toml md "
    "txt html htm pdf zip gz tgz tar lock vue map woff woff2 ttf mp4 mp3 wasm"
)
_TOKEN_START_RE = _lazy(r"[^\s\"'<>(\[]*$")


def _emails(text: str) -> Iterator[tuple[str, int, int]]:
    for m in _EMAIL_RE.finditer(text):
        local, _, domain = m.group().partition("@")
        if local.lower() == "git" or domain.rsplit(".", 1)[-1].lower() in _FILE_TLDS:
            continue  # git@github.com:org/repo, icon@2x.png
        # user:pass@host inside a URL is url_password's business, not an address.
        before = _TOKEN_START_RE.search(text, max(0, m.start() - 200), m.start())
        if before is not None and "://" in before.group():
            continue
        yield "email", m.start(), m.end()


# --------------------------------------------------------------------------
# Phone numbers
# --------------------------------------------------------------------------

_PHONE_END = r"(?![\w\-@]|[.,:/]\d)"
_PHONE_INTL_RE = _lazy(
    r"(?<![\w+.\-/=:#])\+[1-9]\d{0,2}(?:[ .\-]?\(\d{1,4}\))?(?:[ .\-]?\d{1,5}){1,6}" + _PHONE_END
)
_PHONE_NA_RE = _lazy(
    r"(?<![\w+.\-/=:#$])(?:1[ .\-]?)?"
    r"(?:\([2-9]\d{2}\)[ ]?[2-9]\d{2}[ .\-]\d{4}|[2-9]\d{2}(?P<s>[.\-])[2-9]\d{2}(?P=s)\d{4})" + _PHONE_END
)
_PHONE_KEYWORD_RE = _lazy(
    r"(?i:\b(?:phone|tel|telephone|mobile|cell|fax|whatsapp|sms|call\s+(?:me\s+)?(?:at|on)|text\s+me\s+at)\b)"
    r"[ \t]*(?:(?i:no\.?|number|#))?[ \t]*[:.\-]?[ \t]*"
    r"(?P<num>\+?\(?\d[\d ().\-]{5,22}\d)" + _PHONE_END
)
_NOT_PHONE_CONTEXT_RE = _lazy(
    r"(?i:\b(?:order|invoice|ticket|case|ref|reference|account|acct|po|sku|serial|build|job|tracking"
    r"|confirmation|id|pr|issue|version|ver|v|port|ports|range|pages|lines?|commit|run)\b)[\s:#.\-]*$"
)
_DATE_IN_PHONE_RE = _lazy(r"(?:19|20)\d{2}[-./ ](?:0?[1-9]|1[0-2])[-./ ](?:0?[1-9]|[12]\d|3[01])(?!\d)")


def _phone_ok(text: str, start: int, number: str) -> bool:
    n_digits = sum(c.isdigit() for c in number)
    if not 8 <= n_digits <= 15 or _DATE_IN_PHONE_RE.search(number):
        return False
    return _NOT_PHONE_CONTEXT_RE.search(text, max(0, start - 24), start) is None


def _phones_shaped(regex: re.Pattern[str], text: str) -> Iterator[tuple[str, int, int]]:
    for m in regex.finditer(text):
        if _phone_ok(text, m.start(), m.group()):
            yield "phone", m.start(), m.end()


def _phones_intl(text: str) -> Iterator[tuple[str, int, int]]:
    return _phones_shaped(_PHONE_INTL_RE, text)


def _phones_na(text: str) -> Iterator[tuple[str, int, int]]:
    return _phones_shaped(_PHONE_NA_RE, text)


def _phones_after_keyword(text: str) -> Iterator[tuple[str, int, int]]:
    for m in _PHONE_KEYWORD_RE.finditer(text):
        num = m.group("num")
        if _phone_ok(text, m.start("num"), num):
            yield "phone", m.start("num"), m.end("num")


# --------------------------------------------------------------------------
# Resolution
# --------------------------------------------------------------------------


Detector = Callable[[str], Iterable[tuple[str, int, int]]]


def _shape(kind: str, regex: re.Pattern[str]) -> Detector:
    def detect(text: str) -> Iterator[tuple[str, int, int]]:
        for m in regex.finditer(text):
            yield kind, m.start(), m.end()

    return detect


#: (hints, detector): the detector runs only when the lower-cased text holds
#: one of its hints (or it has none). Plain prose skips most regexes this way.
_DETECTORS: tuple[tuple[tuple[str, ...], Detector], ...] = (
    (("private key",), _private_keys),
    (("akia", "asia", "abia", "acca"), _shape("aws_access_key_id", _AWS_ID_RE)),
    (("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"), _shape("github_token", _GITHUB_RE)),
    (("gl",), _shape("gitlab_token", _GITLAB_RE)),
    (("xox", "xapp-", "hooks.slack.com"), _shape("slack_token", _SLACK_RE)),
    (("k_live_", "k_test_", "whsec_"), _shape("stripe_key", _STRIPE_RE)),
    (("sk-ant-",), _shape("anthropic_key", _ANTHROPIC_RE)),
    (("eyj",), _shape("jwt", _JWT_RE)),
    (("sk-",), _openai),
    (("://",), _url_passwords),
    (("aws", "secret", "akia", "asia"), _aws_secrets),
    ((":", "="), _assigned_kv),
    (("--",), _assigned_flags),
    (("authorization", "bearer"), _authorization),
    (("pass", "pwd"), _prose_passwords),
    ((), _credit_cards),
    (("@",), _emails),
    (("+",), _phones_intl),
    ((), _phones_na),
    (("phone", "tel", "mobile", "cell", "fax", "whatsapp", "sms", "call", "text"), _phones_after_keyword),
)


_MAX_PASSES = 8


def _scan(text: str) -> list[Finding]:
    """One detection pass: disjoint findings in ``text`` offsets, sorted."""
    protected = [(m.start(), m.end()) for m in _MARKER_RE.finditer(text)]
    masked = _MARKER_RE.sub(lambda m: _MASK * len(m.group()), text) if protected else text
    lower = masked.lower()

    candidates: list[tuple[str, int, int]] = []
    for hints, detector in _DETECTORS:
        if not hints or any(h in lower for h in hints):
            candidates.extend(c for c in detector(masked) if c[2] > c[1])
    if not candidates:
        return []

    # Highest priority first, then longest, then leftmost; a candidate that
    # overlaps anything already taken (or an existing marker) is dropped.
    candidates.sort(key=lambda c: (_PRIORITY[c[0]], c[1] - c[2], c[1]))
    starts = [s for s, _ in protected]
    ends = [e for _, e in protected]
    accepted: list[Finding] = []
    for kind, start, end in candidates:
        i = bisect_right(starts, start)
        if (i > 0 and ends[i - 1] > start) or (i < len(starts) and starts[i] < end):
            continue
        starts.insert(i, start)
        ends.insert(i, end)
        accepted.append(Finding(kind, start, end))
    accepted.sort(key=lambda f: f.start)
    return accepted


def _render(text: str, findings: list[Finding]) -> str:
    parts: list[str] = []
    pos = 0
    for f in findings:
        parts.append(text[pos : f.start])
        parts.append(_marker(f.kind))
        pos = f.end
    parts.append(text[pos:])
    return "".join(parts)


def _to_input_offsets(findings: list[Finding], new: list[Finding]) -> list[Finding]:
    """Map ``new`` (offsets in the rendered text, outside markers) back to input offsets."""
    marker_ends: list[int] = []  # where each marker ends in the rendered text
    shifts: list[int] = []  # rendered minus input offset after that marker
    shift = 0
    for f in findings:
        width = len(_marker(f.kind))
        marker_ends.append(f.start + shift + width)
        shift += width - (f.end - f.start)
        shifts.append(shift)

    def back(pos: int) -> int:
        i = bisect_right(marker_ends, pos)
        return pos - (shifts[i - 1] if i else 0)

    return [Finding(f.kind, back(f.start), back(f.end)) for f in new]


def scrub(text: str) -> ScrubResult:
    """Replace every secret and piece of PII in ``text`` with ``[REDACTED:kind]``.

    Findings are in input offsets, sorted by start, and never overlap. Existing
    ``[REDACTED:...]`` markers are left as they are. A redaction can change
    what its neighbours look like (``AKIA...`` glued to a URL becomes a
    separate word once the URL is a marker), so the output is scanned again
    until nothing new is found: scrubbing twice is the same as scrubbing once.
    """
    if not text:
        return ScrubResult(text, ())
    findings = _scan(text)
    if not findings:
        return ScrubResult(text, ())
    out = _render(text, findings)
    for _ in range(_MAX_PASSES):
        new = _scan(out)
        if not new:
            break
        findings = sorted(findings + _to_input_offsets(findings, new), key=lambda f: f.start)
        out = _render(text, findings)
    return ScrubResult(out, tuple(findings))
