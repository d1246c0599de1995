"""The immutability guard of pushes and promotions (rocmstack.publish.push)."""

from __future__ import annotations

import pytest

from rocmstack.contract import RENDER_HASH_LABEL


def test_guard_refuses_a_tag_holding_another_build_of_the_same_render(monkeypatch):
    """The registry side is what skopeo reports for a tag: its labels and its config digest (image id)."""
    from rocmstack.container import engine as engines
    from rocmstack.errors import CheckFailed
    from rocmstack.publish import push

    h = "a" * 64
    monkeypatch.setattr(engines, "remote_labels", lambda *a, **k: {RENDER_HASH_LABEL: h})
    monkeypatch.setattr(
        engines, "remote_manifest", lambda *a, **k: {"digest": "sha256:m", "config": "sha256:" + "1" * 64}
    )
    eng = engines.Engine(name="podman", argv=("podman",), version="4")
    assert push.guard_verdict(eng, "r.io/x:t", h) == "skip"  # render hash alone: the old answer
    assert push.guard_verdict(eng, "r.io/x:t", h, image_id="1" * 64) == "skip"  # this very build
    with pytest.raises(
        CheckFailed,
        match=r"render hash aaaaaaaaaaaa but from another build \(image 111111111111, this is 222222222222\)",
    ):
        push.guard_verdict(eng, "r.io/x:t", h, image_id="sha256:" + "2" * 64)


def test_guard_judges_a_multi_platform_index_by_the_images_it_lists(monkeypatch):
    """A tag holding an index: the index's digest is no build's image, so 'this build' means every image it
    lists is this build (docker's attestation manifests are not images and remote_manifest leaves them out)."""
    from rocmstack.container import engine as engines
    from rocmstack.errors import CheckFailed
    from rocmstack.publish import push

    h, mine, other = "a" * 64, "sha256:" + "1" * 64, "sha256:" + "2" * 64
    monkeypatch.setattr(engines, "remote_labels", lambda *a, **k: {RENDER_HASH_LABEL: h})
    eng = engines.Engine(name="podman", argv=("podman",), version="4")

    def holding(**remote):
        monkeypatch.setattr(
            engines, "remote_manifest", lambda *a, **k: {"digest": "sha256:i", "config": None, **remote}
        )

    holding(index=True, images=[mine])
    assert push.guard_verdict(eng, "r.io/x:t", h, image_id=mine) == "skip"
    for images in ([other], [mine, other], []):
        holding(index=True, images=images)
        with pytest.raises(CheckFailed, match="as a multi-platform index whose images"):
            push.guard_verdict(eng, "r.io/x:t", h, image_id=mine)
    holding(index=True, images=[mine], more=True)  # more images than were read: not known to be this build
    with pytest.raises(CheckFailed):
        push.guard_verdict(eng, "r.io/x:t", h, image_id=mine)
    holding()  # a manifest naming no config: not known to be this build either
    with pytest.raises(CheckFailed, match=r"another build \(image unknown"):
        push.guard_verdict(eng, "r.io/x:t", h, image_id=mine)
