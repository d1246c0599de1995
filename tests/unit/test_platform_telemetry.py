"""Telemetry: the replay source follows the run's progress; the sampler is bounded; no library, no source."""

from __future__ import annotations

import json

from rocmstack.platform.telemetry import Device, GpuSample, ReplaySource, Sampler, match, open_source


def _timeline(tmp_path):
    path = tmp_path / "t.json"
    reading = {"gfx_mhz": 2074, "power_w": 321, "power_limit_w": 750, "temp_c": 56, "ecc_uncorrectable": 0}
    path.write_text(
        json.dumps(
            {
                "devices": [{"index": 0, "uuid": "g0", "name": "MI300"}],
                "timeline": [
                    {"at": 0.5, "gpus": [{**reading, "gfx_mhz": 58, "ecc_uncorrectable": 1}]},
                    {"at": 0.0, "gpus": [reading]},
                ],
            }
        )
    )
    return path


def test_replay_reads_the_entry_for_the_runs_progress(tmp_path):
    at = [0.0]
    src = ReplaySource(_timeline(tmp_path), lambda: at[0])
    assert src.sample()[0].gfx_mhz == 2074 and src.counters()[0].ecc_uncorrectable == 0
    at[0] = 0.7
    assert src.sample()[0].gfx_mhz == 58 and src.counters()[0].ecc_uncorrectable == 1
    assert src.devices()[0].uuid == "g0"


def test_the_sampler_stops_at_its_bound(tmp_path):
    sampler = Sampler(ReplaySource(_timeline(tmp_path), lambda: 0.0), interval_s=0.001, max_samples=5)
    sampler.start()
    sampler._thread.join(timeout=10)
    samples = sampler.stop()
    assert len(samples) == 5 and samples[0]["gpus"][0]["power_limit_w"] == 750


def test_no_gpu_no_source():
    source, why = open_source(None)
    assert source is None and "no AMD or NVIDIA GPU" in why


class _Listed:
    """Two GPUs listed as NVML lists them (its own order, GPU- prefix)."""

    name = "nvml"

    def devices(self):
        return [Device(0, "GPU-AAAA-1111", "H200"), Device(1, "GPU-bbbb-2222", "H200")]

    def sample(self):
        return [GpuSample(gfx_mhz=1), GpuSample(gfx_mhz=2)]

    def counters(self):
        return []

    def close(self):
        pass


def test_readings_follow_the_workloads_device_order_by_uuid():
    src, how = match(_Listed(), ["bbbb-2222"])  # torch sees only the second GPU (a mask)
    assert how == "matched by UUID"
    assert [s.gfx_mhz for s in src.sample()] == [2] and src.devices()[0].uuid == "GPU-bbbb-2222"
    same, how = match(_Listed(), ["cccc"])
    assert how.startswith("matched by position") and len(same.sample()) == 2
