"""README.md and docs/*.md stay true to the CLI: every command they show parses (its command path has a
``--help``, its options exist, its values convert), every recipe it names exists, every make target is in
the Makefile, and every image tag they quote is one the recipes really produce."""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

import pytest
import typer.main

from rocmstack.cli import _hoist_global_options, main, make_app
from rocmstack.recipe.load import load_recipe, recipe_files, recipes_on_path
from rocmstack.resources import RECIPES_PATH_ENV

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# Pages whose commands run in a folder they make themselves (its recipes exist only there): their own tests
# run them as written (docs/lab-repository.md: tests/integration/test_lab_repository.py).
RUN_IN_THEIR_OWN_FOLDER = {"lab-repository.md"}
ROOT_COMMAND = typer.main.get_command(make_app())
# Commands whose first argument is a recipe name or path.
RECIPE_COMMANDS = {"show", "render", "check", "lock", "build", "tags"}
_FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)
_SHELL_OPERATORS = {">", ">>", "|", ";", "&&", "||", "2>&1"}


def _blocks(page: Path) -> list[tuple[str, str]]:
    return [(m[1], m[2]) for m in _FENCE.finditer(page.read_text(encoding="utf-8"))]


def _command_lines(kind: str, body: str) -> list[str]:
    lines = []
    for raw in body.splitlines():
        line = raw.strip()
        if kind == "console":
            if not line.startswith("$ "):
                continue
            line = line[2:]
        elif kind not in ("bash", "sh", "shell"):
            continue
        lines.append(line)
    return lines


def _examples(program: str) -> list[tuple[str, list[str]]]:
    """(page: line, words) of every `program ...` line in a shell or console block, comments and
    redirections cut off; leading VAR=value assignments kept as words."""
    found = []
    for page in PAGES:
        if page.name in RUN_IN_THEIR_OWN_FOLDER:
            continue
        for kind, body in _blocks(page):
            for line in _command_lines(kind, body):
                words = shlex.split(line, comments=True)
                for i, word in enumerate(words):
                    if word in _SHELL_OPERATORS or word.startswith((">", "2>")):  # a redirection ends it
                        words = words[:i]
                        break
                lead = 0
                while lead < len(words) and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", words[lead]):
                    lead += 1
                if words[lead : lead + 1] == [program]:
                    found.append((f"{page.relative_to(ROOT)}: {line}", words))
    return found


ROCMSTACK_EXAMPLES = _examples("rocmstack")
MAKE_EXAMPLES = _examples("make")


def test_the_pages_show_commands_at_all():
    assert len(ROCMSTACK_EXAMPLES) >= 30 and len(MAKE_EXAMPLES) >= 4
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "make build GPU_ARCH=gfx950" in readme and "make test" in readme
    # short: 160 lines at most, beside the options table generated from rocmstack/options.py
    generated = readme.split("<!-- options-table:begin -->")[1].split("<!-- options-table:end -->")[0]
    assert len(readme.splitlines()) - len(generated.splitlines()) <= 160


def _split(words: list[str]) -> tuple[dict[str, str], list[str]]:
    env = {}
    while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", words[0]):
        key, _, value = words.pop(0).partition("=")
        env[key] = value
    return env, words[1:]


def _resolve(args: list[str]):
    """(command path, the command, its arguments, --recipes-dir folders) as the CLI would see them."""
    rest = _hoist_global_options(args)
    dirs = []
    while rest and rest[0].startswith("-") and rest[0] != "--help":
        option = rest.pop(0)
        if option == "--recipes-dir":
            dirs.append(rest.pop(0))
        elif option.startswith("--recipes-dir="):
            dirs.append(option.partition("=")[2])
        else:
            assert option in ("-q", "--quiet"), f"unknown program option {option}"
    command, path = ROOT_COMMAND, []
    while hasattr(command, "commands") and rest and rest[0] in command.commands:
        path.append(rest[0])
        command = command.commands[rest.pop(0)]
    return path, command, rest, dirs


@pytest.mark.parametrize(("where", "words"), ROCMSTACK_EXAMPLES, ids=[w for w, _ in ROCMSTACK_EXAMPLES])
def test_every_documented_command_parses(where, words, capsys, monkeypatch):
    env, args = _split(list(words))
    path, command, rest, root = _resolve(args)
    with pytest.raises(SystemExit) as exc:
        main([*path, "--help"])
    assert exc.value.code == 0, f"{where}: `rocmstack {' '.join(path)} --help` failed"
    capsys.readouterr()
    if rest == ["--help"]:
        return
    # Options exist, values convert, required arguments are there: the command is not run.
    ctx = command.make_context(" ".join(path), rest)
    recipe = ctx.params.get("recipe") if path[0] in RECIPE_COMMANDS else None
    names = ctx.params.get("recipes") or []
    dirs = [str(ROOT / d) for d in root]
    dirs += [str(ROOT / d) for d in env.get(RECIPES_PATH_ENV, "").split(os.pathsep) if d]
    monkeypatch.setenv(RECIPES_PATH_ENV, os.pathsep.join(dirs))
    for name in [recipe, *names] if recipe else names:
        if name.endswith((".yaml", ".yml")):
            assert (ROOT / name).is_file(), f"{where}: no recipe file {name}"
        else:
            assert name in recipes_on_path(), f"{where}: no recipe named {name}"
        load_recipe(str(ROOT / name) if name.endswith(".yaml") else name)


def _make_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    return set(re.findall(r"^([a-z][\w-]*):", text, flags=re.MULTILINE))


@pytest.mark.parametrize(("where", "words"), MAKE_EXAMPLES, ids=[w for w, _ in MAKE_EXAMPLES])
def test_every_documented_make_call_names_a_target_and_a_recipe(where, words):
    _, args = _split(list(words))
    targets = [a for a in args if "=" not in a]
    variables = dict(a.split("=", 1) for a in args if "=" in a)
    assert set(targets) <= _make_targets(), where
    if "RECIPE" in variables:
        assert variables["RECIPE"] in recipe_files(), where


def _real_tags() -> set[str]:
    from rocmstack.build.tags import tag_set
    from rocmstack.recipe.resolve import resolve

    tags = set()
    for name in recipe_files():
        recipe, path = load_recipe(name)
        for archs in [None, *recipe.gpu_archs]:
            tags |= set(tag_set(resolve(recipe, path, archs), "0" * 64).all) - {"r-000000000000"}
    return tags


def test_quoted_image_tags_are_the_ones_the_recipes_produce():
    real = _real_tags()
    tag = re.compile(r"\b(?:verl|vime)[\w.-]*?_(?:gfx[0-9a-f]{3,4})(?:-gfx[0-9a-f]{3,4})*\b")
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for quoted in [] if page.name in RUN_IN_THEIR_OWN_FOLDER else tag.findall(text):
            assert quoted in real, f"{page.relative_to(ROOT)} quotes the tag {quoted}, which no recipe makes"
        # A content tag (r-<12 hex>) goes stale with every template change: show how to get it instead.
        assert not re.search(r"\br-[0-9a-f]{12}\b", text), f"{page.relative_to(ROOT)} quotes a content tag"


# Pages other parts of the project add; linked ahead of them.
_PAGES_TO_COME = {"security.md", "locking.md", "publish.md", "doctor-levels.md"}


def test_relative_links_point_at_files_that_exist():
    link = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
    for page in PAGES:
        for target in link.findall(page.read_text(encoding="utf-8")):
            if "://" in target or Path(target).name in _PAGES_TO_COME:
                continue
            assert (page.parent / target).exists(), f"{page.relative_to(ROOT)} links to missing {target}"


# Every command a message prints for a recipe (`run \`rocmstack lock ...\``), quoted in backticks.
_HINT = re.compile(r"`(rocmstack [^`]+)`")
_UNREACHABLE_GIT = "https://git.invalid/lab/helper.git"  # .invalid never resolves (RFC 2606)


def _hints(text: str) -> list[str]:
    return list(dict.fromkeys(_HINT.findall(text)))


def _lab(folder: Path) -> Path:
    """A parent on PyPI wheels only and a child that adds an env var and a git component out of reach."""
    folder.mkdir()
    fixture = ROOT / "tests" / "fixtures" / "recipes" / "tiny-pip.yaml"
    text = fixture.read_text().replace("name: tiny-pip", "name: lab-base")
    (folder / "lab-base.yaml").write_text(text.replace("patches:\n  - tomli-marker\n", "patches: []\n"))
    child = folder / "lab-child.yaml"
    child.write_text(
        "name: lab-child\nextends: lab-base\ndescription: the lab's variant\n"
        "components:\n  helper:\n    source: git\n    layer: app\n"
        f"    url: {_UNREACHABLE_GIT}\n    ref: main\n    no_deps: true\n"
        "env:\n  LAB_DEBUG: '1'\n"
        "publish:\n  repository: localhost/lab/child\n  tag: child-{arch}\n  aliases: []\n"
    )
    return child


def _follow(cli, hint: str, cwd: Path, env: dict) -> None:
    """Run a printed command exactly as printed; where it stops for the network, run the command it
    prints for the way on, which must then succeed."""
    res = cli(*shlex.split(hint)[1:], cwd=cwd, env=env)
    if res.code == 4:
        (again,) = [h for h in _hints(res.err) if "--allow-unreachable-git" in h]
        res = cli(*shlex.split(again)[1:], cwd=cwd, env=env)
    assert res.code == 0, f"`{hint}`: {res.err}"


@pytest.mark.network
@pytest.mark.parametrize("how", ["path", "recipes-dir"])
def test_every_hint_printed_for_a_recipe_runs_as_printed(cli, tmp_path, how):
    """A recipe given by path, and one found through --recipes-dir, from another folder: each command that
    check, lock, render and outdated print for it runs as printed."""
    child = _lab(tmp_path / "lab")
    cwd = tmp_path / "ci"
    cwd.mkdir()
    env = {"ROCMSTACK_CACHE": str(tmp_path / "cache"), "GIT_TERMINAL_PROMPT": "0"}
    given = [os.path.relpath(child, cwd)] if how == "path" else ["lab-child", "--recipes-dir", "../lab"]
    seen: list[str] = []

    def hints_of(*args: str, code: int | None = None) -> list[str]:
        res = cli(*args, cwd=cwd, env=env)
        if code is not None:
            assert res.code == code, res.err
        found = _hints(res.out + res.err)
        seen.extend(found)
        return found

    # No lock yet: check says how to write one; lock itself stops at the git remote and says how to go on.
    (relock,) = hints_of("check", *given, "--offline", "--json", code=0)
    assert relock.startswith("rocmstack lock ") and ("--recipes-dir" in relock) == (how == "recipes-dir")
    res = cli(*shlex.split(relock)[1:], cwd=cwd, env=env)
    assert res.code == 4 and "git.invalid" in res.err and res.err.count("rocmstack: error:") == 1
    (allow,) = _hints(res.err)
    seen.append(allow)
    assert "--allow-unreachable-git" in allow
    _follow(cli, allow, cwd, env)
    # The recipe moves: render refuses the drift and names the relock.
    child.write_text(child.read_text().replace("LAB_DEBUG: '1'", "LAB_DEBUG: '2'"))
    (drifted,) = hints_of("render", *given, "-o", str(tmp_path / "out"), code=2)
    _follow(cli, drifted, cwd, env)
    # The lock's render hash is not this rocmstack's: the note says what refreshes it.
    lock = child.with_name("lab-child.lock.json")
    lock.write_text(
        re.sub(r'"render_hash": "[0-9a-f]{64}"', '"render_hash": "' + "0" * 64 + '"', lock.read_text())
    )
    notes = hints_of("render", *given, "-o", str(tmp_path / "out2"), code=0)
    assert notes and all(n.startswith("rocmstack lock ") for n in notes)
    for hint in notes:
        _follow(cli, hint, cwd, env)
    # outdated: every row's command (a range the index allows, a moved branch) names the recipe too.
    for hint in hints_of("outdated", *given, "--no-resolve"):
        assert hint.startswith(("rocmstack lock ", "rocmstack check "))
        _follow(cli, hint, cwd, env)
    assert all(("--recipes-dir" in h) == (how == "recipes-dir") for h in seen), seen
