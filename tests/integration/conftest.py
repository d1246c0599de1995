"""Fixtures shared by the integration tests: the podman store and the first real build of the fixture recipe
(defined next to the build tests, which own them)."""

import pytest
from test_build_podman import first_build, podman_store  # noqa: F401  (first_build: re-exported as a fixture)


@pytest.fixture(scope="session")
def podman_env(tmp_path_factory):
    """One store for every module that only reads its image: each module's first build of the fixture recipe
    is then served from the first one's layer cache (the same image, in seconds), in the module's own folder.
    test_build_podman, which changes tags and the cache, has its own."""
    yield from podman_store(tmp_path_factory)
