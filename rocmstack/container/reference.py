"""Image references: the OCI distribution reference grammar (github.com/distribution/reference,
``reference.go``), spelled out piece by piece, and what is read from a reference (its registry host)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from rocmstack.errors import InputError

# The distribution reference grammar, spelled out piece by piece.
_ALNUM = r"[a-z0-9]+"
_SEPARATOR = r"(?:[._]|__|[-]+)"
_PATH_COMPONENT = rf"{_ALNUM}(?:{_SEPARATOR}{_ALNUM})*"
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_IPV6 = r"\[(?:[a-fA-F0-9:]+)\]"
_DOMAIN = rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|{_IPV6})(?::[0-9]+)?"
TAG_RE = re.compile(r"[\w][\w.-]{0,127}")
DIGEST_RE = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}")
NAME_RE = re.compile(rf"(?:{_DOMAIN}/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*")
REFERENCE_RE = re.compile(
    rf"(?P<name>{NAME_RE.pattern})(?::(?P<tag>{TAG_RE.pattern}))?(?:@(?P<digest>{DIGEST_RE.pattern}))?"
)
NAME_MAX = 255


@dataclass(frozen=True, kw_only=True)
class Reference:
    name: str
    tag: str | None = None
    digest: str | None = None

    def __str__(self) -> str:
        return self.name + (f":{self.tag}" if self.tag else "") + (f"@{self.digest}" if self.digest else "")


def parse_reference(text: str) -> Reference:
    """Parse ``[domain[:port]/]path[:tag][@digest]``; raise InputError naming what is wrong."""
    m = REFERENCE_RE.fullmatch(text)
    if not m:
        raise InputError(
            f"{text!r} is not a valid image reference",
            fix="lowercase [registry[:port]/]name[/name...][:tag], tag of [A-Za-z0-9_.-] up to 128 characters",
        )
    first = m["name"].partition("/")[0]
    # Only a registry host (registry_host) may hold uppercase; anything else is a lowercase path component.
    if registry_host(m["name"]) is None and "/" in m["name"] and first != first.lower():
        raise InputError(f"{text!r} is not a valid image reference: repository names are lowercase")
    if len(m["name"]) > NAME_MAX:
        raise InputError(f"image name {m['name'][:40]}... is longer than {NAME_MAX} characters")
    return Reference(name=m["name"], tag=m["tag"], digest=m["digest"])


def validate_tag(tag: str, *, what: str = "tag") -> str:
    if not TAG_RE.fullmatch(tag):
        raise InputError(
            f"{what} {tag!r} is not a valid image tag",
            fix="up to 128 characters of A-Z a-z 0-9 _ . -, not starting with . or -",
        )
    return tag


def registry_host(name: str) -> str | None:
    """The registry host a repository name begins with, or None. Docker's rule (distribution's
    ``splitDockerDomain``): a first component is a host only when a path follows it and it holds a '.' or
    a ':', or is ``localhost`` (or an IPv6 literal); ``acme/verl`` is a path on the default registry."""
    first, sep, _ = name.partition("/")
    if sep and ("." in first or ":" in first or first == "localhost" or first.startswith("[")):
        return first
    return None
