"""Signing a pushed digest (rocmstack.publish.sign): the signer's checks, the exact commands, and where the
passphrase goes. The real signing and verification against a registry: tests/integration/test_validate_podman.py."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from rocmstack.container.engine import Engine
from rocmstack.errors import CheckFailed, EngineError, InputError
from rocmstack.publish import sign

# The first line `cosign generate-key-pair` writes (cosign 2.x); the body is never read by rocmstack.
KEY = "-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----\neyJrZGYiOnt9fQ==\n-----END ENCRYPTED SIGSTORE PRIVATE KEY-----\n"
PODMAN = Engine(name="podman", argv=("podman",), version="4.3.1")


def _key(tmp_path: Path, text: str = KEY) -> Path:
    key = tmp_path / "cosign.key"
    key.write_text(text)
    return key


def _which(*present: str):
    return lambda name: f"/usr/bin/{name}" if name in present else None


def test_no_sign_means_no_signer_and_a_lone_passphrase_is_refused(tmp_path):
    assert sign.signer(None, None) is None
    with pytest.raises(InputError, match="--sign-passphrase-file without --sign KEY"):
        sign.signer(None, tmp_path / "pass")


def test_the_key_is_checked_before_anything_is_pushed(tmp_path):
    with pytest.raises(InputError, match=r"--sign '.*missing.key': cannot read the key"):
        sign.signer(tmp_path / "missing.key", None, environ={"COSIGN_PASSWORD": ""})
    public = _key(tmp_path, "-----BEGIN PUBLIC KEY-----\nMFkw\n-----END PUBLIC KEY-----\n")
    with pytest.raises(InputError, match="not a sigstore private key") as err:
        sign.signer(public, None, environ={"COSIGN_PASSWORD": ""})
    assert "cosign generate-key-pair" in (err.value.fix or "")
    with pytest.raises(InputError, match="no passphrase for the key") as err:
        sign.signer(_key(tmp_path), None, environ={}, which=_which("cosign"))
    assert "COSIGN_PASSWORD" in (err.value.fix or "")


def test_the_passphrase_comes_from_its_file_or_cosigns_variable(tmp_path):
    passfile = tmp_path / "pass"
    passfile.write_text("s3cret\n")
    got = sign.signer(_key(tmp_path), passfile, environ={}, which=_which("cosign", "skopeo"))
    assert got is not None and got.passphrase == "s3cret" and got.tool == "cosign"
    got = sign.signer(_key(tmp_path), None, environ={"COSIGN_PASSWORD": "x"}, which=_which("skopeo"))
    assert got is not None and got.passphrase == "x" and got.tool == "skopeo"
    with pytest.raises(EngineError, match="needs cosign or skopeo"):
        sign.signer(_key(tmp_path), passfile, environ={}, which=_which())


def test_the_passphrase_is_never_an_argument(tmp_path):
    signer = sign.Signer(key=_key(tmp_path), tool="cosign", passphrase="s3cret")
    seen: dict = {}

    def runner(argv, **kw):
        seen.update(argv=argv, env=kw["env"])
        return subprocess.CompletedProcess(argv, 0, "", "")

    out = sign.sign(signer, PODMAN, "r.io/acme/verl:r-abc", "sha256:" + "d" * 64, runner=runner)
    assert out == {"ref": "r.io/acme/verl@sha256:" + "d" * 64, "tool": "cosign", "key": str(signer.key)}
    assert seen["argv"] == [
        "cosign",
        "sign",
        "--yes",
        "--key",
        str(signer.key),
        "--tlog-upload=false",
        "r.io/acme/verl@sha256:" + "d" * 64,
    ]
    assert seen["env"]["COSIGN_PASSWORD"] == "s3cret" and "s3cret" not in " ".join(seen["argv"])


def test_skopeo_signs_the_digest_onto_itself_with_sigstore_attachments_on(tmp_path):
    signer = sign.Signer(key=_key(tmp_path), tool="skopeo", passphrase="s3cret")
    seen: dict = {}

    def runner(argv, **kw):
        folder = Path(argv[argv.index("--registries.d") + 1])
        passfile = Path(argv[argv.index("--sign-passphrase-file") + 1])
        seen.update(
            argv=argv,
            config=(folder / "rocmstack-sign.yaml").read_text(),
            passphrase=passfile.read_text(),
            mode=passfile.stat().st_mode & 0o777,
        )
        return subprocess.CompletedProcess(argv, 0, "", "")

    insecure = Engine(name="podman", argv=("podman",), version="4.3.1", tls_verify=False)
    sign.sign(signer, insecure, "127.0.0.1:5000/acme/verl:r-abc", "sha256:" + "d" * 64, runner=runner)
    ref = "docker://127.0.0.1:5000/acme/verl@sha256:" + "d" * 64
    assert seen["argv"][-2:] == [ref, ref]
    assert {"--preserve-digests", "--src-tls-verify=false", "--dest-tls-verify=false"} <= set(seen["argv"])
    assert seen["config"] == "docker:\n  127.0.0.1:5000/acme/verl:\n    use-sigstore-attachments: true\n"
    assert seen["passphrase"] == "s3cret" and seen["mode"] == 0o600 and "s3cret" not in seen["argv"]


def test_a_failed_signature_says_the_tags_are_pushed_and_how_to_go_on(tmp_path):
    signer = sign.Signer(key=_key(tmp_path), tool="skopeo", passphrase="")
    # Debian's skopeo 1.9.3, verbatim (its sigstore support is patched out).
    debian = 'time="2026-12-06T10:26:27Z" level=fatal msg="creating signature: '
    debian += 'Debian-local change: sigstore disabled"\n'

    def runner(argv, **kw):
        return subprocess.CompletedProcess(argv, 1, "Signing manifest using a sigstore signature\n", debian)

    with pytest.raises(
        EngineError, match=r"signing r\.io/x@sha256:d+ with skopeo failed: .*sigstore disabled"
    ) as err:
        sign.sign(signer, PODMAN, "r.io/x:t", "sha256:" + "d" * 64, runner=runner)
    assert "install cosign" in (err.value.fix or "") and "pushed but unsigned" in (err.value.fix or "")


def test_only_the_image_that_was_pushed_is_signed(monkeypatch):
    from rocmstack.container import engine as engines

    mine, other = "sha256:" + "1" * 64, "sha256:" + "2" * 64
    monkeypatch.setattr(engines, "remote_manifest", lambda *a, **k: {"digest": "sha256:m", "config": mine})
    assert sign.pushed_digest(PODMAN, "r.io/x:t", "1" * 64) == "sha256:m"
    monkeypatch.setattr(engines, "remote_manifest", lambda *a, **k: {"digest": "sha256:m", "config": other})
    with pytest.raises(CheckFailed, match=r"not signing r.io/x:t: the registry holds 222222222222"):
        sign.pushed_digest(PODMAN, "r.io/x:t", "1" * 64)
    index = {"digest": "sha256:i", "index": True, "images": [mine, other]}
    monkeypatch.setattr(engines, "remote_manifest", lambda *a, **k: index)
    with pytest.raises(CheckFailed):
        sign.pushed_digest(PODMAN, "r.io/x:t", mine)


def test_a_bad_key_stops_publish_before_the_gate_with_one_line(tmp_path):
    from tests.conftest import run_cli

    r = run_cli("publish", "localhost/x:y", "--reports", str(tmp_path), "--sign", str(tmp_path / "none.key"))
    assert r.code == 2 and r.err.count("\n") == 1 and "cannot read the key" in r.err, r.err
    r = run_cli(
        "publish", "localhost/x:y", "--reports", str(tmp_path), "--sign-passphrase-file", str(tmp_path)
    )
    assert r.code == 2 and "--sign-passphrase-file without --sign KEY" in r.err, r.err
