"""Fixtures shared by the integration tests: the podman store and the first real build of the fixture recipe
(defined next to the build tests, which own them)."""

from test_build_podman import first_build, podman_env  # noqa: F401  (re-exported as fixtures)
