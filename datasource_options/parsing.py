"""The options the txnlog source and sink share, parsed one way (DESIGN §1).

Spark hands a data source its options as a case-insensitive string map. The reader
(``txn_source.options``) and the writer (``txn_sink.options``) both go through here for:

- option names (``normalize_options``): looked up case-insensitively, kept under their
  canonical spelling; an unknown name is refused, naming every valid one, so a typo never
  silently means "use the default";
- ``path`` (``resolve_log_path``): the log directory, given as a plain path (absolute,
  relative to the driver's working directory, or starting with ``~``) or as a ``file:`` URI
  (``file:/data/log``, ``file:///data/log``, ``file://localhost/data/log``). It is made
  absolute on the driver, so executors with another working directory open the same log.
  Any other scheme (``hdfs://``, ``s3a://``, ...) is refused: the log is a directory on this
  machine. As in Hadoop's ``Path``, a colon before the first slash starts a scheme, and
  percent signs in a ``file:`` URI are kept as they are (Hadoop does not decode them either).

Layering (DESIGN §1): below ``txn_source`` and ``txn_sink``, which never import each other;
imports only ``txn_log`` (for ``ConfigError``). Pure functions, safe from any thread.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from txn_log.errors import ConfigError

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):")
_LOCAL_HOSTS = ("", "localhost")
VALID_PATHS = (
    "a path such as /data/log or data/log (relative to the driver's working directory), or a "
    "file: URI such as file:/data/log or file:///data/log"
)


def normalize_options(
    options: Mapping[str, object], known: Sequence[str], *, role: str, prefix: str | None = None
) -> dict[str, str]:
    """Canonical option name (as spelled in ``known``) -> value as a string.

    ``role`` ("source" or "sink") names the refuser. Names starting with ``prefix`` (any case;
    ``kafka.``: the Kafka client's settings, ``location``) are kept, lower-cased, for the
    caller to check. Raises ConfigError naming every unknown option and every valid one.
    """
    by_lower = {name.lower(): name for name in known}
    if prefix is not None:
        by_lower.update({k.lower(): k.lower() for k in options if k.lower().startswith(prefix)})
    unknown = [key for key in options if key.lower() not in by_lower]
    if unknown:
        names = ", ".join(map(repr, unknown))
        raise ConfigError(
            f"unknown option{'s' if len(unknown) > 1 else ''} {names} for the txnlog {role} "
            f"(an unknown txnlog {role} option is refused, so that a typo never silently means "
            f"the default); valid options are {', '.join(known)}{_also(prefix)} (case-insensitive)"
        )
    return {by_lower[key.lower()]: str(value) for key, value in options.items()}


def _also(prefix: str | None) -> str:
    return "" if prefix is None else f" and any {prefix}<name> (a Kafka client setting)"


def resolve_log_path(value: object, *, usage: str) -> str:
    """The absolute log directory that option ``path`` names (see the module doc).

    ``usage`` says how the caller's users give a path (e.g. ``.load(path)``), for the error
    when there is none. Raises ConfigError; never touches the file system but to resolve
    symbolic links (``Path.resolve``).
    """
    text = "" if value is None else str(value).strip()
    if not text:
        raise ConfigError(f"option 'path' is required: give the txnlog directory with {usage}")
    return str(Path(_local_path(text)).expanduser().resolve())


def _local_path(text: str) -> str:
    match = _SCHEME.match(text)
    if match is None:
        return text
    scheme = match.group(1)
    if scheme.lower() != "file":
        raise _not_local(
            text,
            f"scheme {scheme!r} is not supported (a txnlog is a directory on this machine; "
            f"write ./{text} for a relative directory whose name has a colon)",
        )
    rest = text[match.end() :]
    if rest.startswith("//"):
        host, slash, path = rest[2:].partition("/")
        if host.lower() not in _LOCAL_HOSTS:
            raise _not_local(text, f"the file: URI names host {host!r}, not this machine")
        rest = slash + path
    if not rest:
        raise _not_local(text, "the file: URI names no directory")
    return rest


def _not_local(text: str, why: str) -> ConfigError:
    return ConfigError(
        f"option 'path' must be a local directory, got {text!r}: {why}; valid are {VALID_PATHS}"
    )
