"""env-unknown-vars against the names grepped from the real packages and the ROCm source trees
(rocmstack/doctor/known_env.json), and ci/gen_known_env.py's reading of a git tree."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "doctor"))
from doctor_fakes import make_snapshot

from rocmstack.doctor.checks.envlint import env_unknown, known, unknown_vars
from rocmstack.doctor.model import DoctorOptions
from rocmstack.status import Status


def test_the_variable_ray_never_read():
    # vllm-project/vllm#46895: RAY_EXPERIMENTAL_NOSET_CUDA_ENV_VAR was set in a recipe; Ray never read it
    assert unknown_vars({"RAY_EXPERIMENTAL_NOSET_CUDA_ENV_VAR": "1"}) == [
        ("RAY_EXPERIMENTAL_NOSET_CUDA_ENV_VAR", "RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES")
    ]


def test_real_names_pass():
    env = {
        "NCCL_IB_GID_INDEX": "3",
        "NCCL_NVLS_ENABLE": "0",
        "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",  # cited: CUDA builds only
        "RAY_EXPERIMENTAL_NOSET_HIP_VISIBLE_DEVICES": "1",
        "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
        "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
        "VLLM_ROCM_USE_AITER": "1",
        "RAY_health_check_period_ms": "1000",  # a C++ config entry: not judged
        "HSA_NO_SCRATCH_RECLAIM": "1",  # ROCR-Runtime core/util/flag.h
        "NCCL_VERSION": "2.28.3-1",  # image metadata (nvidia/cuda images)
        "PATH": "/usr/bin",
    }
    assert unknown_vars(env) == []
    result = env_unknown(make_snapshot(), DoctorOptions(env=env))
    assert result.status == Status.PASS


def test_typos_get_the_nearest_name():
    found = dict(unknown_vars({"NCCL_IB_GID_IDX": "3", "TORCH_NCCL_ASYNC_ERROR_HANDELING": "1"}))
    assert found == {
        "NCCL_IB_GID_IDX": "NCCL_IB_GID_INDEX",
        "TORCH_NCCL_ASYNC_ERROR_HANDELING": "TORCH_NCCL_ASYNC_ERROR_HANDLING",
    }
    result = env_unknown(make_snapshot(), DoctorOptions(env={"NCCL_IB_GID_IDX": "3"}))
    assert result.status == Status.WARN and "did you mean NCCL_IB_GID_INDEX?" in result.details[0]


def test_names_come_from_real_packages():
    names, judged, sources = known()
    assert set(judged) == {
        *("NCCL_", "RAY_", "VLLM_", "SGLANG_", "TORCH_", "PYTORCH_"),
        *("HSA_", "HIP_", "RCCL_", "AITER_"),
    }
    assert any(s.startswith("ray==") for s in sources) and any("nccl" in s for s in sources)
    for repo in ("rccl", "clr", "ROCR-Runtime", "aiter"):
        # each tree names its URL, full commit and commit date, so it can be scanned again from a clone
        assert any(
            re.match(rf"https://github.com/ROCm/{repo} at [0-9a-f]{{40}} \(20\d\d-", s) for s in sources
        )
    assert len(names) > 1000


def test_rocm_names_are_known():
    env = {
        "HSA_ENABLE_SDMA": "0",  # ROCR-Runtime core/util/flag.h, os::GetEnvVar
        "HSA_OVERRIDE_GFX_VERSION": "9.4.2",  # libhsakmt topology.c, and its per-node form:
        "HSA_OVERRIDE_GFX_VERSION_3": "9.4.2",
        "HIP_VISIBLE_DEVICES": "0,1",  # clr rocclr/utils/flags.hpp
        "HIP_FORCE_DEV_KERNARG": "1",
        "RCCL_MSCCL_ENABLE": "0",  # rccl RCCL_PARAM(MscclEnabled, "MSCCL_ENABLE", 1)
        "NCCL_MIN_NCHANNELS": "112",
        "AITER_LOG_LEVEL": "INFO",  # aiter csrc/include/aiter_logger.h, std::getenv
        "AITER_MLA_META_USE_PARALLEL": "1",
    }
    names, judged, _ = known()
    assert {"HSA_", "HIP_", "RCCL_", "AITER_"} <= set(judged)
    assert {v for v in env if v not in names} == {"HSA_OVERRIDE_GFX_VERSION_3"}  # matched by its pattern
    assert unknown_vars(env) == []
    assert env_unknown(make_snapshot(), DoctorOptions(env=env)).status == Status.PASS


def test_an_nccl_name_only_rccl_reads_is_known():
    # rccl src/graph/search.cc: getenv("NCCL_RINGS_REMAP"); NVIDIA's NCCL 2.32.3 library has no such name, so
    # without rccl's tree it would be flagged on AMD
    names, _, _ = known()
    assert "NCCL_RINGS_REMAP" in names
    assert unknown_vars({"NCCL_RINGS_REMAP": "0|1", "NCCL_RINGS_REMAPP": "0|1"}) == [
        ("NCCL_RINGS_REMAPP", "NCCL_RINGS_REMAP")
    ]


def test_rocm_typos_get_the_nearest_name():
    found = dict(
        unknown_vars(
            {
                "HIP_VISIBLE_DEVICE": "0",
                "HSA_ENABLE_SDAM": "0",
                "RCCL_MSCCL_ENABEL": "1",
                "AITER_LOG_LEVELS": "INFO",
                "HSA_OVERRIDE_GFX_VERSION_X": "9.4.2",
            }
        )
    )
    assert found == {
        "HIP_VISIBLE_DEVICE": "HIP_VISIBLE_DEVICES",
        "HSA_ENABLE_SDAM": "HSA_ENABLE_SDMA",
        "RCCL_MSCCL_ENABEL": "RCCL_MSCCL_ENABLE",
        "AITER_LOG_LEVELS": "AITER_LOG_LEVEL",
        "HSA_OVERRIDE_GFX_VERSION_X": "HSA_OVERRIDE_GFX_VERSION",
    }


# One file per read pattern the generator supports, and prefixed tokens that are not reads.
TREE = {
    "src/reads.cc": """
#include <cstdlib>
enum { HSA_NOT_AN_ENV_ENUM = 1 };
#define HIP_NOT_AN_ENV_MACRO 2
// getenv("HSA_IN_A_COMMENT") is not a read
static const char* kDirEnv = "RCCL_FROM_A_CONSTANT";
NCCL_PARAM(IbHca, "IB_FROM_PARAM", 0);
RCCL_PARAM(MscclEnabled, "FROM_RCCL_PARAM", 1);
void f(int node) {
  char buf[32];
  const char* a = getenv("HSA_FROM_GETENV");
  const char* b = std::getenv("HIP_FROM_STD_GETENV");
  const char* c = ncclGetEnv("NCCL_FROM_NCCL_GET_ENV");
  std::string d = os::GetEnvVar("HSA_FROM_OS_GET_ENV_VAR");
  const char* e = getenv(kDirEnv);
  ncclGetLevel(&level, "NCCL_FROM_GET_LEVEL_DISABLE", "NCCL_FROM_GET_LEVEL");
  snprintf(buf, sizeof(buf), "HSA_PER_NODE_%d", node);
  const char* g = getenv(buf);
  printf("HSA_ONLY_PRINTED\\n");
}
""",
    "rocclr/utils/flags.hpp": """
#define RUNTIME_FLAGS(debug,release,release_on_stg) \\
release(cstring, HIP_FROM_RELEASE_FLAG, "", "devices") \\
debug(bool, HIP_FROM_DEBUG_FLAG, false, "debug builds") \\
release(int, AMD_LOG_LEVEL, 0, "not a linted prefix")
""",
    "pkg/reads.py": """
import os
NAME = "AITER_FROM_A_CONSTANT"
AITER_DTYPE_NOT_AN_ENV = 3
a = os.environ.get("AITER_FROM_ENVIRON_GET")
b = os.getenv("AITER_FROM_GETENV")
c = os.environ["AITER_FROM_SUBSCRIPT"]
d = "AITER_FROM_IN" in os.environ
e = os.getenv(NAME)
os.environ["AITER_ONLY_WRITTEN"] = "1"


def _flag(name):
    return os.environ.get(name, "") == "1"


f = _flag("AITER_FROM_A_WRAPPER")
for env in ("HIP_FROM_A_LOOP", "ROCM_PATH"):
    g = os.environ.get(env)
h = OptBool(False, env_var="AITER_FROM_ENV_VAR_KEYWORD")
""",
    "CMakeLists.txt": """
if(NOT DEFINED ENV{HIP_FROM_CMAKE_DEFINED})
  set(HIP_NOT_AN_ENV_CMAKE_VARIABLE $ENV{HIP_FROM_CMAKE_ENV})
endif()
set(ENV{HIP_ONLY_SET_IN_CMAKE} "")
""",
}
READ = {
    "HSA_FROM_GETENV",
    "HIP_FROM_STD_GETENV",
    "NCCL_FROM_NCCL_GET_ENV",
    "HSA_FROM_OS_GET_ENV_VAR",
    "RCCL_FROM_A_CONSTANT",
    "NCCL_FROM_GET_LEVEL_DISABLE",
    "NCCL_FROM_GET_LEVEL",
    "NCCL_IB_FROM_PARAM",
    "RCCL_FROM_RCCL_PARAM",
    "HIP_FROM_RELEASE_FLAG",
    "HIP_FROM_DEBUG_FLAG",
    "AITER_FROM_A_CONSTANT",
    "AITER_FROM_ENVIRON_GET",
    "AITER_FROM_GETENV",
    "AITER_FROM_SUBSCRIPT",
    "AITER_FROM_IN",
    "AITER_FROM_A_WRAPPER",
    "HIP_FROM_A_LOOP",
    "AITER_FROM_ENV_VAR_KEYWORD",
    "HIP_FROM_CMAKE_DEFINED",
    "HIP_FROM_CMAKE_ENV",
}


def git(repo: Path, *args: str) -> str:
    cmd = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com", *args]
    return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip()


def test_generator_reads_the_names_a_git_tree_reads(tmp_path):
    repo = tmp_path / "rccl"
    git(tmp_path, "init", "-q", str(repo))
    for name, text in TREE.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text, encoding="utf-8")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "reads")
    (repo / "src" / "later.cc").write_text('auto x = getenv("HSA_NOT_COMMITTED");\n', encoding="utf-8")
    commit, date = git(repo, "rev-parse", "HEAD"), git(repo, "log", "-1", "--format=%cI")

    out = subprocess.run(
        [sys.executable, str(ROOT / "ci" / "gen_known_env.py"), f"git:{repo}=https://github.com/ROCm/rccl"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    data = json.loads(out.stdout)
    assert set(data["names"]) == READ
    assert data["name_patterns"] == ["HSA_PER_NODE_[0-9]+"]
    assert data["sources"] == [
        f"https://github.com/ROCm/rccl at {commit} ({date}) (source tree, reads parsed)"
    ]
    assert data["prefixes_judged"] == ["RCCL_"]  # NCCL_ stays NVIDIA NCCL's to judge


ROOT = Path(__file__).resolve().parents[2]


def test_generator_reads_a_named_branch_not_head(tmp_path):
    """hipcc's sources live on ROCm/HIPCC's `develop` branch; its default branch holds only a README."""
    repo = tmp_path / "HIPCC"
    git(tmp_path, "init", "-q", "-b", "deprecated", str(repo))
    (repo / "README.md").write_text("moved\n", encoding="utf-8")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "moved")
    git(repo, "checkout", "-q", "-b", "develop")
    (repo / "src").mkdir()
    (repo / "src" / "hipBin_base.h").write_text(
        '# define HIP_CLANG_PATH "HIP_CLANG_PATH"\nauto p = std::getenv(HIP_CLANG_PATH);\n', encoding="utf-8"
    )
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "sources")
    develop = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", "deprecated")

    def run(spec: str) -> dict:
        out = subprocess.run(
            [sys.executable, str(ROOT / "ci" / "gen_known_env.py"), f"{spec}=https://github.com/ROCm/HIPCC"],
            capture_output=True, text=True, check=True, timeout=60,
        )  # fmt: skip
        return json.loads(out.stdout)

    assert run(f"git:{repo}")["names"] == []
    data = run(f"git:{repo}@develop")
    assert data["names"] == ["HIP_CLANG_PATH"]
    assert data["sources"][0].startswith(f"https://github.com/ROCm/HIPCC at {develop} (")
    assert data["sources"][0].endswith(", develop) (source tree, reads parsed)")
