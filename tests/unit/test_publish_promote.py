"""rocmstack.publish.promote: no promotion without reports, and only real doctor check ids as accepted skips.
(The promotion itself, through podman's store with --engine buildah, runs against a real registry in
tests/integration/test_build_podman.py.)"""

from __future__ import annotations

import pytest

from rocmstack.build.recipe_tags import TagRequest
from rocmstack.errors import InputError
from rocmstack.publish import promote


def test_no_reports_is_one_line():
    with pytest.raises(InputError, match="--promote needs --reports DIR"):
        promote.promote_recipe(TagRequest("tiny"), reports=[], allow_skip=[], insecure=False, engine="auto")


def test_accepted_skips_take_comma_lists_and_refuse_unknown_ids():
    assert promote.accepted_skips(["gpu-count,ray-env", "lock-drift"]) == {
        "gpu-count",
        "ray-env",
        "lock-drift",
    }
    with pytest.raises(InputError, match="no-such-check"):
        promote.accepted_skips(["no-such-check"])
