"""The image contract: where a rocmstack image keeps its provenance and which labels it carries.

render and build write it; inspect, diff, validate, publish, smoke and the doctor read it. One home, so a
writer and its readers cannot drift apart. (The in-context helpers under rocmstack/incontext/ run before
rocmstack is installed in the image and spell ROOT_ENV and ROOT themselves.)"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

ROOT_ENV = "ROCMSTACK_ROOT"  # moves the folder below, for tests and for nodes that are not images
ROOT = "/opt/rocmstack"
LOCK_PATH = f"{ROOT}/lock.json"
SBOM_PATH = f"{ROOT}/sbom.cdx.json"

OCI_NS = "org.opencontainers.image"
LABEL_NS = "dev.rocmstack"
SOURCE_LABEL = f"{OCI_NS}.source"
RECIPE_LABEL = f"{LABEL_NS}.recipe"
# A lab's recipe in a git repository of its own: that repository's commit and URL (rocmstack's are the OCI ones)
RECIPE_REVISION_LABEL = f"{LABEL_NS}.recipe.revision"
RECIPE_SOURCE_LABEL = f"{LABEL_NS}.recipe.source"
RENDER_HASH_LABEL = f"{LABEL_NS}.render-hash"
ARCHS_LABEL = f"{LABEL_NS}.gpu-archs"
PINS_LABEL = f"{LABEL_NS}.pins"
PATCHES_LABEL = f"{LABEL_NS}.patches"
VERSION_LABEL = f"{LABEL_NS}.version"
IGNORED_RULES_LABEL = f"{LABEL_NS}.ignored-rules"
# the labels that are provenance (shown by inspect, kept in reports)
PROVENANCE_PREFIXES = (f"{LABEL_NS}.", f"{OCI_NS}.")


def image_root(environ: Mapping[str, str]) -> Path:
    """The contract's folder on this node: ``$ROCMSTACK_ROOT``, else ROOT."""
    return Path(environ.get(ROOT_ENV) or ROOT)
