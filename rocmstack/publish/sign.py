"""Signing pushed images with a lab's sigstore key: cosign where installed, else skopeo's own signing.

A signature covers one manifest digest, never a tag: the digest is read back from the registry and signed
only when its image is the one that was pushed (its config digest, the image id). The signature goes to the
registry beside the image (the ``sha256-<digest>.sig`` tag), where ``cosign verify`` and a containers
policy with ``sigstoreSigned`` (podman, CRI-O) read it: docs/publish.md. The passphrase reaches the tool
through its own channel (cosign's ``COSIGN_PASSWORD``, skopeo's passphrase file), never an argument.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rocmstack.container import engine as engines
from rocmstack.container.engine import Engine, Which
from rocmstack.errors import CheckFailed, EngineError, InputError, printable, quoted
from rocmstack.publish.push import held_images, holds_only

SIGN_TIMEOUT = 600
# The PEM blocks of a sigstore private key: cosign's generate-key-pair (old and new) and skopeo's.
KEY_BLOCKS = ("ENCRYPTED SIGSTORE PRIVATE KEY", "ENCRYPTED COSIGN PRIVATE KEY")
PASSWORD_ENV = "COSIGN_PASSWORD"
Runner = Callable[..., subprocess.CompletedProcess]


@dataclass(frozen=True)
class Signer:
    key: Path
    tool: str  # "cosign" | "skopeo"
    passphrase: str = ""

    def describe(self) -> str:
        return f"{self.tool}, key {self.key}"


def signer(
    key: Path | None,
    passphrase_file: Path | None,
    *,
    which: Which = shutil.which,
    environ: dict[str, str] | None = None,
) -> Signer | None:
    """The signer ``--sign KEY`` asks for, checked before anything is pushed; None without ``--sign``."""
    env = os.environ if environ is None else environ
    if key is None:
        if passphrase_file is not None:
            raise InputError("--sign-passphrase-file without --sign KEY", fix="add --sign KEY, or drop it")
        return None
    try:
        head = key.read_text(errors="replace")[:200]
    except OSError as exc:
        raise InputError(
            f"--sign {quoted(str(key))}: cannot read the key ({exc.strerror or exc})",
            fix="pass the private key file `cosign generate-key-pair` wrote (cosign.key)",
        ) from None
    if not any(f"-----BEGIN {block}-----" in head for block in KEY_BLOCKS):
        raise InputError(
            f"--sign {quoted(str(key))}: not a sigstore private key (no ENCRYPTED SIGSTORE/COSIGN PRIVATE KEY block)",
            fix="make one with `cosign generate-key-pair` (or `skopeo generate-sigstore-key`), and pass its "
            "private half",
        )
    if passphrase_file is not None:
        try:
            passphrase = passphrase_file.read_text().removesuffix("\n")
        except OSError as exc:
            raise InputError(
                f"--sign-passphrase-file {quoted(str(passphrase_file))}: cannot read it ({exc.strerror or exc})"
            ) from None
    elif PASSWORD_ENV in env:
        passphrase = env[PASSWORD_ENV]
    else:
        raise InputError(
            f"--sign {quoted(str(key))}: no passphrase for the key",
            fix=f"pass --sign-passphrase-file FILE, or set {PASSWORD_ENV} (empty for a key made without one)",
        )
    tool = "cosign" if which("cosign") else "skopeo" if which("skopeo") else None
    if tool is None:
        raise EngineError(
            "--sign needs cosign or skopeo, and neither is installed",
            fix="install cosign (or skopeo built with sigstore signing), then publish again",
        )
    return Signer(key=key, tool=tool, passphrase=passphrase)


def cosign_command(signer: Signer, target: str, *, tls_verify: bool) -> list[str]:
    """``cosign sign`` of one digest with the lab's key. No transparency-log upload: a private key's
    signatures stay in the lab's registry, and the image names stay out of a public log."""
    insecure = [] if tls_verify else ["--allow-insecure-registry", "--allow-http-registry"]
    return ["cosign", "sign", "--yes", "--key", str(signer.key), "--tlog-upload=false", *insecure, target]


def skopeo_command(
    signer: Signer, target: str, *, tls_verify: bool, registries_d: Path, passfile: Path
) -> list[str]:
    """The digest copied onto itself with a sigstore signature: nothing is re-sent but the signature, and
    ``--preserve-digests`` refuses any conversion that would sign another manifest."""
    tls = [] if tls_verify else ["--src-tls-verify=false", "--dest-tls-verify=false"]
    ref = f"docker://{engines.qualify(target)}"
    return [
        "skopeo",
        "--registries.d",
        str(registries_d),
        "copy",
        "--all",
        "--preserve-digests",
        *tls,
        "--sign-by-sigstore-private-key",
        str(signer.key),
        "--sign-passphrase-file",
        str(passfile),
        ref,
        ref,
    ]


def pushed_digest(engine: Engine, ref: str, image_id: str, *, which: Which = shutil.which) -> str:
    """The manifest digest REF holds, when that manifest is the image IMAGE_ID (one read: what is compared
    is what gets signed); CheckFailed when the tag holds anything else by now."""
    remote = engines.remote_manifest(engine, ref, which=which) or {}
    mine = "sha256:" + image_id.removeprefix("sha256:")
    held = held_images(remote)
    if not remote.get("digest") or not holds_only(remote, mine):
        raise CheckFailed(
            f"not signing {ref}: the registry holds {', '.join(printable(c[7:19]) for c in held) or 'nothing'} "
            f"there, not the image pushed ({mine[7:19]})",
            fix="publish again: nothing unsigned is left that a signature policy would accept",
        )
    return str(remote["digest"])


def sign(
    signer: Signer, engine: Engine, ref: str, digest: str, *, runner: Runner = subprocess.run
) -> dict[str, str]:
    """Sign ``ref``'s repository at ``digest``. EngineError names the digest, the tool's last line and the
    way on: the tags are pushed already, and a publish run again leaves them alone and signs."""
    target = engines.by_digest(ref, digest)
    with tempfile.TemporaryDirectory(prefix="rocmstack-sign-") as tmp:
        if signer.tool == "cosign":
            argv = cosign_command(signer, target, tls_verify=engine.tls_verify)
            env = {**os.environ, PASSWORD_ENV: signer.passphrase}
        else:
            folder, passfile = Path(tmp) / "registries.d", Path(tmp) / "passphrase"
            folder.mkdir()
            # skopeo writes sigstore signatures to the registry only where registries.d says so.
            repo = engines.qualify(target).split("@", 1)[0]
            (folder / "rocmstack-sign.yaml").write_text(
                f"docker:\n  {repo}:\n    use-sigstore-attachments: true\n"
            )
            passfile.touch(mode=0o600)
            passfile.write_text(signer.passphrase)
            argv = skopeo_command(
                signer, target, tls_verify=engine.tls_verify, registries_d=folder, passfile=passfile
            )
            env = dict(os.environ)
        try:
            out = runner(
                argv, capture_output=True, text=True, timeout=SIGN_TIMEOUT, env=env, stdin=subprocess.DEVNULL
            )
        except subprocess.TimeoutExpired:
            raise EngineError(
                f"signing {target} with {signer.tool} took over {SIGN_TIMEOUT} s", fix=_AGAIN
            ) from None
    if out.returncode != 0:
        text = (out.stdout or "") + (out.stderr or "")  # the tool's error is its last line on stderr
        last = next((line.strip() for line in reversed(text.splitlines()) if line.strip()), "no output")
        fix = _AGAIN
        if "sigstore disabled" in text:
            fix = (
                "this skopeo was built without sigstore signing (Debian's is): install cosign, then " + _AGAIN
            )
        raise EngineError(f"signing {target} with {signer.tool} failed: {printable(last[-300:])}", fix=fix)
    return {"ref": target, "tool": signer.tool, "key": str(signer.key)}


_AGAIN = "the tags are pushed but unsigned; run publish again with --sign (pushed tags are left alone)"
