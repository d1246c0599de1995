"""A CycloneDX SBOM of an image, built from its lock entry: ``sbom_document(entry, patches) -> dict``.

Pure: the same lock entry gives the same bytes (no timestamp, a serial number derived from the content),
so the file is part of the rendered context and of the render hash. It reads both lock layouts:

- ``packages`` (every Python package of the image: name, version, hashes, the layer installing it) and
  ``git`` (every git component: url, ref, commit) when the lock holds the resolved closure;
- otherwise ``components`` (the recipe's components: source, package, version, url, ref).

The render hash and the source revision in a lock are never read: the SBOM describes what is built, and
the render hash covers the SBOM.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from cyclonedx.model import (
    AttachedText,
    ExternalReference,
    ExternalReferenceType,
    HashAlgorithm,
    HashType,
    Property,
    XsUri,
)
from cyclonedx.model.bom import Bom
from cyclonedx.model.component import (
    Commit,
    Component,
    ComponentType,
    Diff,
    Patch,
    PatchClassification,
    Pedigree,
)
from cyclonedx.model.issue import IssueClassification, IssueType
from cyclonedx.model.tool import ToolRepository
from cyclonedx.output.json import JsonV1Dot6
from cyclonedx.schema import SchemaVersion
from packageurl import PackageURL

from rocmstack import __version__
from rocmstack.contract import LABEL_NS

SCHEMA_VERSION = SchemaVersion.V1_6
NS = LABEL_NS
_ALGORITHMS = {
    "sha256": HashAlgorithm.SHA_256,
    "sha384": HashAlgorithm.SHA_384,
    "sha512": HashAlgorithm.SHA_512,
}
_COMMIT = re.compile(r"[0-9a-f]{40}([0-9a-f]{24})?")
# A fixed namespace: one lock entry always gets the same serial number.
_SERIAL_NS = uuid.UUID("9f0c5a4e-3d1b-5b7e-8a49-6b1f2c0d7e31")


def _canonical_name(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _hashes(values: Iterable[str]) -> list[HashType]:
    out = []
    for value in values:
        alg, _, content = str(value).partition(":")
        if alg in _ALGORITHMS and content:
            out.append(HashType(alg=_ALGORITHMS[alg], content=content))
    return out


def _props(**values: object) -> list[Property]:
    return [Property(name=f"{NS}:{k.replace('_', '-')}", value=str(v)) for k, v in values.items() if v]


def _base(entry: Mapping[str, Any]) -> Component:
    base = entry.get("base") or {}
    image = str(base.get("image") or "unknown")
    digest = base.get("digest") or entry.get("base_digest")
    repo, _, tag = image.rpartition(":") if ":" in image.rsplit("/", 1)[-1] else (image, "", "")
    if digest:
        # purl-spec oci: the digest is the version, the repository and tag are qualifiers.
        host = repo if "." in repo.split("/", 1)[0] else f"docker.io/{repo}"
        purl = PackageURL(
            type="oci",
            name=repo.rsplit("/", 1)[-1].lower(),
            version=digest,
            qualifiers={"repository_url": host, **({"tag": tag} if tag else {})},
        )
    else:
        purl = None
    return Component(
        type=ComponentType.CONTAINER,
        name=repo,
        version=tag or None,
        bom_ref=f"base:{image}",
        purl=purl,
        hashes=_hashes([digest]) if digest else [],
        properties=_props(
            role="base image",
            rocm=base.get("rocm"),
            python=base.get("python"),
            torch=base.get("torch"),
            digest_pinned="yes" if digest else "no: the recipe names a tag, not a digest",
        ),
    )


def _git_component(name: str, url: str | None, ref: str | None, commit: str | None) -> Component:
    commit = commit or (ref if ref and _COMMIT.fullmatch(ref) else None)
    purl = None
    if url:
        match = re.fullmatch(r"https://github\.com/([^/]+)/([^/]+?)(?:\.git)?/?", url)
        if match and commit:
            purl = PackageURL(
                type="github", namespace=match[1].lower(), name=match[2].lower(), version=commit
            )
        elif commit:
            purl = PackageURL(type="generic", name=name, version=commit, qualifiers={"vcs_url": f"git+{url}"})
    return Component(
        type=ComponentType.LIBRARY,
        name=name,
        version=commit or ref,
        bom_ref=f"git:{name}",
        purl=purl,
        external_references=[ExternalReference(type=ExternalReferenceType.VCS, url=XsUri(url))]
        if url
        else [],
        pedigree=Pedigree(commits=[Commit(uid=commit, url=XsUri(url) if url else None)]) if commit else None,
        properties=_props(source="git", ref=ref, commit=commit or "not locked (a branch or tag ref)"),
    )


def _components(entry: Mapping[str, Any]) -> list[Component]:
    """Every package the lock resolved (with hashes), every git component at its commit, and every recipe
    component neither covers (provided by the base or the SDK, or not lockable), as the recipe pins it."""
    comps = [
        Component(
            type=ComponentType.LIBRARY,
            name=str(p["name"]),
            version=str(p["version"]),
            bom_ref=f"pypi:{_canonical_name(str(p['name']))}",
            purl=PackageURL(type="pypi", name=_canonical_name(str(p["name"])), version=str(p["version"])),
            hashes=_hashes(p.get("hashes") or []),
            properties=_props(source="pypi", layer=p.get("layer")),
        )
        for p in entry.get("packages") or []
    ]
    git = entry.get("git") or {}
    for name, g in sorted(git.items()):  # the lock's {component: {url, ref, commit}}
        comps.append(_git_component(name, g.get("url"), g.get("ref"), g.get("commit")))
    locked = {_canonical_name(str(p["name"])) for p in entry.get("packages") or []}
    for name, c in sorted((entry.get("components") or {}).items()):
        source = c.get("source")
        package = c.get("package") or name
        if name in git or (source == "pypi" and _canonical_name(package) in locked):
            continue
        if source == "git":
            comps.append(_git_component(name, c.get("url"), c.get("ref"), c.get("commit")))
            continue
        version = c.get("version")
        purl = (
            PackageURL(type="pypi", name=_canonical_name(package), version=version)
            if source == "pypi" and version
            else None
        )
        comps.append(
            Component(
                type=ComponentType.LIBRARY,
                name=package,
                version=version,
                bom_ref=f"{source}:{name}",
                purl=purl,
                properties=_props(source=source, component=name if package != name else None),
            )
        )
    return comps


def _attach_patches(
    comps: list[Component], patch_ids: Sequence[str], specs: Mapping[str, Mapping[str, Any]]
) -> list[str]:
    """Each applied patch goes into the pedigree of the component it changes; ids it cannot place are
    returned (they are still named on the image component)."""
    by_name = {c.bom_ref.value.split(":", 1)[1]: c for c in comps if c.bom_ref.value}
    by_name.update({c.name: c for c in comps})
    unplaced = []
    for pid in patch_ids:
        spec = specs.get(pid)
        target = by_name.get(str(spec.get("component"))) if spec else None
        if spec is None or target is None:
            unplaced.append(pid)
            continue
        upstream = [XsUri(u) for u in spec.get("upstream") or []]
        patch = Patch(
            type=PatchClassification.UNOFFICIAL,
            diff=Diff(
                text=AttachedText(
                    content=json.dumps(spec, sort_keys=True, separators=(",", ":")),
                    content_type="application/json",
                )
            ),
            resolves=[
                IssueType(
                    type=IssueClassification.DEFECT, id=pid, name=spec.get("summary"), references=upstream
                )
            ],
        )
        pedigree = target.pedigree or Pedigree()
        pedigree.patches.add(patch)
        target.pedigree = pedigree
    return unplaced


def sbom_document(entry: Mapping[str, Any], patches: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """The CycloneDX 1.6 JSON document of one lock entry; ``patches`` are the applied patches' specs."""
    specs = {str(p["id"]): p for p in patches}
    patch_ids = [str(p) for p in entry.get("patches") or []]
    archs = ";".join(entry.get("gpu_archs") or [])
    recipe = str(entry.get("recipe") or "unknown")
    comps = [_base(entry), *_components(entry)]
    unplaced = _attach_patches(comps, patch_ids, specs)
    image = Component(
        type=ComponentType.CONTAINER,
        name=f"rocmstack/{recipe}",
        version=archs or None,
        bom_ref=f"image:{recipe}:{archs}",
        properties=_props(
            recipe=recipe,
            gpu_archs=archs,
            patches=",".join(patch_ids),
            patches_unplaced=",".join(unplaced),
            unverified=",".join(str(u) for u in entry.get("unverified") or []),
        ),
    )
    bom = Bom(components=comps)
    bom.metadata.component = image
    bom.metadata.tools = ToolRepository(
        components=[Component(type=ComponentType.APPLICATION, name="rocmstack", version=__version__)]
    )
    bom.register_dependency(image, comps)
    doc: dict[str, Any] = json.loads(JsonV1Dot6(bom).output_as_string())
    # A timestamp would make two renders of one lock differ; the image's creation time is in its config.
    doc["metadata"].pop("timestamp", None)
    doc.pop("serialNumber", None)
    digest = hashlib.sha256(_dumps(doc)).hexdigest()
    doc["serialNumber"] = uuid.uuid5(_SERIAL_NS, digest).urn
    return doc


def _dumps(doc: Mapping[str, Any]) -> bytes:
    return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=True).encode() + b"\n"


def sbom_bytes(entry: Mapping[str, Any], patches: Sequence[Mapping[str, Any]] = ()) -> bytes:
    """The SBOM file written into the image (``contract.SBOM_PATH``)."""
    return _dumps(sbom_document(entry, patches))


def schema_errors(text: str) -> str | None:
    """None when TEXT is valid CycloneDX 1.6 JSON (the strict schema shipped with cyclonedx-python-lib)."""
    from cyclonedx.validation.json import JsonStrictValidator

    error = JsonStrictValidator(SCHEMA_VERSION).validate_str(text)
    return None if error is None else str(error)
