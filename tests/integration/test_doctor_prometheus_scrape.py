"""`rocmstack doctor --prometheus FILE` scraped for real: Debian's prometheus-node-exporter reads the textfile
directory and Debian's prometheus scrapes it every second, both on loopback ports; the test asks the
server's HTTP API for the values. Two files: a real doctor run on this machine with a real fault (an
open-file hard limit of 1024), and the measured level-2 report of two H200s
(docs/evidence/doctor-levels-h200x2-2026-11-30/level2-healthy.json) with the ECC counters of a real
`amd-smi metric -k` output (tests/fixtures/doctor/tools/, source in SOURCES.md)."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from rocmstack.doctor.checks.host import judge_ecc
from rocmstack.doctor.prometheus import write_textfile
from tests.conftest import free_port, low_nofile

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
H200 = ROOT / "docs/evidence/doctor-levels-h200x2-2026-11-30/level2-healthy.json"
AMD_SMI_ECC = ROOT / "tests/fixtures/doctor/tools/amd-smi-metric-k-umc-excerpt.txt"


@pytest.fixture(scope="module")
def prom(tmp_path_factory: pytest.TempPathFactory):
    for tool in ("prometheus", "prometheus-node-exporter"):
        if not shutil.which(tool):
            pytest.skip(f"{tool} is not installed (ci/install-system-deps.sh installs it)")
    tmp = tmp_path_factory.mktemp("prom")
    textfiles = tmp / "textfiles"
    textfiles.mkdir()
    exporter_port, server_port = free_port(), free_port()
    (tmp / "prometheus.yml").write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        "scrape_configs:\n  - job_name: node\n    static_configs:\n"
        f"      - targets: ['127.0.0.1:{exporter_port}']\n"
    )
    procs = [
        subprocess.Popen(
            [
                "prometheus-node-exporter",
                f"--web.listen-address=127.0.0.1:{exporter_port}",
                "--collector.disable-defaults",
                "--collector.textfile",
                f"--collector.textfile.directory={textfiles}",
            ],
            stdout=subprocess.DEVNULL,
            stderr=(tmp / "exporter.log").open("w"),
        ),
        subprocess.Popen(
            [
                "prometheus",
                f"--config.file={tmp / 'prometheus.yml'}",
                f"--storage.tsdb.path={tmp / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{server_port}",
            ],
            stdout=subprocess.DEVNULL,
            stderr=(tmp / "prometheus.log").open("w"),
        ),
    ]
    try:
        yield textfiles, f"http://127.0.0.1:{server_port}", tmp
    finally:
        for proc in procs:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _query(base: str, promql: str, tmp: Path) -> list[dict]:
    """Poll the server until the series appear (scrapes every second; 60 s at most)."""
    url = f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
    for _ in range(120):
        try:
            with urllib.request.urlopen(url, timeout=5) as resp:
                result = json.load(resp)["data"]["result"]
            if result:
                return list(result)
        except OSError:
            pass  # not listening yet
        time.sleep(0.5)
    raise AssertionError(
        f"no series for {promql}; exporter log: {(tmp / 'exporter.log').read_text()[-1500:]}"
    )


def test_a_doctor_run_and_measured_figures_reach_prometheus(prom):
    textfiles, base, tmp = prom
    out = textfiles / "doctor.prom"
    argv = ["doctor", "--fast", "--only", "nofile-limit,dev-shm", "--prometheus", str(out)]
    run = subprocess.run(
        [sys.executable, "-m", "rocmstack", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=low_nofile,
    )
    assert run.returncode == 1, run.stderr
    report = json.loads(H200.read_text())
    ecc = judge_ecc("amd", AMD_SMI_ECC.read_text())
    report["checks"].append(
        {"id": "gpu-ecc", "group": "host", "status": ecc.status.value, "data": dict(ecc.data or {})}
    )
    write_textfile(textfiles / "h200.prom", report)
    host = socket.gethostname()

    failing = _query(base, f'rocmstack_doctor_check_status{{check="nofile-limit",node="{host}"}} == 1', tmp)
    assert [r["metric"]["status"] for r in failing] == ["fail"]
    assert _query(base, f'rocmstack_doctor_ok{{node="{host}"}}', tmp)[0]["value"][1] == "0"
    assert float(_query(base, f'rocmstack_doctor_duration_seconds{{node="{host}"}}', tmp)[0]["value"][1]) > 0

    busbw = _query(
        base,
        'rocmstack_doctor_collective_busbw_bytes_per_second{op="all_reduce",size_bytes="1073741824"}',
        tmp,
    )
    want = next(
        r["busbw"]
        for r in report["active"]["collectives"]["rows"]
        if (r["op"], r["nbytes"]) == ("all_reduce", 1 << 30)
    )
    assert float(busbw[0]["value"][1]) == pytest.approx(want * 1e9)
    hbm = _query(base, "rocmstack_doctor_gpu_hbm_copy_bytes_per_second", tmp)
    by_uuid = {r["metric"]["uuid"]: float(r["value"][1]) for r in hbm}
    assert by_uuid["e9d758e2-ec1d-89f3-c1bf-35fef897fa79"] == pytest.approx(4166.1823421819545e9)
    assert {r["metric"]["gpu"] for r in hbm} == {"0", "1"}
    gemm = _query(base, 'rocmstack_doctor_gpu_gemm_bf16_flops_per_second{gpu="0"}', tmp)
    assert float(gemm[0]["value"][1]) == pytest.approx(760.3646649268576e12)
    assert float(_query(base, "rocmstack_doctor_weight_sync_broadcast_seconds", tmp)[0]["value"][1]) > 0
    ce = _query(base, 'rocmstack_doctor_gpu_ecc_errors_total{type="correctable"}', tmp)
    assert ce[0]["value"][1] == "2"
    # what the exporter itself reports: both files parsed, no error
    errors = _query(base, "node_textfile_scrape_error", tmp)
    assert errors[0]["value"][1] == "0"
