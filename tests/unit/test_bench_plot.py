from __future__ import annotations

from rocmstack.bench.plot import markdown_table, plot_reports


def report(shape: str) -> dict:
    def row(engine, batch, tps, mbu):
        return {
            "engine": engine, "batch": batch, "status": "pass", "tokens_per_s": tps * 0.8, "decode_tokens_per_s": tps,
            "mbu": mbu, "mbu_spec": mbu * 0.9,
            "median_step_ms": 5.0, "roofline_tokens_per_s": batch * 280.0, "roofline_tokens_per_s_spec": batch * 316.0,
            "peak_memory_gb": 31.0,
        }  # fmt: skip

    return {
        "shape": {"name": shape},
        "device": {"name": "NVIDIA H200", "copy_bandwidth_gb_s": 4248.0},
        "settings": {"prompt_len": 128, "new_tokens": 256},
        "results": [row("reference", 1, 200.0, 0.72), row("reference", 64, 9400.0, 0.69), row("hf", 1, 9.8, 0.035),
                    row("hf", 64, 680.0, 0.044), {"engine": "vllm", "batch": 1, "status": "skip"}],
    }  # fmt: skip


def test_plot_writes_a_png(tmp_path):
    out = plot_reports([report("qwen3-8b"), report("qwen3-0.6b")], tmp_path / "p.png")
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000


def test_markdown_table_rows():
    table = markdown_table([report("qwen3-8b")])
    lines = table.strip().splitlines()
    assert len(lines) == 2 + 4  # header, rule, four ok rows (the skip is left out)
    assert lines[0].startswith("| shape | engine | batch | decode tok/s |")
    # the decode rate (200), not the prefill-inclusive one (160)
    assert lines[2] == "| qwen3-8b | reference | 1 | 200 | 5.00 | 0.720 | 0.648 | 280 | 31.0 |"
