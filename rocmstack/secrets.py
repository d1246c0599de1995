"""One rule for what counts as a secret's name, shared by the recipe model (never bake it into an image)
and the doctor/validate reports (never print its value)."""

from __future__ import annotations

import re

SECRET_WORDS = ("token", "secret", "key", "password", "passwd", "credential", "credentials")
SECRET_NAMES = ("HF_TOKEN", "WANDB_API_KEY", "HUGGING_FACE_HUB_TOKEN")
# Personal access tokens (GITHUB_PAT, GL_PAT) and credentials named AUTH (NPM_CONFIG__AUTH, DOCKER_AUTH_CONFIG,
# HTTP_AUTHORIZATION) contain none of the words above.
_PAT = re.compile(r"(^|_)(PAT|AUTH|AUTHORIZATION)($|_)", re.IGNORECASE)


def is_secret_name(name: str) -> bool:
    # Judged per part of the name (HF_TOKEN, DB_PASSWORD, GHTOKEN), so TOKENIZERS_PARALLELISM or HIP_KEYSPACE,
    # which only contain a word, are not secrets.
    parts = [p for p in re.split(r"[^a-z0-9]+", name.lower()) if p]
    return (
        name.upper() in SECRET_NAMES
        or any(p.endswith(w) for p in parts for w in SECRET_WORDS)
        or bool(_PAT.search(name))
    )
