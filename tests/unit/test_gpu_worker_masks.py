"""Per-process visibility records (rocmstack/gpu/maskhook/sitecustomize.py) and their judge
(rocmstack.gpu.worker_masks): real interpreters started with the hook folder on PYTHONPATH write the records,
the judge reads the real files.

No GPU here: the device path runs against a stand-in ``torch`` package (FAKE_TORCH below) that keeps the parts
of torch.cuda's contract the hook relies on (``_is_compiled``, ``_lazy_call`` run at the end of ``_lazy_init``,
``set_device``, ``current_device``, ``get_device_properties(d).pci_*``) and the HIP runtime's mask rules (ROCR
filters first, then HIP_VISIBLE_DEVICES when non-empty, else CUDA_VISIBLE_DEVICES, indexes what is left and
stops at the first index that names no device). The CPU torch of the venv is used where a real torch is enough.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from rocmstack.gpu import worker_masks
from rocmstack.gpu.worker_masks import (
    MASKS_DIR_ENV,
    hook_dir,
    job_env,
    judge,
    ray_runtime_env,
    read_records,
)
from rocmstack.platform.masks import MASK_VARS

pytestmark = pytest.mark.timeout(180)

FAKE_TORCH = {
    "torch/__init__.py": """
        import types
        from . import accelerator, cuda
        version = types.SimpleNamespace(hip="6.4.0-fake", cuda=None)
        __version__ = "0.0-fake"
    """,
    "torch/accelerator.py": """
        from . import cuda

        def set_device_index(device):  # as torch's: straight to the runtime, not through cuda.set_device
            cuda._lazy_init()
            cuda._device = int(device)
    """,
    "torch/cuda/__init__.py": """
        import os
        import threading
        import types

        _initialized = False
        _tls = threading.local()
        _queued_calls = []
        _device = 0

        def _is_compiled():
            return True

        def _visible():
            physical = list(range(int(os.environ.get("FAKE_GPUS", "8"))))
            rocr = os.environ.get("ROCR_VISIBLE_DEVICES")
            if rocr is not None:
                physical = _pick(physical, rocr)
            mask = os.environ.get("HIP_VISIBLE_DEVICES") or os.environ.get("CUDA_VISIBLE_DEVICES")
            return _pick(physical, mask) if mask else physical

        def _pick(pool, mask):
            out = []
            for tok in mask.split(","):
                if not tok.strip().isdigit() or int(tok) >= len(pool):
                    break
                out.append(pool[int(tok)])
            return out

        def is_initialized():
            return _initialized

        def _lazy_call(fn):
            if _initialized:
                fn()
            else:
                _queued_calls.append((fn, []))

        def _lazy_init():
            global _initialized
            if _initialized or hasattr(_tls, "is_initializing"):
                return
            if not _visible():
                raise RuntimeError("No HIP GPUs are available")
            _tls.is_initializing = True
            try:
                for fn, _ in _queued_calls:
                    fn()
            finally:
                del _tls.is_initializing
            _initialized = True

        def init():
            _lazy_init()

        def device_count():
            return len(_visible())

        def current_device():
            _lazy_init()
            return _device

        def set_device(device):
            global _device
            _lazy_init()
            _device = int(device)

        def get_device_properties(device=None):
            _lazy_init()
            phys = _visible()[current_device() if device is None else int(device)]
            return types.SimpleNamespace(
                name="Fake MI300X", uuid=f"fake-uuid-{phys}", pci_domain_id=0, pci_bus_id=0x10 + phys,
                pci_device_id=0,
            )
    """,
}


def bus(physical: int) -> str:
    """The PCI address the stand-in gives physical GPU ``physical``."""
    return f"0000:{0x10 + physical:02x}:00.0"


@pytest.fixture
def fake_torch(tmp_path: Path) -> Path:
    root = tmp_path / "fake"
    for rel, text in FAKE_TORCH.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def clean_env(**extra: str) -> dict[str, str]:
    """This environment without masks, Ray's switches or a masks folder, plus ``extra``."""
    drop = set(MASK_VARS) | {MASKS_DIR_ENV, "PYTHONPATH", "ROCMSTACK_COLOCATE_GROUP"}
    env = {k: v for k, v in os.environ.items() if k not in drop and not k.startswith("RAY_")}
    env.update(extra)
    return env


def run_py(
    code: str,
    masks: Path | str | None,
    *,
    path: tuple[Path, ...] = (),
    script: Path | None = None,
    timeout: float = 120,
    **env: str,
) -> subprocess.CompletedProcess:
    """A fresh interpreter with the hook folder first on PYTHONPATH (then ``path``) and ``env``, running
    ``code`` with -c, or from the file ``script`` (what a spawned child must re-import)."""
    extra = dict(env)
    extra["PYTHONPATH"] = os.pathsep.join(str(p) for p in (hook_dir(), *path))
    if masks is not None:
        extra[MASKS_DIR_ENV] = str(masks)
    if script is not None:
        script.write_text(textwrap.dedent(code))
    return subprocess.run(
        [sys.executable, *([str(script)] if script is not None else ["-c", textwrap.dedent(code)])],
        env=clean_env(**extra),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def only(records, pid: int):
    found = [r for r in records if r.pid == pid]
    assert len(found) == 1, [(r.pid, r.argv) for r in records]
    return found[0]


# --- what the hook records ---------------------------------------------------------------------------------


def test_a_process_that_never_imports_torch_records_its_masks_and_stays_torch_free(tmp_path):
    out = run_py(
        """
        import os, sys
        print(os.getpid(), "torch" in sys.modules)
        """,
        tmp_path,
        HIP_VISIBLE_DEVICES="0",
        CUDA_VISIBLE_DEVICES="0",
        RANK="3",
    )
    assert out.returncode == 0, out.stderr
    pid, torch_loaded = out.stdout.split()
    assert torch_loaded == "False"
    rec = only(read_records(tmp_path).records, int(pid))
    assert rec.ppid == os.getpid()
    assert os.getpid() in rec.ancestors
    assert rec.masks == {"HIP_VISIBLE_DEVICES": "0", "CUDA_VISIBLE_DEVICES": "0"}
    assert rec.rank == "3"
    assert rec.torch is None and rec.count is None and rec.gpu is None
    assert rec.argv[:2] == (sys.executable, "-c")
    # one file per process, written whole: no temporary left behind
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_cpu_torch_is_recorded_truthfully_as_counting_no_gpu(tmp_path):
    out = run_py(
        """
        import os, sys, torch
        hooked = [type(f).__name__ for f in sys.meta_path if "Torch" in type(f).__name__]
        own_loader = torch.__spec__.loader is torch.__loader__ and "Torch" not in type(torch.__loader__).__name__
        print(os.getpid(), torch.cuda.is_initialized(), own_loader, hooked)
        """,
        tmp_path,
    )
    assert out.returncode == 0, out.stderr
    pid, initialised, own_loader, hooked = out.stdout.split()
    rec = only(read_records(tmp_path).records, int(pid))
    assert rec.torch is not None and rec.torch["build"] == "cpu"
    assert rec.torch["version"].startswith("2.")
    assert rec.count == 0 and rec.device is None and rec.gpu is None
    assert initialised == "False"  # the hook asked nothing that would start a GPU runtime
    # torch keeps its own loader, and the finder that waited for it is gone
    assert (own_loader, hooked) == ("True", "[]")


def test_the_device_the_process_chose_is_recorded_with_its_physical_gpu(tmp_path, fake_torch):
    out = run_py(
        """
        import os, torch
        torch.cuda.set_device(1)
        print(os.getpid())
        """,
        tmp_path,
        path=(fake_torch,),
        HIP_VISIBLE_DEVICES="2,3",
        CUDA_VISIBLE_DEVICES="2,3",
        FAKE_GPUS="4",
    )
    assert out.returncode == 0, out.stderr
    rec = only(read_records(tmp_path).records, int(out.stdout))
    assert rec.torch is not None and rec.torch["build"] == "hip"
    assert rec.count == 2 and rec.device == 1
    assert rec.gpu == bus(3)  # device 1 of HIP 2,3 is physical 3
    assert rec.torch["uuid"] == "fake-uuid-3"
    assert rec.runtime_masks == {"HIP_VISIBLE_DEVICES": "2,3", "CUDA_VISIBLE_DEVICES": "2,3"}


def test_a_device_chosen_through_torch_accelerator_is_recorded_when_chosen(tmp_path, fake_torch):
    out = run_py(
        """
        import os, signal, torch
        torch.accelerator.set_device_index(3)
        print(os.getpid(), flush=True)
        os.kill(os.getpid(), signal.SIGKILL)  # no exit handler: only the choice itself can have written it
        """,
        tmp_path,
        path=(fake_torch,),
    )
    assert out.returncode == -9, out.stderr
    rec = only(read_records(tmp_path).records, int(out.stdout))
    assert (rec.count, rec.device, rec.gpu) == (8, 3, bus(3))


def test_the_gpu_runtime_starting_alone_records_the_default_device(tmp_path, fake_torch):
    out = run_py(
        "import os, torch; torch.cuda.init(); print(os.getpid())",
        tmp_path,
        path=(fake_torch,),
        HIP_VISIBLE_DEVICES="5",
    )
    assert out.returncode == 0, out.stderr
    rec = only(read_records(tmp_path).records, int(out.stdout))
    assert (rec.count, rec.device, rec.gpu) == (1, 0, bus(5))


def test_the_record_is_on_disk_before_the_process_is_killed(tmp_path, fake_torch):
    """A worker killed with SIGKILL (ray.kill, an OOM) runs no exit handler: the device was written when
    it was chosen."""
    out = run_py(
        """
        import os, signal, torch
        torch.cuda.set_device(2)
        print(os.getpid(), flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
        """,
        tmp_path,
        path=(fake_torch,),
    )
    assert out.returncode == -9
    rec = only(read_records(tmp_path).records, int(out.stdout))
    assert (rec.device, rec.gpu) == (2, bus(2))


def test_a_pre_existing_sitecustomize_still_runs(tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    (other / "sitecustomize.py").write_text("import os\nos.environ['IMAGE_SITECUSTOMIZE'] = 'ran'\n")
    masks = tmp_path / "masks"
    out = run_py(
        "import os, sitecustomize; print(os.getpid(), os.environ.get('IMAGE_SITECUSTOMIZE'))",
        masks,
        path=(other,),
    )
    assert out.returncode == 0, out.stderr
    pid, ran = out.stdout.split()
    assert ran == "ran"
    only(read_records(masks).records, int(pid))


def test_a_failing_chained_sitecustomize_is_reported_as_python_reports_it_and_the_process_runs(tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    (other / "sitecustomize.py").write_text("raise ValueError('broken image hook')\n")
    masks = tmp_path / "masks"
    out = run_py("import os; print(os.getpid())", masks, path=(other,))
    assert out.returncode == 0
    assert "Error in sitecustomize; set PYTHONVERBOSE for traceback:" in out.stderr
    assert "ValueError: broken image hook" in out.stderr
    only(read_records(masks).records, int(out.stdout))


@pytest.mark.parametrize("where", ["a-file", "under-a-file", "read-only"])
def test_a_broken_masks_dir_never_breaks_the_process(tmp_path, fake_torch, where):
    blocker = tmp_path / "blocker"
    blocker.write_text("not a folder")
    masks = {"a-file": blocker, "under-a-file": blocker / "masks", "read-only": tmp_path / "ro"}[where]
    if where == "read-only":
        masks.mkdir()
        masks.chmod(0o500)
        if os.access(masks, os.W_OK):  # root writes anyway: a folder that cannot be one instead
            masks = Path("/proc/self/masks")
    out = run_py(
        """
        import torch
        torch.cuda.set_device(1)
        print("worked", torch.cuda.current_device())
        """,
        masks,
        path=(fake_torch,),
    )
    assert (out.returncode, out.stdout.strip(), out.stderr) == (0, "worked 1", "")


@pytest.mark.parametrize("recording", [True, False])
def test_the_hook_imports_nothing_at_start(tmp_path, recording):
    """A process start pays for no module beyond those a bare interpreter loads (json, re, threading...)."""
    code = "import sys; print(' '.join(sorted(sys.modules)))"
    bare = subprocess.run([sys.executable, "-c", code], env=clean_env(), capture_output=True, text=True)
    hooked = run_py(code, tmp_path if recording else None)
    assert hooked.returncode == 0, hooked.stderr
    extra = set(hooked.stdout.split()) - set(bare.stdout.split())
    assert extra <= {"sitecustomize", "_rocmstack_maskhook_active", "__future__", "atexit"}
    assert ("_rocmstack_maskhook_active" in extra) == recording
    assert len(list(tmp_path.glob("*.json"))) == (1 if recording else 0)


def test_no_masks_dir_no_record(tmp_path, fake_torch):
    out = run_py(
        "import torch; torch.cuda.set_device(0); print(hasattr(torch.cuda.set_device, '__wrapped__'))",
        None,
        path=(fake_torch,),
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"  # nothing wrapped
    assert list(tmp_path.glob("**/*.json")) == []


def test_forked_and_spawned_children_record_themselves_under_their_parent(tmp_path):
    out = run_py(
        """
        import multiprocessing as mp, os

        def child(q):
            q.put(os.getpid())

        if __name__ == "__main__":
            pid = os.fork()
            if pid == 0:
                os._exit(0)
            os.waitpid(pid, 0)
            ctx = mp.get_context("spawn")
            q = ctx.Queue()
            p = ctx.Process(target=child, args=(q,))
            p.start()
            spawned = q.get(timeout=60)
            p.join()
            print(os.getpid(), pid, spawned)
        """,
        tmp_path / "masks",
        script=tmp_path / "parent.py",
        HIP_VISIBLE_DEVICES="1",
    )
    assert out.returncode == 0, out.stderr
    parent, forked, spawned = (int(x) for x in out.stdout.split())
    records = read_records(tmp_path / "masks").records
    for child in (forked, spawned):
        rec = only(records, child)
        assert parent in rec.ancestors
        assert rec.masks == {"HIP_VISIBLE_DEVICES": "1"}
    assert only(records, forked).ppid == parent


def test_the_hook_records_every_variable_the_judge_reads():
    from rocmstack.gpu.maskhook import sitecustomize as hook
    from rocmstack.gpu.process_view import VIEW_VARS

    assert set(MASK_VARS) | set(VIEW_VARS) <= set(hook.ENV_VARS)
    assert hook.DIR_ENV == MASKS_DIR_ENV


# --- reading the folder ------------------------------------------------------------------------------------


def test_unreadable_files_are_listed_and_temporaries_ignored(tmp_path):
    out = run_py("import os; print(os.getpid())", tmp_path)
    (tmp_path / "torn.json").write_text('{"v": 1, "pid": ')
    (tmp_path / ".x.json.1.2.tmp").write_text("{")
    found = read_records(tmp_path)
    assert [r.pid for r in found.records] == [int(out.stdout)]
    assert len(found.unreadable) == 1 and "torn.json" in found.unreadable[0]


def test_a_missing_folder_reads_as_no_records(tmp_path):
    found = read_records(tmp_path / "none")
    assert found.records == () and "no such folder" in found.unreadable[0]


# --- judging ---------------------------------------------------------------------------------------------


def gpu_worker(tmp_path, fake_torch, device: int = 0, **env: str) -> int:
    out = run_py(
        f"import os, torch; torch.cuda.set_device({device}); print(os.getpid())",
        tmp_path,
        path=(fake_torch,),
        **env,
    )
    assert out.returncode == 0, out.stderr
    return int(out.stdout)


def test_cuda_mask_without_hip_mask_on_amd_names_the_worker(tmp_path, fake_torch):
    gpu_worker(tmp_path, fake_torch, HIP_VISIBLE_DEVICES="0", CUDA_VISIBLE_DEVICES="0", RANK="0")
    bad = gpu_worker(tmp_path, fake_torch, CUDA_VISIBLE_DEVICES="1", RANK="1")
    verdict = judge(read_records(tmp_path).records, vendor="amd", allocation=8)
    assert not verdict.ok
    assert [m.pid for m in verdict.mismatches] == [bad]
    (line,) = verdict.lines
    assert "rank 1" in line and f"pid {bad}" in line
    assert "CUDA_VISIBLE_DEVICES=1 is set without HIP_VISIBLE_DEVICES" in line
    # on NVIDIA CUDA_VISIBLE_DEVICES alone is the rule
    assert judge(read_records(tmp_path).records, vendor="nvidia", allocation=8).ok


def test_hip_mask_alone_is_rays_own_state_on_amd(tmp_path, fake_torch):
    gpu_worker(tmp_path, fake_torch, HIP_VISIBLE_DEVICES="3")
    assert judge(read_records(tmp_path).records, vendor="amd", allocation=8).ok


def test_disagreeing_hip_and_cuda_masks_name_the_worker_in_the_doctors_words(tmp_path, fake_torch):
    bad = gpu_worker(tmp_path, fake_torch, HIP_VISIBLE_DEVICES="0", CUDA_VISIBLE_DEVICES="1")
    verdict = judge(read_records(tmp_path).records, vendor="amd", allocation=8)
    (m,) = verdict.mismatches
    assert m.pid == bad and m.rule == "masks"
    assert "HIP_VISIBLE_DEVICES=0 and CUDA_VISIBLE_DEVICES=1 disagree" in m.line


def test_hip_mask_applied_again_on_top_of_rocr_is_named(tmp_path, fake_torch):
    """ROCR_VISIBLE_DEVICES=3 leaves one device; HIP_VISIBLE_DEVICES=3 on top names device 3 of that one."""
    out = run_py(
        "import os, torch; print(os.getpid(), torch.cuda.device_count())",
        tmp_path,
        path=(fake_torch,),
        ROCR_VISIBLE_DEVICES="3",
        HIP_VISIBLE_DEVICES="3",
    )
    pid, count = out.stdout.split()
    assert count == "0"
    verdict = judge(read_records(tmp_path).records, vendor="amd", allocation=8)
    assert not verdict.ok  # the process imported torch: it is judged although it found no GPU to start
    assert any(
        m.pid == int(pid) and "HIP_VISIBLE_DEVICES=3 names device 3, but only 1 device(s)" in m.line
        for m in verdict.mismatches
    )


def test_rocr_mask_without_hip_mask_is_rays_error(tmp_path, fake_torch):
    bad = gpu_worker(tmp_path, fake_torch, ROCR_VISIBLE_DEVICES="2")
    (m,) = judge(read_records(tmp_path).records, vendor="amd", allocation=8).mismatches
    assert m.pid == bad and "Please use HIP_VISIBLE_DEVICES instead of ROCR_VISIBLE_DEVICES" in m.line


def test_a_whole_node_process_that_sees_more_than_the_allocation_is_named(tmp_path, fake_torch):
    bad = gpu_worker(tmp_path, fake_torch, FAKE_GPUS="8")
    (m,) = judge(read_records(tmp_path).records, vendor="amd", allocation=4).mismatches
    assert m.pid == bad and m.rule == "count"
    assert "counts 8 GPU(s)" in m.line and "4" in m.line


def test_a_masked_process_must_count_what_its_mask_selects(tmp_path, fake_torch):
    """HIP_VISIBLE_DEVICES=0,1,2,3 on a node whose job got 2 GPUs: the runtime stops at index 2."""
    gpu_worker(tmp_path, fake_torch, HIP_VISIBLE_DEVICES="0,1", CUDA_VISIBLE_DEVICES="0,1", FAKE_GPUS="2")
    assert judge(read_records(tmp_path).records, vendor="amd", allocation=2).ok
    bad = gpu_worker(
        tmp_path, fake_torch, HIP_VISIBLE_DEVICES="0,1,2,3", CUDA_VISIBLE_DEVICES="0,1,2,3", FAKE_GPUS="2"
    )
    lines = [m.line for m in judge(read_records(tmp_path).records, vendor="amd", allocation=2).mismatches]
    assert lines and all(f"pid {bad}" in line for line in lines)
    assert any("names device 2" in line for line in lines)


def test_the_jobs_own_mask_makes_a_whole_node_process(tmp_path, fake_torch):
    """The job itself was given HIP 4,5 of an 8-GPU node: its processes count 2, the allocation."""
    job = {"HIP_VISIBLE_DEVICES": "4,5", "CUDA_VISIBLE_DEVICES": "4,5"}
    gpu_worker(tmp_path, fake_torch, **job)
    verdict = judge(read_records(tmp_path).records, vendor="amd", allocation=2, physical=8, job_env=job)
    assert verdict.ok, verdict.lines


def test_two_independent_processes_on_one_gpu_are_named_together(tmp_path, fake_torch):
    a = gpu_worker(tmp_path, fake_torch, device=0, RANK="0", LOCAL_RANK="0")
    b = gpu_worker(tmp_path, fake_torch, device=0, RANK="1", LOCAL_RANK="1")
    gpu_worker(tmp_path, fake_torch, device=1, RANK="2", LOCAL_RANK="2")
    records = read_records(tmp_path).records
    (m,) = judge(records, vendor="amd", allocation=8).mismatches
    assert m.rule == "shared" and f"pid {a}" in m.line and f"pid {b}" in m.line and bus(0) in m.line
    # a colocated job allows as many users per GPU as it says
    assert judge(records, vendor="amd", allocation=8, share=2).ok


def test_processes_marked_colocated_may_share_a_gpu(tmp_path, fake_torch):
    gpu_worker(tmp_path, fake_torch, device=0, ROCMSTACK_COLOCATE_GROUP="rank0")
    gpu_worker(tmp_path, fake_torch, device=0, ROCMSTACK_COLOCATE_GROUP="rank0")
    assert judge(read_records(tmp_path).records, vendor="amd", allocation=8).ok


def test_a_process_and_the_engine_worker_it_started_may_share_a_gpu(tmp_path, fake_torch):
    out = run_py(
        """
        import os, subprocess, sys, torch
        torch.cuda.set_device(0)
        code = "import torch; torch.cuda.set_device(0)"
        subprocess.run([sys.executable, "-c", code], check=True)
        print(os.getpid())
        """,
        tmp_path,
        path=(fake_torch,),
    )
    assert out.returncode == 0, out.stderr
    records = read_records(tmp_path).records
    assert len([r for r in records if r.gpu == bus(0)]) == 2
    assert judge(records, vendor="amd", allocation=8).ok


def test_processes_that_never_touched_torch_are_not_judged(tmp_path):
    run_py("pass", tmp_path, CUDA_VISIBLE_DEVICES="7")  # a launcher or an agent: its children are judged
    verdict = judge(read_records(tmp_path).records, vendor="amd", allocation=8)
    assert verdict.ok and verdict.judged == 0


# --- wiring ----------------------------------------------------------------------------------------------


def test_job_env_puts_the_hook_first_and_keeps_the_path(tmp_path):
    env = job_env(tmp_path, {"PYTHONPATH": "/opt/x", "HIP_VISIBLE_DEVICES": "0"})
    assert env["PYTHONPATH"].split(os.pathsep) == [str(hook_dir()), "/opt/x"]
    assert env[MASKS_DIR_ENV] == str(tmp_path) and env["HIP_VISIBLE_DEVICES"] == "0"
    assert job_env(tmp_path, {})["PYTHONPATH"] == str(hook_dir())
    # every process of the job reads the same folder, wherever it runs from
    assert job_env("masks", {})[MASKS_DIR_ENV] == str(Path.cwd() / "masks")


def test_ray_runtime_env_names_the_setup_hook(tmp_path):
    renv = ray_runtime_env(tmp_path, env_vars={"HIP_VISIBLE_DEVICES": "0"})
    assert renv["worker_process_setup_hook"] == "rocmstack.gpu.worker_masks.ray_setup_hook"
    assert renv["env_vars"] == {MASKS_DIR_ENV: str(tmp_path), "HIP_VISIBLE_DEVICES": "0"}
    assert callable(worker_masks.ray_setup_hook)


def test_the_records_are_json_a_reader_can_parse(tmp_path):
    run_py("pass", tmp_path, HIP_VISIBLE_DEVICES='0"\\\n')
    (path,) = tmp_path.glob("*.json")
    data = json.loads(path.read_text())
    assert data["env"]["HIP_VISIBLE_DEVICES"] == '0"\\\n'


def _recorded(tmp_path: Path, name: str) -> list:
    """Records the maskhook wrote on one H200 (docs/evidence/preflight-h200-2026-12-05), unpacked."""
    import tarfile

    with tarfile.open(Path(__file__).resolve().parents[1] / f"fixtures/preflight/{name}/records.tgz") as tar:
        tar.extractall(tmp_path / name, filter="data")
    return list(read_records(tmp_path / name).records)


def test_verls_colocated_job_on_one_gpu_is_no_mismatch(tmp_path):
    """verl 0.9.1's GRPO step on one H200: the driver, TaskRunnerV1 and the vLLM server actor touch GPU 0
    beside the WorkerDict Ray gave it; Ray gave none of the others a GPU, so none is a second worker."""
    records = _recorded(tmp_path, "verl-0.9.1-h200-masks")
    verdict = judge(records, vendor="nvidia", allocation=1, physical=1, job_env={})
    assert verdict.judged == 46 and verdict.ok, verdict.lines


def test_a_launcher_that_sets_one_mask_of_two_is_named_per_worker(tmp_path):
    """A launcher that exports CUDA_VISIBLE_DEVICES=0 alone and starts `vllm serve` (vLLM 0.24, one H200):
    right on NVIDIA; the same processes under AMD's rules are one mask of two, each named."""
    records = _recorded(tmp_path, "vllm-0.24-h200-one-mask")
    assert judge(records, vendor="nvidia", allocation=1, physical=1, job_env={}).ok
    amd = judge(records, vendor="amd", allocation=1, physical=1, job_env={})
    assert amd.judged == 3 and [m.pid for m in amd.mismatches] == [8518, 8577, 8641]
    assert amd.lines[0].startswith("`python /root/site/bin/vllm serve /tmp/pf-mask/model")
    assert all("CUDA_VISIBLE_DEVICES=0 is set without HIP_VISIBLE_DEVICES" in line for line in amd.lines)
