"""The host record that the build manifest and validate's report both carry."""

from __future__ import annotations

import platform

from rocmstack.host import host_info


def test_the_host_record_names_this_machine():
    info = host_info()
    assert set(info) == {"hostname", "platform", "machine", "python", "cpus", "in_container"}
    assert info["hostname"] == platform.node() and info["python"] == platform.python_version()
    assert isinstance(info["cpus"], int) and info["cpus"] >= 1 and isinstance(info["in_container"], bool)
