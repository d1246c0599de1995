"""The image's SBOM: CycloneDX 1.6 JSON from the lock entry, valid against the schema cyclonedx-python-lib
ships (strict), byte-stable, in the rendered context and covered by the render hash."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rocmstack.patches import load_patches
from rocmstack.render.sbom import sbom_bytes, sbom_document, schema_errors

ROOT = Path(__file__).resolve().parents[2]
LOCKS = sorted((ROOT / "recipes").glob("*.lock.json"))
SPECS = [p.spec() for p in load_patches().values()]
COMMIT = "98dff2a81d747d1dba01a47f939f48c3526d4206"
# The resolved-closure layout of a lock entry: packages with hashes and the layer installing them, git
# components with their commits (values from PyPI's JSON API for ray 2.58.0 / numpy 1.26.4 wheels).
CLOSURE = {
    "recipe": "vime-megatron-vllm-rocm7.14",
    "gpu_archs": ["gfx950"],
    "render_hash": "ab" * 32,
    "base": {"image": "rocm/primus:v26.4", "digest": "sha256:" + "64" * 32, "rocm": "7.14"},
    "packages": [
        {"name": "Ray", "version": "2.58.0", "hashes": ["sha256:" + "1a" * 32], "layer": "ray"},
        {
            "name": "numpy",
            "version": "1.26.4",
            "hashes": ["sha256:" + "2b" * 32, "sha256:" + "3c" * 32],
            "layer": "base",
        },
    ],
    "git": {
        "vllm": {"url": "https://github.com/vllm-project/vllm", "ref": "main", "commit": COMMIT},
        "tms": {"url": "https://example.org/tms.git", "ref": "v1", "commit": "d" * 40},
    },
    "patches": ["rtld-local"],
}


def _entries():
    for path in LOCKS:
        for arch, entry in json.loads(path.read_text())["entries"].items():
            yield pytest.param(entry, id=f"{path.name.removesuffix('.lock.json')}-{arch}")


@pytest.mark.parametrize("entry", list(_entries()))
def test_every_shipped_lock_gives_a_valid_sbom(entry):
    text = sbom_bytes(entry, SPECS).decode()
    assert schema_errors(text) is None
    doc = json.loads(text)
    assert doc["bomFormat"] == "CycloneDX" and doc["specVersion"] == "1.6"
    names = {c["name"] for c in doc["components"]}
    assert {c.get("package") or n for n, c in entry["components"].items()} <= names
    base = doc["components"][0]
    assert base["type"] == "container" and f"{base['name']}:{base['version']}" == entry["base"]["image"]
    if entry["base"]["digest"]:
        assert base["hashes"] == [
            {"alg": "SHA-256", "content": entry["base"]["digest"].removeprefix("sha256:")}
        ]
        assert base["purl"].startswith(f"pkg:oci/{base['name'].rsplit('/', 1)[-1]}@sha256:")
    for name, c in entry["components"].items():
        if c["source"] == "git":
            comp = next(x for x in doc["components"] if x["bom-ref"] == f"git:{name}")
            assert comp["externalReferences"] == [{"type": "vcs", "url": c["url"]}]
    patched = {
        r["id"]
        for c in doc["components"]
        for p in (c.get("pedigree") or {}).get("patches", [])
        for r in p["resolves"]
    }
    image_props = {p["name"]: p["value"] for p in doc["metadata"]["component"]["properties"]}
    assert set(entry["patches"]) == patched | set(
        filter(None, image_props.get("dev.rocmstack:patches-unplaced", "").split(","))
    )
    assert image_props.get("dev.rocmstack:patches", "") == ",".join(entry["patches"])


def test_the_resolved_closure_layout():
    doc = sbom_document(CLOSURE, SPECS)
    assert schema_errors(json.dumps(doc)) is None
    by_ref = {c["bom-ref"]: c for c in doc["components"]}
    ray = by_ref["pypi:ray"]
    assert ray["purl"] == "pkg:pypi/ray@2.58.0" and ray["hashes"] == [
        {"alg": "SHA-256", "content": "1a" * 32}
    ]
    assert {"name": "dev.rocmstack:layer", "value": "ray"} in ray["properties"]
    assert len(by_ref["pypi:numpy"]["hashes"]) == 2
    vllm = by_ref["git:vllm"]
    assert vllm["version"] == COMMIT and vllm["purl"] == f"pkg:github/vllm-project/vllm@{COMMIT}"
    assert vllm["pedigree"]["commits"] == [{"uid": COMMIT, "url": "https://github.com/vllm-project/vllm"}]
    assert by_ref["git:tms"]["purl"].startswith("pkg:generic/tms@" + "d" * 40)
    # The closure layout wins over the recipe's components when both are there.
    assert "pypi:ray" in {
        c["bom-ref"] for c in sbom_document({**CLOSURE, "components": {"x": {}}})["components"]
    }
    # rtld-local patches rocm-sdk, which this closure lists under no name: named on the image instead.
    props = {p["name"]: p["value"] for p in doc["metadata"]["component"]["properties"]}
    assert props["dev.rocmstack:patches-unplaced"] == "rtld-local"


def test_stable_bytes_and_no_render_hash_or_revision():
    a = sbom_bytes(CLOSURE, SPECS)
    assert a == sbom_bytes(json.loads(json.dumps(CLOSURE)), SPECS)
    other = {**CLOSURE, "render_hash": "cd" * 32, "rocmstack": {"revision": "x"}}
    assert sbom_bytes(other, SPECS) == a  # the render hash covers the SBOM, not the other way round
    doc = json.loads(a)
    assert "timestamp" not in doc["metadata"] and doc["serialNumber"].startswith("urn:uuid:")
    moved = {**CLOSURE["git"], "vllm": {**CLOSURE["git"]["vllm"], "commit": "e" * 40}}
    bumped = json.loads(sbom_bytes({**CLOSURE, "git": moved}, SPECS))
    assert bumped["serialNumber"] != doc["serialNumber"]


def test_the_schema_check_catches_a_broken_sbom():
    doc = sbom_document(CLOSURE, SPECS)
    doc["components"][0]["type"] = "docker-image"
    assert schema_errors(json.dumps(doc))
    assert schema_errors(json.dumps({k: v for k, v in sbom_document(CLOSURE).items() if k != "bomFormat"}))


def test_rendered_context_carries_the_sbom_and_the_hash_covers_it(monkeypatch):
    from rocmstack.recipe.load import load_recipe
    from rocmstack.recipe.resolve import resolve
    from rocmstack.render import context

    recipe, source = load_recipe("verl-0.9.0-rocm10")
    resolved = resolve(recipe, source=source, gpu_arch="gfx950")
    rendered = context.render(resolved, revision=("abc", "1970-01-01T00:00:00Z"))
    sbom = rendered.files[context.SBOM_FILE]
    assert schema_errors(sbom.decode()) is None
    lock = json.loads(rendered.files["rocmstack/lock.json"])
    assert sbom == sbom_bytes(
        lock, [json.loads(v) for k, v in rendered.files.items() if k.startswith("rocmstack/patches/")]
    )
    assert "COPY --chmod=0644 rocmstack/sbom.cdx.json /opt/rocmstack/sbom.cdx.json" in rendered.dockerfile
    # Another SBOM for the same recipe (a newer rocmstack naming itself in it) is another render hash.
    monkeypatch.setattr("rocmstack.render.sbom.__version__", "0.0.0-other")
    assert context.render(resolved, revision=("abc", "x")).render_hash != rendered.render_hash
