"""A recipe's framework-smoke command is code: where it may run and the environment it gets.

Real runs: the command is a Python process that prints its own environment, started by ``smoke framework``
and ``validate --in-place --recipe`` as a user would; "inside an image" is a real lock.json file.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from rocmstack import contract
from rocmstack.cli import main
from rocmstack.recipe.load import load_recipe
from rocmstack.smoke import framework
from rocmstack.validate import pipeline

FIXTURES = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "recipes"
SECRETS = {
    "HF_TOKEN": "hf_caller_secret_123",
    "GITHUB_TOKEN": "ghp_caller_secret_456",
    "AWS_SECRET_ACCESS_KEY": "aws_caller_secret_789",
    "DB_PASSWORD": "pw_caller_secret",
    "MY_API_KEY": "key_caller_secret",
}
# The command prints its environment as one JSON line, then one kv-console step.
PRINT_ENV = """\
framework: envprinter
command: ["{python}", "-c", "import json, os; print('ENV ' + json.dumps(dict(os.environ))); print('step:1 - a:1')"]
env: {SMOKE_SETTING: "{work_dir}"}
pass_env: [MY_DECLARED, HF_HUB_OFFLINE]
steps: 1
timeout_s: 60
metrics: {format: kv-console}
checks: [{metric: a, op: ">", value: 0.0}]
"""


def _recipe(tmp_path: Path, smoke: str = PRINT_ENV) -> Path:
    (tmp_path / "tiny-pip.yaml").write_text((FIXTURES / "tiny-pip.yaml").read_text())
    path = tmp_path / "fw.yaml"
    path.write_text(
        "name: fw\nextends: tiny-pip\ndescription: test\n"
        "publish: {repository: localhost/t/fw, tag: 'fw_{arch}', aliases: []}\n"
        "framework_smoke:\n" + textwrap.indent(smoke, "  ")
    )
    return path


def _env_seen(log: Path) -> dict[str, str]:
    line = next(ln for ln in log.read_text().splitlines() if ln.startswith("ENV "))
    return json.loads(line[4:])


@pytest.fixture
def caller_env(monkeypatch):
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("HIP_VISIBLE_DEVICES", "3")
    monkeypatch.setenv("ROCR_VISIBLE_DEVICES", "0,1")
    monkeypatch.setenv("LC_ALL", "C.UTF-8")
    monkeypatch.setenv("MY_DECLARED", "declared-value")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("ROCMSTACK_UNLISTED", "not for the recipe")
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.1:6379")
    monkeypatch.setenv("HSA_TOOLS_URL", "https://user:hunter22@example.invalid/x")  # credentials in a URL


def test_outside_an_image_the_command_needs_the_flag(tmp_path, capsys, caller_env):
    assert not Path(contract.LOCK_PATH).exists()  # this node is no rocmstack image
    path = _recipe(tmp_path)
    with pytest.raises(SystemExit) as exc:
        main(["smoke", "framework", str(path), "--output", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert "recipe fw:" in err and "--allow-recipe-command" in err and contract.LOCK_PATH in err
    assert not (tmp_path / "out").exists()  # refused before anything is made or run


def test_with_the_flag_it_runs_with_a_minimal_environment_and_no_secret(tmp_path, capsys, caller_env):
    pytest.importorskip("pyarrow", reason="the smoke's parquet is written with pyarrow (test extra)")
    path = _recipe(tmp_path)
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as exc:
        main(["smoke", "framework", str(path), "--output", str(out), "--allow-recipe-command", "--json"])
    summary = json.loads(capsys.readouterr().out)
    assert exc.value.code == 0 and summary["passed"], summary["criteria"]
    seen = _env_seen(out / framework.LOG_NAME)
    for name, value in SECRETS.items():
        assert name not in seen
        assert value not in json.dumps(seen)
    assert "HSA_TOOLS_URL" not in seen and "hunter22" not in json.dumps(seen)
    assert "ROCMSTACK_UNLISTED" not in seen and "RAY_ADDRESS" not in seen
    assert seen["HIP_VISIBLE_DEVICES"] == "3" and seen["ROCR_VISIBLE_DEVICES"] == "0,1"
    assert seen["LC_ALL"] == "C.UTF-8" and seen["PATH"] and seen["HOME"]
    assert seen["MY_DECLARED"] == "declared-value" and seen["HF_HUB_OFFLINE"] == "1"  # pass_env
    assert seen["SMOKE_SETTING"] == str(out.resolve())  # env, placeholders filled


def test_inside_an_image_it_runs_without_the_flag_still_without_secrets(
    tmp_path, capsys, caller_env, monkeypatch
):
    pytest.importorskip("pyarrow", reason="the smoke's parquet is written with pyarrow (test extra)")
    lock = tmp_path / "image" / "lock.json"
    lock.parent.mkdir()
    lock.write_text('{"recipe": "fw"}')
    monkeypatch.setattr(framework, "LOCK_PATH", str(lock))  # the image contract's file, real
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as exc:
        main(["smoke", "framework", str(_recipe(tmp_path)), "--output", str(out), "--json"])
    capsys.readouterr()
    assert exc.value.code == 0
    seen = _env_seen(out / framework.LOG_NAME)
    assert not set(SECRETS) & set(seen)


def test_a_secret_named_in_pass_env_is_refused_with_one_line(tmp_path, capsys):
    path = _recipe(tmp_path, PRINT_ENV.replace("[MY_DECLARED, HF_HUB_OFFLINE]", "[MY_DECLARED, HF_TOKEN]"))
    with pytest.raises(SystemExit) as exc:
        main(["smoke", "framework", str(path), "--allow-recipe-command", "--output", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1 and "HF_TOKEN names a secret" in err


def test_command_env_never_passes_a_secret_even_when_named():
    decl = load_recipe(str(FIXTURES / "trl-cpu.yaml"))[0].framework_smoke
    assert decl is not None
    # model_copy skips the model's check: command_env is the last guard.
    named = decl.model_copy(update={"pass_env": ("GITHUB_TOKEN", "GL_PAT", "OTHER")})
    env = framework.command_env(
        named,
        {"work_dir": "/w"},
        {"GITHUB_TOKEN": "t", "GL_PAT": "p", "OTHER": "o", "PATH": "/bin", "CUDA_VISIBLE_DEVICES": "1"},
    )
    assert env == {
        "OTHER": "o",
        "PATH": "/bin",
        "CUDA_VISIBLE_DEVICES": "1",
        "WANDB_MODE": "disabled",
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "HF_HOME": "/w/hf",
    }


VALIDATE_ARGS = [
    "validate",
    "--in-place",
    "--device",
    "cpu",
    "--skip-smoke",
    "--skip-bench",
    "--expect-gpus",
    "0",
]


def test_validate_in_place_with_a_recipe_needs_the_flag_before_any_stage(tmp_path, capsys, caller_env):
    path = _recipe(tmp_path)
    report = tmp_path / "report"
    with pytest.raises(SystemExit) as exc:
        main([*VALIDATE_ARGS, "--recipe", str(path), "--output", str(report)])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1 and "--allow-recipe-command" in err
    assert "recipe fw:" in err and not report.exists()
    # --skip-framework runs no command of the recipe: nothing to allow.
    pipeline.ValidateOptions(report_dir=report, recipe=str(path), skip_framework=True).validated()


def test_validate_framework_stage_runs_the_recipe_with_the_flag_without_secrets(tmp_path, caller_env):
    pytest.importorskip("pyarrow", reason="the smoke's parquet is written with pyarrow (test extra)")
    path = _recipe(tmp_path)
    image = {"lock": None}  # image_info of a node that is no rocmstack image
    refused = pipeline.ValidateOptions(report_dir=tmp_path / "r1", recipe=str(path))
    stage, _ = pipeline.run_framework_stage(refused, image, lambda msg: None)
    assert stage["status"] == pipeline.ERROR and "--allow-recipe-command" in stage["summary"]
    assert not (tmp_path / "r1").exists()
    opts = pipeline.ValidateOptions(report_dir=tmp_path / "r2", recipe=str(path), allow_recipe_command=True)
    stage, _ = pipeline.run_framework_stage(opts.validated(), image, lambda msg: None)
    assert stage["status"] == pipeline.PASS, stage
    seen = _env_seen(tmp_path / "r2" / pipeline.FRAMEWORK_DIR / framework.LOG_NAME)
    assert not set(SECRETS) & set(seen) and seen["HIP_VISIBLE_DEVICES"] == "3"


def test_validate_refuses_the_flag_without_in_place(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["validate", "some/image", "--allow-recipe-command", "--output", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "--allow-recipe-command is for --in-place" in err


def test_the_shipped_declarations_keep_what_their_images_set(monkeypatch):
    """What each shipped recipe's image sets in ENV (its env) still reaches its own framework's command."""
    for name in ("verl-0.9.0-rocm10", "verl-0.7.1-rocm7.0.2", "vime-megatron-vllm-rocm7.14"):
        recipe = load_recipe(name)[0]
        assert recipe.framework_smoke is not None
        image_env = {**recipe.env, "PYTORCH_ROCM_ARCH": "gfx942", "AITER_JIT_DIR": "/opt/rocmstack/aiter-jit"}
        env = framework.command_env(
            recipe.framework_smoke, {"work_dir": "/w"}, {**image_env, "HF_TOKEN": "x"}
        )
        assert {k: env.get(k) for k in image_env} == image_env, name
        assert "HF_TOKEN" not in env
