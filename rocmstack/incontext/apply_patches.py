#!/usr/bin/env python3
"""Apply rocmstack patch specs inside an image build, failing loudly.

Standard library only: this file is copied into the build context and runs before rocmstack itself is
installed. Unlike ``sed``, every edit must match exactly the number of times its spec says, otherwise
the build stops naming the patch id, the file and the text that moved.

    apply_patches.py [--source-root DIR] SPEC.json [SPEC.json ...]
"""

from __future__ import annotations

import argparse
import glob
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

EXIT_FAILED = 3


class PatchFailed(Exception):
    pass


def state_root() -> Path:
    return Path(os.environ.get("ROCMSTACK_ROOT", "/opt/rocmstack"))


def _module_dir(patch_id: str, module: str) -> Path:
    spec = importlib.util.find_spec(module)
    if spec is None:
        raise PatchFailed(
            f"[{patch_id}] python module {module!r} is not installed, so its file cannot be patched"
        )
    if spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations)))
    if spec.origin:
        return Path(spec.origin).parent
    raise PatchFailed(f"[{patch_id}] cannot locate the files of module {module!r}")


def target_dir(spec: dict, source_root: Path | None) -> Path:
    target = spec["target"]
    if target.get("module"):
        return _module_dir(spec["id"], target["module"])
    if source_root is None:
        raise PatchFailed(f"[{spec['id']}] a source patch needs --source-root (the component's checkout)")
    return source_root


def _first_line(text: str) -> str:
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return line if len(line) <= 80 else line[:77] + "..."


def apply_edits(spec: dict, base: Path) -> Path:
    path = base / spec["target"]["path"]
    if not path.is_file():
        raise PatchFailed(
            f"[{spec['id']}] target file {path} does not exist (did the upstream layout change?)"
        )
    try:
        # Bytes, not read_text: universal newlines would rewrite a CRLF file to LF.
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PatchFailed(
            f"[{spec['id']}] target file {path} is not UTF-8 text (byte {exc.start}): "
            "re-check the patch against the pinned version"
        ) from None
    crlf = "\r\n" in text

    def lines(s: str) -> str:
        # A spec's edits are written with \n; in a CRLF file they mean \r\n.
        return s.replace("\n", "\r\n") if crlf and "\r" not in s else s

    for number, edit in enumerate(spec["edits"], start=1):
        want = int(edit.get("count", 1))
        find, replace = lines(edit["find"]), lines(edit["replace"])
        found = text.count(find)
        if found != want:
            hint = (
                " (its replacement is already there: the fix is upstream, drop the patch)"
                if (found == 0 and replace in text)
                else " (upstream text moved: re-check the patch against the pinned version)"
            )
            raise PatchFailed(
                f"[{spec['id']}] edit {number} of {len(spec['edits'])} expected {want} match(es) of "
                f"{_first_line(edit['find'])!r} in {path}, found {found}{hint}"
            )
        text = text.replace(find, replace)
    path.write_bytes(text.encode("utf-8"))
    return Path(path)


def apply_symlink(spec: dict, base: Path) -> Path:
    link = spec["symlink"]
    pattern = base / spec["target"]["path"] / link["glob"]
    matches = sorted(glob.glob(str(pattern)))
    if len(matches) != 1:
        raise PatchFailed(
            f"[{spec['id']}] expected exactly one file matching {pattern}, found {len(matches)}: {matches}"
        )
    dest = Path(link["link"])
    dest.parent.mkdir(parents=True, exist_ok=True)
    if dest.is_symlink() or dest.exists():
        if dest.resolve() == Path(matches[0]).resolve():
            raise PatchFailed(
                f"[{spec['id']}] {dest} already points to {matches[0]}: the base provides it now, drop the patch"
            )
        raise PatchFailed(f"[{spec['id']}] {dest} already exists and points elsewhere ({dest.resolve()})")
    dest.symlink_to(matches[0])
    if link.get("ldconfig"):
        proc = subprocess.run(["ldconfig"], capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            raise PatchFailed(
                f"[{spec['id']}] ldconfig failed after linking {dest}: {proc.stderr.strip()[-300:]}"
            )
    return dest


def apply_pip_install_dir(spec: dict, base: Path) -> Path:
    install = spec["install"]
    src = base / spec["target"]["path"]
    if not ((src / "pyproject.toml").is_file() or (src / "setup.py").is_file()):
        raise PatchFailed(f"[{spec['id']}] {src} holds no pyproject.toml or setup.py: the SDK layout changed")
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-cache-dir", str(src)],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-15:])
        raise PatchFailed(f"[{spec['id']}] pip install {src} failed:\n{tail}")
    importlib.invalidate_caches()
    if importlib.util.find_spec(install["verify_module"]) is None:
        raise PatchFailed(
            f"[{spec['id']}] installed {src} but module {install['verify_module']!r} is still missing"
        )
    return Path(src)


ACTIONS = {"edit": apply_edits, "symlink": apply_symlink, "pip-install-dir": apply_pip_install_dir}


def apply(spec: dict, source_root: Path | None = None) -> Path:
    done = ACTIONS[spec["action"]](spec, target_dir(spec, source_root))
    marker_dir = state_root() / "patches" / "applied"
    marker_dir.mkdir(parents=True, exist_ok=True)
    marker = {"id": spec["id"], "component": spec["component"], "target": str(done)}
    (marker_dir / f"{spec['id']}.json").write_text(
        json.dumps(marker, sort_keys=True) + "\n", encoding="utf-8"
    )
    return done


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source-root", type=Path)
    parser.add_argument("specs", nargs="+", type=Path)
    args = parser.parse_args(argv)
    for spec_path in args.specs:
        try:
            spec = json.loads(spec_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            print(f"rocmstack patch FAILED: cannot read patch spec {spec_path}: {exc}", file=sys.stderr)
            return EXIT_FAILED
        try:
            done = apply(spec, args.source_root)
        except PatchFailed as exc:
            print(f"rocmstack patch FAILED: {exc}", file=sys.stderr)
            return EXIT_FAILED
        except (OSError, ValueError) as exc:
            # Always with the patch id: the build names the failed patch from this line.
            print(f"rocmstack patch FAILED: [{spec.get('id', spec_path.stem)}] {exc}", file=sys.stderr)
            return EXIT_FAILED
        print(f"rocmstack patch applied: [{spec['id']}] {done}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
