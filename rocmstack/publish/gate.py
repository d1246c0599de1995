"""``rocmstack publish IMAGE --reports DIR``: push an image's tags only after it passed validation.

The gate: every arch in the image's ``dev.rocmstack.gpu-archs`` label has a passing report that ran on a
GPU of that arch; each report was made from this very image (its render hash equals the image's
``dev.rocmstack.render-hash`` label and its image id is this image's), ran the doctor, the smoke and the
bench on the GPU with the expected GPU count and no doctor check skipped beyond ``SKIP_ALLOWED``; and no
immutable tag moves (the immutability guard, ``rocmstack.publish.push``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from rocmstack.build.tags import CONTENT_HEX, CONTENT_PREFIX, TagSet, arch_field
from rocmstack.container import engine as engines
from rocmstack.container.engine import check_choice, qualify
from rocmstack.container.reference import parse_reference
from rocmstack.contract import ARCHS_LABEL, RECIPE_LABEL, RENDER_HASH_LABEL
from rocmstack.errors import CheckFailed, EngineError, InputError, printable, quoted
from rocmstack.publish.push import copy_by_digest, guard_verdict, push_tags
from rocmstack.publish.sign import Signer, pushed_digest, sign
from rocmstack.recipe.load import load_recipe
from rocmstack.validate.report import REPORT_JSON, load
from rocmstack.validate.schema import HOST_CHECKED

# Doctor checks that may skip on a healthy GPU node, because they look at a component the image may not
# have; any other skipped check (or one left out with validate --skip) keeps the gate shut.
SKIP_ALLOWED = {
    "vllm-python": "the image has no vLLM",
    "vllm-flavour": "the image has no vLLM",
    "sglang-env": "the image has no SGLang",
    "amdsmi-duplicate": "the image has no libamd_smi to load twice",
    "gpu-partition": "the GPU exposes no compute-partition mode",
}
GPU_DEVICE = "cuda"  # torch's device type on ROCm and CUDA alike


def _refuse(image: str, why: str, fix: str) -> CheckFailed:
    return CheckFailed(f"refusing to publish {image}: {why}", fix=fix)


def check_report(
    report: dict[str, Any],
    labels: dict[str, str],
    image_id: str,
    image: str,
    allow_skip: frozenset[str] = frozenset(),
) -> str:
    """The render hash to publish under; CheckFailed names the first reason the gate stays shut.

    ``allow_skip`` extends ``SKIP_ALLOWED`` for this publish only (the publisher's decision, on the host).
    """
    rerun = f"run `rocmstack validate {image} --expect-gpus N --report DIR` on a GPU runner"
    if not report.get("passed"):
        raise _refuse(
            image,
            f"its validation report did not pass ({report.get('verdict')})",
            "fix what the report names and run `rocmstack validate` again",
        )
    label = labels.get(RENDER_HASH_LABEL)
    if not label:
        raise _refuse(
            image, f"it has no {RENDER_HASH_LABEL} label", "publish only images built by `rocmstack build`"
        )
    reported = report.get("render_hash")
    if reported != label:
        shown = reported[:12] if reported else "none"
        raise _refuse(
            image,
            f"the report is for render hash {shown}, the image is {label[:12]}",
            "validate this image, then publish it with that report",
        )
    if report.get("mode") != "container":
        raise _refuse(
            image, "the report comes from `validate --in-place`, which checks a node, not this image", rerun
        )
    if host_facts(report) is None:
        raise _refuse(
            image,
            f"the report has no {HOST_CHECKED} (the GPU arch and options the host saw, written by "
            "`rocmstack validate IMAGE` over the image's own claims)",
            rerun,
        )
    recorded = _bare(str((report.get("image") or {}).get("id") or ""))
    if not recorded or not _bare(image_id):
        raise _refuse(image, "the report records no image id", rerun)
    if recorded != _bare(image_id):
        raise _refuse(
            image,
            f"the report was made from image {recorded[:12]}, this is {_bare(image_id)[:12]} "
            "(same render, another build)",
            "validate the image you publish",
        )
    _check_stages(report, image, rerun)
    _check_gpus(report, image, rerun)
    _check_doctor_skips(report, image, rerun, allow_skip)
    return label


def _check_stages(report: dict[str, Any], image: str, rerun: str) -> None:
    status = {s.get("name"): s.get("status") for s in report.get("stages") or []}
    for name in ("doctor", "smoke", "bench"):
        if status.get(name) != "pass":
            raise _refuse(image, f"the {name} stage did not pass ({status.get(name) or 'absent'})", rerun)
    smoke = ((report.get("smoke") or {}).get("summary") or {}).get("device")
    bench = (((report.get("bench") or {}).get("report") or {}).get("device") or {}).get("type")
    for name, device in (("smoke", smoke), ("bench", bench)):
        if device != GPU_DEVICE:
            raise _refuse(image, f"the {name} stage ran on {device or 'an unknown device'}, not a GPU", rerun)


def _doctor(report: dict[str, Any]) -> dict[str, Any]:
    return (report.get("doctor") or {}).get("report") or {}


def host_facts(report: dict[str, Any]) -> dict[str, Any] | None:
    """What the host wrote over the image's claims: the arch its driver has, the options it ran with. The
    gate reads these and nothing the image said about itself (``gpu_arch``/``options`` may echo the image)."""
    facts = report.get(HOST_CHECKED)
    if not isinstance(facts, dict) or not isinstance(facts.get("options"), dict):
        return None
    return facts


def _check_gpus(report: dict[str, Any], image: str, rerun: str) -> None:
    expected = (host_facts(report) or {}).get("options", {}).get("expect_gpus")
    if not isinstance(expected, int) or isinstance(expected, bool) or expected < 1:
        raise _refuse(image, "the report was made without --expect-gpus (GPU count unchecked)", rerun)
    platform = _doctor(report).get("platform") or {}
    seen = platform.get("visible_gpus")
    if seen is None:
        seen = platform.get("physical_gpus")
    if seen != expected:
        raise _refuse(image, f"the doctor saw {seen} GPU(s), the report expected {expected}", rerun)


def _check_doctor_skips(report: dict[str, Any], image: str, rerun: str, allow_skip: frozenset[str]) -> None:
    doctor = _doctor(report)
    if not doctor.get("checks"):
        raise _refuse(image, "the report holds no doctor checks", rerun)
    left_out = list((host_facts(report) or {}).get("options", {}).get("doctor_skip") or [])
    skipped = [c.get("id") for c in doctor["checks"] if c.get("status") == "skip"]
    allowed = set(SKIP_ALLOWED) | allow_skip
    bad = [str(c) for c in (*left_out, *skipped) if c not in allowed]
    if bad:
        raise _refuse(
            image,
            f"doctor check(s) {', '.join(bad)} skipped (only {', '.join(sorted(allowed))} may skip)",
            "run every doctor check on a GPU runner (no --skip)",
        )


def report_arch(report: dict[str, Any]) -> str | None:
    """The arch the host's own driver saw during the run (None without one, or on a mixed node)."""
    arch = (host_facts(report) or {}).get("gpu_arch")
    return arch if isinstance(arch, str) and arch else None


def image_archs(labels: dict[str, str]) -> list[str]:
    return sorted({a.strip() for a in labels.get(ARCHS_LABEL, "").replace(",", ";").split(";") if a.strip()})


def check_reports(
    reports: list[dict[str, Any]],
    labels: dict[str, str],
    image_id: str,
    image: str,
    allow_skip: frozenset[str] = frozenset(),
) -> tuple[str, dict[str, dict[str, Any]]]:
    """Every arch the image claims needs its own passing report made from this image; (render hash,
    report per arch). A report for an arch the image does not claim, or two for one arch, is refused."""
    claimed = image_archs(labels)
    if not claimed:
        raise _refuse(
            image, f"it has no {ARCHS_LABEL} label", "publish only images built by `rocmstack build`"
        )
    if not reports:
        raise _refuse(image, "no validation report given", "pass --reports DIR for every arch leg")
    by_arch: dict[str, dict[str, Any]] = {}
    render_hash = ""
    for report in reports:
        arch = report_arch(report)
        try:
            render_hash = check_report(report, labels, image_id, image, allow_skip)
        except CheckFailed as exc:
            if arch is None:
                raise
            raise CheckFailed(f"{printable(arch)}: {exc.message}", fix=exc.fix) from None
        if arch is None:
            raise _refuse(
                image,
                f"a report ({printable(report.get('verdict'))}) records no GPU arch the host saw it run on",
                "validate on a GPU runner of one arch",
            )
        if arch not in claimed:
            raise _refuse(
                image,
                f"a report ran on {quoted(arch)}, the image claims {';'.join(claimed)}",
                "pass only the reports of this image's legs",
            )
        if arch in by_arch:
            raise _refuse(image, f"two reports for {arch}", "pass one report per arch leg")
        by_arch[arch] = report
    missing = [a for a in claimed if a not in by_arch]
    if missing:
        raise _refuse(
            image,
            f"it claims {';'.join(claimed)} but no report ran on {', '.join(missing)}",
            "validate the image on a runner of every arch it claims",
        )
    return render_hash, by_arch


def load_reports(dirs: list[Path]) -> list[dict[str, Any]]:
    """The reports of an image's legs: each DIR holds report.json, or one folder per leg that does (how
    CI downloads several artifacts into one folder)."""

    reports = []
    for d in dirs:
        legs = [d] if (d / REPORT_JSON).is_file() else sorted(p.parent for p in d.glob(f"*/{REPORT_JSON}"))
        if not legs:
            raise InputError(
                f"--reports {quoted(str(d))}: no {REPORT_JSON} in it or in a folder under it",
                fix="pass the folder `rocmstack validate IMAGE --report DIR` wrote (once per arch leg)",
            )
        reports += [load(leg) for leg in legs]
    return reports


def _bare(image_id: str) -> str:
    return image_id.removeprefix("sha256:")


def _aliases_of_recipe(labels: dict[str, str]) -> set[str]:
    """The floating aliases the recipe declares (plain and with the ``_<arch>`` suffix); empty if unknown."""
    name = labels.get(RECIPE_LABEL)
    if not name:
        return set()

    try:
        recipe, _ = load_recipe(name)
    except Exception:
        return set()
    archs = arch_field(tuple(a for a in labels.get(ARCHS_LABEL, "").replace(";", ",").split(",") if a))
    aliases = {str(a) for a in recipe.publish.aliases}
    return aliases | {f"{a}_{archs}" for a in aliases if archs}


def tag_set(
    image: str, repo_tags: list[str], labels: dict[str, str], render_hash: str
) -> tuple[TagSet, set[str]]:
    """The tags to push: every local tag of this image in IMAGE's repository, and the immutable ones
    TagSet cannot hold (it has one descriptive tag).

    The content tag (``r-<hash>``) and every tag the recipe does not declare as a floating alias are
    immutable, so the guard covers them; when the recipe is unknown, every tag is treated as immutable.
    """

    ref = parse_reference(image)
    repo = ref.name
    names = {repo, qualify(repo)}
    tags = sorted({t.rsplit(":", 1)[1] for t in repo_tags if t.rsplit(":", 1)[0] in names})
    if ref.tag and ref.tag not in tags:
        tags.append(ref.tag)
    content = CONTENT_PREFIX + render_hash[:CONTENT_HEX]
    if content not in tags:
        raise CheckFailed(
            f"refusing to publish {image}: it is not tagged {repo}:{content} (the content tag of its "
            f"render hash)",
            fix="publish images tagged by `rocmstack build`",
        )
    floating = _aliases_of_recipe(labels)
    immutable = [t for t in tags if t != content and t not in floating]
    descriptive = immutable[0] if immutable else content
    extra = immutable[1:]
    aliases = tuple(t for t in tags if t in floating)
    return TagSet(repository=repo, descriptive=descriptive, content=content, aliases=(*extra, *aliases)), set(
        extra
    )


_HEX64 = re.compile(r"[0-9a-f]{64}")


def publish(
    *,
    image: str,
    reports: list[dict[str, Any]],
    engine_choice: str,
    dry_run: bool,
    console: Any,
    allow_skip: frozenset[str] = frozenset(),
    signing: Signer | None = None,
) -> dict[str, Any]:
    """Check the gate, then push (through the guarded push) and, with ``signing``, sign the digest the
    content tag holds once it is this image. Returns what was (or would be) pushed and signed."""

    engine = engines.detect(engines.store_choice(engine_choice))
    info = engines.inspect_image(engine, image)
    render_hash, by_arch = check_reports(reports, info["labels"], info["id"], image, allow_skip)
    if not _HEX64.fullmatch(render_hash):
        raise CheckFailed(
            f"refusing to publish {image}: label {RENDER_HASH_LABEL}={render_hash!r} is not a render hash"
        )
    tags, extra_immutable = tag_set(image, info["repo_tags"], info["labels"], render_hash)
    guarded = (*tags.immutable, *sorted(extra_immutable))
    result: dict[str, Any] = {
        "image": image,
        "image_id": info["id"],
        "render_hash": render_hash,
        "validated_archs": sorted(by_arch),
        "allowed_skips": sorted(allow_skip),
        "engine": engine.name,
        "refs": list(tags.refs()),
        "immutable": [tags.ref(t) for t in guarded],
        "dry_run": dry_run,
    }
    # Guard every immutable tag before anything is pushed, so --dry-run answers exactly what a push would.
    for tag in guarded:
        guard_verdict(engine, tags.ref(tag), render_hash, image_id=info["id"])
    if dry_run:
        result["pushed"] = []
        return result
    # The image that passed the gate is pushed by its id (podman), not by a name that could move meanwhile.
    result["pushed"] = push_tags(engine, tags, render_hash, "all", console, image_id=info["id"])
    if signing:
        content = tags.ref(tags.content)
        result["signed"] = [sign(signing, engine, content, pushed_digest(engine, content, info["id"]))]
    return result


def promoted_image_id(remote: dict[str, Any], reports: list[dict[str, Any]], ref: str) -> str:
    """The image id the gate compares the reports with, for the manifest REMOTE the content tag REF holds.

    A single-platform manifest names its config digest: the image id itself. A multi-platform index has
    none, and "unknown" is never taken for "the same build": then the index digest must be one the
    validated image was pulled by (a report's ``image.digest`` or ``image.repo_digests``), or it is refused.
    """
    config = remote.get("config")
    if config:
        return str(config)
    digest = remote.get("digest")
    for report in reports:
        img = report.get("image") or {}
        seen = {str(d).rsplit("@", 1)[-1] for d in img.get("repo_digests") or []} | {str(img.get("digest"))}
        if digest not in seen:
            raise CheckFailed(
                f"refusing to promote {ref}: it is a multi-platform index ({digest}) with no image id, and "
                f"a report ({printable(report.get('verdict'))}) was not made from an image pulled by that digest",
                fix="validate the image the content tag holds (pull it by its tag on the runner), then promote",
            )
    return str((reports[0].get("image") or {}).get("id") or "") if reports else ""


def promote(
    *,
    tags: Any,
    render_hash: str,
    reports: list[dict[str, Any]],
    engine: Any,
    console: Any,
    allow_skip: frozenset[str] = frozenset(),
    signing: Signer | None = None,
) -> list[dict[str, Any]]:
    """``rocmstack publish --promote``: the same gate as ``publish``, for the registry's content tag.

    The content tag's manifest is read once; its labels and image id (config digest) face the gate, and
    the registry-side copy is of that manifest, by digest. A tag moved to another build between the
    validation and the promotion (or meanwhile) is refused, not promoted. With ``signing``, that digest is
    signed too: one more row, ``{"ref": repo@digest, "signed": true, ...}``.
    """

    content = tags.ref(tags.content)
    remote = engines.remote_manifest(engine, content)
    if remote is None or not remote.get("digest"):
        raise EngineError(
            f"cannot promote: {content} is not in the registry",
            fix="build with --push --push-tags content first",
        )
    source = engines.by_digest(content, remote["digest"])
    labels = engines.remote_labels(engine, source) or {}
    image_id = promoted_image_id(remote, reports, content)
    gated, _ = check_reports(reports, labels, image_id, content, allow_skip)
    if gated != render_hash:
        raise CheckFailed(
            f"refusing to promote {content}: it holds render hash {gated[:12]}, the recipe renders "
            f"{render_hash[:12]}",
            fix="promote the recipe and arch set the reports were made for",
        )
    promoted = copy_by_digest(engine, tags, render_hash, console, checked=remote)
    if signing:
        signed = sign(signing, engine, content, str(remote["digest"]))
        console.print(f"  signed {signed['ref']} ({signing.describe()})")
        promoted.append({**signed, "pushed": False, "signed": True})
    return promoted


def check_engine_choice(engine: str) -> str:
    """publish takes every engine name; buildah stands for podman's store, which it shares."""
    check_choice(engine, need="run")
    return engine
