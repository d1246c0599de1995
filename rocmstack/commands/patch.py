"""``rocmstack patch test`` (a recipe's patches tried on their components' pinned sources, before any build)
and ``rocmstack patch new`` (a spec made from ``git diff`` output)."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from rocmstack.options import (
    ARCH_OPT,
    COMPONENT,
    JSON_OPT,
    ONLY,
    OUTPUT,
    PATCHES_DIR_OPT,
    RECIPE_ARG,
    SET_OPT,
    split_ids,
)


def register(app: typer.Typer) -> None:
    patch_app = typer.Typer(
        name="patch", help="Test a recipe's patches before the build; make a patch spec from a diff.",
        no_args_is_help=True,
    )  # fmt: skip
    app.add_typer(patch_app)

    @patch_app.command("test")
    def test_cmd(
        recipe: str = RECIPE_ARG,
        gpu_arch: str | None = ARCH_OPT,
        overrides: list[str] = SET_OPT,
        patches_dir: Path | None = PATCHES_DIR_OPT,
        only: list[str] = ONLY([]),
        json_out: bool = JSON_OPT,
    ) -> None:
        """Apply every patch of RECIPE, as the build would, to its component's pinned source fetched into a
        temporary folder (the wheel from the index, or the git tree at the lock's commit, else the ref), and
        report each edit and hunk. Nothing is written outside that folder.

        Exit 0 when every patch tried applies, 1 when one does not, 4 when a component's source could not be
        fetched (no verdict on its patches), 5 when none could be tried (all act on the base image's files,
        which only the build has)."""
        from rocmstack.errors import printable
        from rocmstack.lock.file import arch_key, entry_of, lock_path
        from rocmstack.output import print_json, progress_lines
        from rocmstack.patch_trial import only_these, summarize, trial
        from rocmstack.patches import chosen_patches_dir, load_patches, select
        from rocmstack.recipe.load import load_recipe
        from rocmstack.recipe.resolve import resolve

        model, path = load_recipe(recipe, overrides)
        resolved = resolve(model, path, gpu_arch, tuple(overrides))
        folder = chosen_patches_dir(model, path, patches_dir)
        chosen = select(model.patches, load_patches(folder), dict(model.components), str(path))
        chosen = only_these(list(split_ids(only)), chosen)
        entry = entry_of(lock_path(path), arch_key(resolved.gpu_archs))
        with progress_lines("patch test") as say:
            trials = trial(resolved, chosen, entry, say)
        code, counts, verdict = summarize(trials)
        if json_out:
            rows = [t.as_dict() for t in trials]
            print_json({"recipe": model.name, "gpu_archs": list(resolved.gpu_archs), "counts": counts,
                        "verdict": verdict, "patches": rows})  # fmt: skip
        else:
            lines = []  # upstream text (paths, a diff's headers): escaped, never read by the terminal
            for t in trials:
                lines.append(
                    f"{t.status.upper():9} {t.patch} ({t.component})"
                    + (f" on {t.source}" if t.source else "")
                )
                lines += [f"  {'ok  ' if st.ok else 'FAIL'} {st.what}: {st.detail}" for st in t.steps]
                if t.reason and all(st.ok for st in t.steps):
                    lines.append(f"  {t.reason}")
            sys.stdout.write("".join(printable(line) + "\n" for line in lines))
            tally = ", ".join(f"{n} {status}" for status, n in counts.items() if n)
            sys.stdout.write(f"patch test {model.name}: {verdict} ({tally or 'no patches'})\n")
        raise typer.Exit(int(code))

    @patch_app.command("new")
    def new_cmd(
        patch_id: str = typer.Argument(..., metavar="ID", help="The patch's id (its file is ID.yaml)."),
        component: str = COMPONENT(...),
        diff: str = typer.Option(..., "--diff", metavar="FILE", help="`git diff` output; - reads stdin."),
        summary: str = typer.Option(..., "--summary", help="One line: what the patch changes."),
        upstream: list[str] = typer.Option(
            ..., "--upstream", metavar="URL", help="Where the change comes from or is discussed (repeat)."
        ),
        why: str | None = typer.Option(None, "--why", help="Why the image needs it (default: the summary)."),
        drop_when: str | None = typer.Option(None, "--drop-when", help="When to drop it."),
        refs: list[str] = typer.Option(
            [], "--ref", help="The git ref or commit it was made against (repeat)."
        ),
        versions: str | None = typer.Option(None, "--versions", help="The component versions it applies to."),
        module: str | None = typer.Option(
            None, "--module", help="Patch an installed python package (default: the component's checkout)."
        ),
        path: str = typer.Option(".", "--path", help="The diff's root below the checkout or package."),
        strip: int = typer.Option(1, "--strip", help="Leading folders dropped from the diff's paths (-p)."),
        out_dir: Path = OUTPUT(Path("patches"), detail="Here: the patch folder ID.yaml and diffs/ go into."),
        json_out: bool = JSON_OPT,
    ) -> None:
        """Make a patch spec from a unified diff: writes ID.yaml (action unified-diff, the diff's sha256) and
        diffs/ID.diff into the patch folder. Nothing is overwritten."""
        import os
        import tempfile

        from rocmstack.errors import InputError, quoted
        from rocmstack.output import print_json
        from rocmstack.patches import load_patch, new_spec

        if diff == "-":
            data = sys.stdin.buffer.read()
        else:
            try:
                data = Path(diff).read_bytes()
            except OSError as exc:
                raise InputError(
                    f"--diff {quoted(diff)}: {exc.strerror}", fix="give the file `git diff` wrote"
                ) from None
        if not data.strip():
            raise InputError(
                f"--diff {quoted(diff)} is empty",
                fix="run `git diff > FILE` in the component's checkout, after your change",
            )
        spec_file, diff_file = out_dir / f"{patch_id}.yaml", out_dir / "diffs" / f"{patch_id}.diff"
        for existing in (spec_file, diff_file):
            if existing.exists():
                raise InputError(
                    f"{quoted(str(existing))} exists", fix="choose another id, or remove the file"
                )
        _patch, text = new_spec(
            patch_id=patch_id, component=component, diff=data, summary=summary, upstream=tuple(upstream),
            why=why, drop_when=drop_when, refs=tuple(refs), versions=versions, module=module, path=path,
            strip=strip,
        )  # fmt: skip
        if not out_dir.is_dir():
            raise InputError(
                f"--output {quoted(str(out_dir))} is not a folder", fix="create it, or give another"
            )
        # Both files complete or neither: written aside, read back as any spec is, then moved in.
        with tempfile.TemporaryDirectory(dir=out_dir, prefix=".new-") as tmp:
            (Path(tmp) / "diffs").mkdir()
            (Path(tmp) / "diffs" / diff_file.name).write_bytes(data)
            (Path(tmp) / spec_file.name).write_text(text, encoding="utf-8")
            load_patch(Path(tmp) / spec_file.name)
            diff_file.parent.mkdir(exist_ok=True)
            os.replace(Path(tmp) / "diffs" / diff_file.name, diff_file)
            os.replace(Path(tmp) / spec_file.name, spec_file)
        if json_out:
            print_json({"id": patch_id, "spec": str(spec_file), "diff": str(diff_file)})
        else:
            sys.stdout.write(
                f"wrote {spec_file} and {diff_file}; list {patch_id} under the recipe's patches, then "
                f"`rocmstack patch test RECIPE --only {patch_id}`\n"
            )
