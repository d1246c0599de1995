"""The Slurm hook's pure parts: reading `scontrol show node -o` (verbatim from Debian's slurm-wlm 22.05.8,
recorded by tests/integration/test_doctor_slurm_daemons.py's set-up), the reason lines, the node name."""

from __future__ import annotations

from pathlib import Path

from rocmstack.doctor.slurm import REASON_MAX, failure_lines, node_name, parse_node

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures/doctor/slurm"


def test_an_admin_drain_is_read_without_slurms_user_and_time():
    node = parse_node((FIXTURES / "scontrol-show-node-drained-22.05.8.txt").read_text(), "vm")
    assert node.state == "IDLE+DRAIN"
    assert node.reason == "admin: replacing a cable"
    assert node.drained and not node.drained_by_us


def test_an_idle_node_has_no_reason():
    node = parse_node((FIXTURES / "scontrol-show-node-idle-22.05.8.txt").read_text(), "vm")
    assert (node.state, node.reason, node.drained) == ("IDLE", "", False)


def test_our_own_drain_is_told_by_its_prefix():
    text = (FIXTURES / "scontrol-show-node-drained-22.05.8.txt").read_text()
    ours = text.replace(
        "Reason=admin: replacing a cable", "Reason=rocmstack: gpu-ecc: 3 uncorrectable ECC error(s)"
    )
    node = parse_node(ours, "vm")
    assert node.drained_by_us and node.reason == "rocmstack: gpu-ecc: 3 uncorrectable ECC error(s)"


def test_one_bounded_printable_line_per_failure():
    report = {
        "checks": [
            {"id": "gpu-ecc", "status": "fail", "summary": "3 uncorrectable\nECC error(s)"},
            {"id": "ray-env", "status": "pass", "summary": "fine"},
            {"id": "dev-shm", "status": "error", "summary": "x" * 500},
        ]
    }
    lines = failure_lines(report)
    assert lines[0] == "rocmstack: gpu-ecc: 3 uncorrectable\\nECC error(s)"
    assert lines[1].startswith("rocmstack: dev-shm: xxx") and len(lines[1]) == REASON_MAX
    assert len(lines) == 2


def test_node_name_prefers_the_option_then_slurmd():
    assert node_name("gpu07", {"SLURMD_NODENAME": "gpu01"}) == "gpu07"
    assert node_name(None, {"SLURMD_NODENAME": "gpu01"}) == "gpu01"
    assert "." not in node_name(None, {})
