#!/usr/bin/env python3
"""Apply rocmstack patch specs inside an image build, failing loudly.

Standard library only: this file is copied into the build context and runs before rocmstack itself is
installed. Unlike ``sed``, every edit must match exactly the number of times its spec says, otherwise
the build stops naming the patch id, the file and the text that moved.

    apply_patches.py [--source-root DIR] SPEC.json [SPEC.json ...]
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import glob
import hashlib
import importlib.util
import json
import os
import stat
import subprocess
import sys
import urllib.request
from pathlib import Path

EXIT_FAILED = 3
# A source patch's diff is kilobytes; the cap stops a wrong URL (a tarball, an endless body) from filling
# the build's memory before the sha256 check can refuse it.
MAX_DIFF_BYTES = 16 << 20


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


@dataclasses.dataclass(frozen=True)
class Outcome:
    """One edit or hunk of a patch against its target: where, whether it applies, and why (``patch test``)."""

    what: str
    ok: bool
    detail: str


def _edit_text(spec: dict, path: Path) -> str:
    if not path.is_file():
        raise PatchFailed(
            f"[{spec['id']}] target file {path} does not exist (did the upstream layout change?)"
        )
    try:
        # Bytes, not read_text: universal newlines would rewrite a CRLF file to LF.
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PatchFailed(
            f"[{spec['id']}] target file {path} is not UTF-8 text (byte {exc.start}): "
            "re-check the patch against the pinned version"
        ) from None


def _edit_outcomes(spec: dict, path: Path, text: str) -> tuple[list[Outcome], str]:
    """Each edit's outcome, in order, and the text with every edit that matched made."""
    crlf = "\r\n" in text

    def lines(s: str) -> str:
        # A spec's edits are written with \n; in a CRLF file they mean \r\n.
        return s.replace("\n", "\r\n") if crlf and "\r" not in s else s

    outcomes = []
    total = len(spec["edits"])
    for number, edit in enumerate(spec["edits"], start=1):
        want = int(edit.get("count", 1))
        find, replace = lines(edit["find"]), lines(edit["replace"])
        found = text.count(find)
        what = f"edit {number} of {total} ({_first_line(edit['find'])!r})"
        if found != want:
            hint = (
                " (its replacement is already there: the fix is upstream, drop the patch)"
                if (found == 0 and replace in text)
                else " (upstream text moved: re-check the patch against the pinned version)"
            )
            outcomes.append(
                Outcome(
                    what,
                    False,
                    f"[{spec['id']}] edit {number} of {total} expected {want} match(es) of "
                    f"{_first_line(edit['find'])!r} in {path}, found {found}{hint}",
                )
            )
            continue
        text = text.replace(find, replace)
        outcomes.append(Outcome(what, True, f"{found} match(es) in {path}"))
    return outcomes, text


def check_edits(spec: dict, base: Path, _spec_dir: Path | None = None) -> list[Outcome]:
    path = base / spec["target"]["path"]
    return _edit_outcomes(spec, path, _edit_text(spec, path))[0]


def apply_edits(spec: dict, base: Path, _spec_dir: Path | None = None) -> Path:
    path = base / spec["target"]["path"]
    outcomes, text = _edit_outcomes(spec, path, _edit_text(spec, path))
    for outcome in outcomes:
        if not outcome.ok:
            raise PatchFailed(outcome.detail)
    path.write_bytes(text.encode("utf-8"))
    return Path(path)


def apply_symlink(spec: dict, base: Path, _spec_dir: Path | None = None) -> Path:
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


def apply_pip_install_dir(spec: dict, base: Path, _spec_dir: Path | None = None) -> Path:
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


def fetch_diff(patch_id: str, url: str) -> bytes:
    """The diff's bytes (https in a build; any urllib URL, so a test can pass file://), refused past
    MAX_DIFF_BYTES: at most one byte more than the cap is ever read."""
    chunks: list[bytes] = []
    left = MAX_DIFF_BYTES + 1
    with urllib.request.urlopen(url, timeout=120) as response:
        while left > 0 and (chunk := response.read(min(left, 1 << 20))):
            chunks.append(bytes(chunk))
            left -= len(chunk)
    if left <= 0:
        raise PatchFailed(
            f"[{patch_id}] {url} is larger than {MAX_DIFF_BYTES / (1 << 20):g} MiB: refused"
            " (a source patch's diff is kilobytes; check that the URL names the raw diff)"
        )
    return b"".join(chunks)


class _Hunk:
    def __init__(self, header: str, old_start: int) -> None:
        self.header = header
        self.old_start = old_start
        self.old: list[str] = []
        self.new: list[str] = []


class _FileDiff:
    def __init__(self, old_path: str, new_path: str) -> None:
        self.old_path = old_path
        self.new_path = new_path
        self.hunks: list[_Hunk] = []


def _strip_path(patch_id: str, raw: str, strip: int) -> str | None:
    name = raw.split("\t", 1)[0].strip()
    if name == "/dev/null":
        return None
    parts = [p for p in name.split("/") if p]
    if len(parts) <= strip:
        raise PatchFailed(f"[{patch_id}] cannot strip {strip} folder(s) from diff path {name!r}")
    rest = parts[strip:]
    if any(p == ".." for p in rest):
        raise PatchFailed(f"[{patch_id}] diff path {name!r} leaves the target folder")
    return "/".join(rest)


def parse_unified_diff(patch_id: str, text: str, strip: int) -> list[_FileDiff]:
    """Files and hunks of a (git-style) unified diff; anything it cannot apply exactly is refused."""
    lines = text.splitlines(keepends=True)
    files: list[_FileDiff] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith(
            ("rename from", "copy from", "deleted file mode", "GIT binary patch", "Binary files")
        ):
            raise PatchFailed(f"[{patch_id}] the diff has {line.strip()!r}: only edits and new files apply")
        if line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            old = _strip_path(patch_id, line[4:], strip)
            new = _strip_path(patch_id, lines[i + 1][4:], strip)
            if new is None:
                raise PatchFailed(f"[{patch_id}] the diff deletes {old}: only edits and new files apply")
            files.append(_FileDiff(old or "", new))
            i += 2
            continue
        if line.startswith("@@"):
            if not files:
                raise PatchFailed(f"[{patch_id}] hunk {line.strip()!r} comes before any file header")
            header = line.strip()
            try:
                ranges = header.split("@@")[1].split()
                old_start, old_len = [*ranges[0][1:].split(","), "1"][:2]
                _new_start, new_len = [*ranges[1][1:].split(","), "1"][:2]
                want_old, want_new = int(old_len), int(new_len)
                hunk = _Hunk(header, int(old_start))
            except (IndexError, ValueError):
                raise PatchFailed(f"[{patch_id}] malformed hunk header {header!r}") from None
            i += 1
            while i < len(lines) and (len(hunk.old) < want_old or len(hunk.new) < want_new):
                body = lines[i]
                tag, content = body[:1], body[1:]
                if body in ("\n", "\r\n"):  # a blank context line whose space was trimmed
                    tag, content = " ", body
                if tag == " ":
                    hunk.old.append(content)
                    hunk.new.append(content)
                elif tag == "-":
                    hunk.old.append(content)
                elif tag == "+":
                    hunk.new.append(content)
                elif tag != "\\":
                    break
                i += 1
                if i < len(lines) and lines[i].startswith("\\"):  # "\ No newline at end of file"
                    if tag in (" ", "-"):
                        hunk.old[-1] = hunk.old[-1].rstrip("\r\n")
                    if tag in (" ", "+"):
                        hunk.new[-1] = hunk.new[-1].rstrip("\r\n")
                    i += 1
            if len(hunk.old) != want_old or len(hunk.new) != want_new:
                raise PatchFailed(
                    f"[{patch_id}] {files[-1].new_path}: hunk {header!r} is truncated"
                    f" ({len(hunk.old)}/{want_old} old, {len(hunk.new)}/{want_new} new lines)"
                )
            files[-1].hunks.append(hunk)
            continue
        i += 1
    if not files or not any(f.hunks for f in files):
        raise PatchFailed(f"[{patch_id}] the diff holds no hunk")
    return files


def _find(haystack: list[str], needle: list[str], near: int, start: int) -> int:
    """Index of needle in haystack at or after start, nearest to near first; -1 if absent."""
    if not needle:
        return max(min(near, len(haystack)), start)
    last = len(haystack) - len(needle)
    for delta in range(max(len(haystack), 1) + 1):
        for pos in (near - delta, near + delta) if delta else (near,):
            if start <= pos <= last and haystack[pos : pos + len(needle)] == needle:
                return pos
    return -1


def _check_no_link(patch_id: str, base: Path, rel: str) -> None:
    """Refuse a write through a link: no folder from base down to ``rel``, nor ``rel`` itself, may be a
    symbolic link (a checkout's ``docs -> /elsewhere`` would carry the write out of the source folder)."""
    current = base
    for part in rel.split("/"):
        current = current / part
        try:
            mode = current.lstat().st_mode
        except FileNotFoundError:
            break  # missing from here down: _write_inside creates it without following a link
        except NotADirectoryError:
            raise PatchFailed(
                f"[{patch_id}] the diff writes {rel}, but {current.parent.relative_to(base)} is a file,"
                " not a folder (did the upstream layout change?)"
            ) from None
        if stat.S_ISLNK(mode):
            raise PatchFailed(
                f"[{patch_id}] the diff writes {rel} through a symbolic link"
                f" ({current.relative_to(base)} -> {os.readlink(current)}): refused"
            )
    if not (base / rel).resolve().is_relative_to(base.resolve()):  # defence in depth: no link, no ..
        raise PatchFailed(f"[{patch_id}] the diff writes {rel}, which resolves outside {base}: refused")


def _write_inside(base: Path, rel: str, data: bytes) -> None:
    """Write ``base/rel``, creating missing folders, through folder descriptors opened with O_NOFOLLOW:
    a link swapped in after _check_no_link fails the write (ELOOP) instead of being followed."""
    *folders, name = rel.split("/")
    nofollow = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)  # the spec names base: it may be a link
    try:
        for part in folders:
            with contextlib.suppress(FileExistsError):
                os.mkdir(part, 0o777, dir_fd=fd)
            below = os.open(part, nofollow, dir_fd=fd)
            os.close(fd)
            fd = below
        out = os.open(
            name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666, dir_fd=fd
        )
    finally:
        os.close(fd)
    with os.fdopen(out, "wb") as fh:
        fh.write(data)


def _file_text(patch_id: str, fdiff: _FileDiff, base: Path) -> str:
    _check_no_link(patch_id, base, fdiff.new_path)
    path = base / fdiff.new_path
    if not fdiff.old_path:
        if path.exists():
            raise PatchFailed(f"[{patch_id}] the diff creates {path}, which already exists (drop the patch?)")
        return ""
    if not path.is_file():
        raise PatchFailed(f"[{patch_id}] target file {path} does not exist (did the upstream layout change?)")
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PatchFailed(f"[{patch_id}] target file {path} is not UTF-8 text (byte {exc.start})") from None


def _hunk_outcomes(patch_id: str, fdiff: _FileDiff, base: Path) -> tuple[list[Outcome], bytes]:
    """Each hunk's outcome, in order, and the file's new bytes with every hunk that matched; nothing is
    written here."""
    path = base / fdiff.new_path
    current = _file_text(patch_id, fdiff, base).splitlines(keepends=True)
    result: list[str] = []
    outcomes = []
    cursor = 0
    total = len(fdiff.hunks)
    for number, hunk in enumerate(fdiff.hunks, start=1):
        what = f"{fdiff.new_path}: hunk {number} of {total} ({hunk.header})"
        near = max(hunk.old_start - 1, 0) if hunk.old else hunk.old_start
        pos = _find(current, hunk.old, near, cursor)
        if pos < 0:
            applied = bool(hunk.new) and _find(current, hunk.new, near, 0) >= 0
            hint = (
                "its result is already there: the fix is upstream, drop the patch"
                if applied
                else "upstream text moved: re-check the patch against the pinned version"
            )
            first = next((ln.strip() for ln in hunk.old if ln.strip()), "")
            outcomes.append(
                Outcome(
                    what,
                    False,
                    f"[{patch_id}] hunk {number} of {total} ({hunk.header}) does not apply to {path}:"
                    f" its {len(hunk.old)} old line(s) starting {first[:60]!r} are not there ({hint})",
                )
            )
            continue
        offset = pos - near if hunk.old else 0
        outcomes.append(
            Outcome(what, True, f"at line {pos + 1}" + (f" (offset {offset:+d})" if offset else ""))
        )
        result.extend(current[cursor:pos])
        result.extend(hunk.new)
        cursor = pos + len(hunk.old)
    result.extend(current[cursor:])
    return outcomes, "".join(result).encode("utf-8")


def _apply_file(patch_id: str, fdiff: _FileDiff, base: Path) -> bytes:
    """The file's new bytes; nothing is written here."""
    outcomes, data = _hunk_outcomes(patch_id, fdiff, base)
    for outcome in outcomes:
        if not outcome.ok:
            raise PatchFailed(outcome.detail)
    return data


def read_diff(spec: dict, spec_dir: Path | None) -> tuple[str, bytes]:
    """Where the diff comes from and its bytes: the file beside the spec (a lab's own diff, copied into the
    build context), else its URL."""
    diff = spec["diff"]
    if "file" not in diff:
        return diff["url"], fetch_diff(spec["id"], diff["url"])
    path = (spec_dir or Path.cwd()) / diff["file"]
    with path.open("rb") as fh:
        raw = fh.read(MAX_DIFF_BYTES + 1)
    if len(raw) > MAX_DIFF_BYTES:
        raise PatchFailed(f"[{spec['id']}] {path} is larger than {MAX_DIFF_BYTES / (1 << 20):g} MiB: refused")
    return str(path), raw


def _diff_files(spec: dict, spec_dir: Path | None) -> list[_FileDiff]:
    diff = spec["diff"]
    where, raw = read_diff(spec, spec_dir)
    digest = hashlib.sha256(raw).hexdigest()
    if digest != diff["sha256"]:
        raise PatchFailed(
            f"[{spec['id']}] {where} has sha256 {digest}, the spec pins {diff['sha256']}"
            " (the diff changed: re-check it and update the spec)"
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PatchFailed(f"[{spec['id']}] the diff is not UTF-8 text (byte {exc.start})") from None
    files = parse_unified_diff(spec["id"], text, int(diff.get("strip", 1)))
    seen = [f.new_path for f in files]
    twice = sorted({name for name in seen if seen.count(name) > 1})
    if twice:
        raise PatchFailed(f"[{spec['id']}] the diff changes {', '.join(twice)} in more than one section")
    nested = sorted({a for a in seen for b in seen if b.startswith(a + "/")})
    if nested:  # caught here, not by the second write after the first
        raise PatchFailed(
            f"[{spec['id']}] the diff writes {', '.join(nested)} both as a file and as a folder"
        )
    return files


def check_unified_diff(spec: dict, base: Path, spec_dir: Path | None = None) -> list[Outcome]:
    root = base / str(spec["target"]["path"])
    outcomes = []
    for fdiff in _diff_files(spec, spec_dir):
        try:
            outcomes += _hunk_outcomes(spec["id"], fdiff, root)[0]
        except PatchFailed as exc:  # the file itself (missing, a link, not text): one outcome for it
            outcomes.append(Outcome(fdiff.new_path, False, str(exc)))
    return outcomes


def apply_unified_diff(spec: dict, base: Path, spec_dir: Path | None = None) -> Path:
    root = base / str(spec["target"]["path"])
    files = _diff_files(spec, spec_dir)
    # Every hunk and every path (no link) of every file is checked before anything is written (git apply's
    # all-or-nothing).
    results = [(fdiff.new_path, _apply_file(spec["id"], fdiff, root)) for fdiff in files]
    for rel, data in results:
        _write_inside(root, rel, data)
    return root


ACTIONS = {
    "edit": apply_edits,
    "symlink": apply_symlink,
    "pip-install-dir": apply_pip_install_dir,
    "unified-diff": apply_unified_diff,
}
# What ``patch test`` reports edit by edit and hunk by hunk; the other actions act on the base image's files.
CHECKS = {"edit": check_edits, "unified-diff": check_unified_diff}


def apply(spec: dict, source_root: Path | None = None, spec_dir: Path | None = None) -> Path:
    """Apply one spec; ``spec_dir`` is the folder its JSON was read from (a local diff lies beside it)."""
    done = ACTIONS[spec["action"]](spec, target_dir(spec, source_root), spec_dir)
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
            done = apply(spec, args.source_root, spec_path.parent)
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
