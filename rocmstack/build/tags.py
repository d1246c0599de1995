"""Image tags: a descriptive immutable tag from the pins, a content tag from the render hash, floating aliases.

Pure functions: no engine, no registry. Every reference is checked against the OCI distribution
reference grammar (``rocmstack.container.reference``) before anything uses it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rocmstack.container.reference import (
    NAME_MAX,
    NAME_RE,
    TAG_RE,
    parse_reference,
    registry_host,
    validate_tag,
)
from rocmstack.errors import CheckFailed, InputError, quoted

if TYPE_CHECKING:
    from rocmstack.recipe.resolve import Resolved

CONTENT_PREFIX = "r-"
CONTENT_HEX = 12
_FIELD = re.compile(r"\{([A-Za-z0-9_.-]+)\}")


def _under(repo: str, registry: str) -> bool:
    """``repo`` is ``registry`` or a path below it; host names compare case-insensitively, paths exactly."""
    r_host, _, r_path = repo.partition("/")
    g_host, _, g_path = registry.partition("/")
    if r_host.lower() != g_host.lower():
        return False
    return not g_path or r_path == g_path or r_path.startswith(g_path + "/")


def repository(publish_repo: str, registry: str | None, *, source: str = "publish.repository") -> str:
    """The repository to tag: ``--registry`` (host[:port][/namespace]) is prefixed to ``publish.repository``.

    A repository that already names a registry is not prefixed again when it lies under ``--registry``
    (``ghcr.io/acme/verl`` with ``--registry ghcr.io/acme``); one that names another registry is an error,
    never a silent ``ghcr.io/acme/quay.io/x/verl``."""
    reg = registry.rstrip("/") if registry else ""
    host = registry_host(publish_repo)
    # podman's own namespace for local images (`localhost/NAME`, no port) is no registry to push to: with
    # --registry it is pushed below that registry, as any plain path is
    if host == "localhost" and reg and not _under(publish_repo, reg):
        host = None
    if reg and host:
        if not _under(publish_repo, reg):
            raise InputError(
                f"{source} {quoted(publish_repo)} already names a registry, and not --registry {quoted(reg)}",
                fix="drop --registry, pass the registry the repository names, "
                "or set publish.repository without a host (e.g. acme/verl)",
            )
        reg = ""
    repo = f"{reg}/{publish_repo}" if reg else publish_repo
    if not NAME_RE.fullmatch(repo) or len(repo) > NAME_MAX:
        raise InputError(
            f"image repository {repo!r} is not valid in the OCI reference grammar",
            fix="--registry takes host[:port][/namespace] in lowercase, e.g. ghcr.io/myorg",
        )
    return repo


def _lookup(tree: dict[str, Any], dotted: str, template: str) -> str:
    node: Any = tree
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            raise InputError(
                f"publish.tag {template!r}: field {{{dotted}}} does not exist in the resolved recipe",
                fix="use a dotted path such as {components.verl.version} or {base.rocm}, or {arch}",
            )
        node = node[part]
    if node is None or isinstance(node, (dict, list)):
        raise InputError(
            f"publish.tag {template!r}: field {{{dotted}}} is {node!r}, not a single value",
            fix="point it at a pinned version or ref",
        )
    return str(node)


def arch_field(gpu_archs: tuple[str, ...]) -> str:
    return "-".join(gpu_archs)


def expand_template(template: str, tree: dict[str, Any], gpu_archs: tuple[str, ...]) -> str:
    """``verl-{components.verl.version}_{arch}`` -> ``verl-0.9.0_gfx950``, validated as a tag."""

    def field(m: re.Match[str]) -> str:
        if m[1] == "arch":
            return arch_field(gpu_archs)
        return _lookup(tree, m[1], template)

    leftover = _FIELD.sub("", template)
    if "{" in leftover or "}" in leftover:
        raise InputError(f"publish.tag {template!r}: unbalanced or empty {{...}} field")
    tag = _FIELD.sub(field, template)
    if not TAG_RE.fullmatch(tag):
        raise InputError(
            f"publish.tag {template!r} expands to {tag!r}, which is not a valid image tag",
            fix="pin the fields it uses to exact versions (a specifier such as >=5.12 cannot be in a tag)",
        )
    return tag


def content_tag(render_hash: str) -> str:
    if not re.fullmatch(r"[0-9a-f]{64}", render_hash):
        raise InputError(f"render hash {render_hash!r} is not 64 hex digits")
    return CONTENT_PREFIX + render_hash[:CONTENT_HEX]


@dataclass(frozen=True, kw_only=True)
class TagSet:
    repository: str
    descriptive: str
    content: str
    aliases: tuple[str, ...] = ()

    @property
    def immutable(self) -> tuple[str, ...]:
        return (self.descriptive, self.content)

    @property
    def all(self) -> tuple[str, ...]:
        return (*self.immutable, *self.aliases)

    def ref(self, tag: str) -> str:
        return f"{self.repository}:{tag}"

    def refs(self) -> tuple[str, ...]:
        return tuple(self.ref(t) for t in self.all)

    def as_dict(self) -> dict[str, Any]:
        return {
            "repository": self.repository,
            "descriptive": self.descriptive,
            "content": self.content,
            "aliases": list(self.aliases),
            "refs": list(self.refs()),
            "immutable_refs": [self.ref(t) for t in self.immutable],
        }


def tag_set(
    resolved: Resolved, render_hash: str, *, registry: str | None = None, extra_aliases: tuple[str, ...] = ()
) -> TagSet:
    """All tags of one build. Aliases name the recipe's default arch set; other arch sets get ``_<arch>``."""
    recipe = resolved.recipe
    tree = recipe.model_dump(mode="json", by_alias=True)
    descriptive = expand_template(recipe.publish.tag, tree, resolved.gpu_archs)
    content = content_tag(render_hash)
    default = tuple(sorted(recipe.default_gpu_archs)) == tuple(resolved.gpu_archs)
    aliases = []
    for alias in (*recipe.publish.aliases, *extra_aliases):
        validate_tag(alias, what="alias")
        name = alias if default else f"{alias}_{arch_field(resolved.gpu_archs)}"
        validate_tag(name, what="alias")
        if name in (descriptive, content):
            raise InputError(
                f"alias {name!r} equals an immutable tag; aliases must differ from {descriptive} and {content}"
            )
        if name not in aliases:
            aliases.append(name)
    repo = repository(recipe.publish.repository, registry, source=f"{resolved.source}: publish.repository")
    tags = TagSet(repository=repo, descriptive=descriptive, content=content, aliases=tuple(aliases))
    for ref in tags.refs():
        parse_reference(ref)
    return tags


def immutability_verdict(tag: str, remote_hash: str | None, local_hash: str, *, exists: bool) -> str:
    """'push' | 'skip' (already there, same render) | raise: an immutable tag never moves to another render."""
    if not exists:
        return "push"
    if remote_hash == local_hash:
        return "skip"

    shown = remote_hash[:12] if remote_hash else "no rocmstack render-hash label"
    raise CheckFailed(
        f"refusing to push {tag}: it already exists in the registry with render hash {shown}, "
        f"this image is {local_hash[:12]}; immutable tags never move",
        fix="bump a pin so the descriptive tag changes, or push only the floating aliases",
    )
