"""Checkpoint preflight (``rocmstack checkpoint DIR``, ``doctor --model DIR``): what a model folder holds,
read from its safetensors headers and config.json without loading a tensor, against what this arch
computes. The arch facts are data: checkpoint_formats.yaml."""

from __future__ import annotations

import json
import os
import stat
import struct
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rocmstack.doctor.model import Check, DoctorOptions, Result, failed, passed, skipped, warned
from rocmstack.platform.snapshot import Snapshot
from rocmstack.resources import yaml_data

DATA = Path(__file__).resolve().parents[1] / "checkpoint_formats.yaml"
INDEX = "model.safetensors.index.json"
MAX_HEADER = 100 << 20  # safetensors refuses headers above 100 MB too
MAX_JSON = 64 << 20  # config.json and the index are kilobytes; a bigger one is not a checkpoint's
KV_SCALE_SUFFIXES = (".k_scale", ".v_scale", "k_proj.output_scale", "v_proj.output_scale")


def data() -> dict:
    loaded: dict = yaml_data(DATA)
    return loaded


@dataclass(frozen=True)
class Shard:
    path: Path
    tensors: dict[str, dict[str, Any]]  # name -> {"dtype", "shape", "data_offsets"}
    error: str | None = None


class _Refused(Exception):
    """A file the preflight will not read (a FIFO, a device, a link out of the model folder)."""


def _link_roots(folder: Path) -> tuple[Path, ...]:
    """Where a link of the (resolved) model folder may lead: into the folder's own tree, and for a Hugging
    Face cache snapshot (``models--x/snapshots/<rev>/``) into that cache repo's ``blobs/``, where its
    files live."""
    if folder.parent.name == "snapshots" and folder.parent.parent.name.startswith("models--"):
        return folder, folder.parent.parent / "blobs"
    return (folder,)


def _open_regular(path: Path, folder: Path | None = None) -> int:
    """A read-only descriptor on ``path``, only when it is a regular file, looked at before it is opened:
    a FIFO or device is never opened (opening a FIFO waits for a writer). doctor runs as root, so a link
    would print bytes of any file (/etc/shadow): one is read through only when its target has the link's
    owner and lies in the model folder (``folder``, default ``path``'s) or its Hugging Face cache blobs."""
    link = path.lstat()
    st = path.stat()
    if not stat.S_ISREG(st.st_mode):
        raise _Refused("not a regular file")
    real = path
    if stat.S_ISLNK(link.st_mode):
        if st.st_uid != link.st_uid:
            raise _Refused(f"a link to a file of another owner (uid {st.st_uid}, the link's {link.st_uid})")
        real = path.resolve()
        if not any(real.is_relative_to(root) for root in _link_roots(folder or path.parent.resolve())):
            raise _Refused(f"a link to {real}, outside the model folder (and its cache blobs/)")
    # O_NONBLOCK: a FIFO swapped in since the look opens without waiting; fstat then refuses it.
    fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    try:
        opened = os.fstat(fd)
        if not stat.S_ISREG(opened.st_mode) or (opened.st_dev, opened.st_ino) != (st.st_dev, st.st_ino):
            raise _Refused("changed while it was checked")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _read_bounded(fh: Any, n: int) -> bytes:
    """At most ``n`` bytes, however short each read returns."""
    chunks: list[bytes] = []
    while n > 0 and (chunk := fh.read(min(n, 1 << 20))):
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def _json_error(exc: Exception) -> str:
    """Where the JSON broke, never the bytes themselves (a decode error would quote them)."""
    if isinstance(exc, json.JSONDecodeError):
        return f"{exc.msg} at byte {exc.pos}"
    if isinstance(exc, UnicodeDecodeError):
        return f"not UTF-8 at byte {exc.start}"
    if isinstance(exc, RecursionError):
        return "nested too deep"
    return type(exc).__name__


def _tensor_problem(name: str, entry: Any) -> str | None:
    """Why a header entry is not a tensor as safetensors writes one (dtype, shape, two offsets), or None."""
    if not isinstance(entry, dict):
        return f"tensor {name!r} is a JSON {type(entry).__name__}, not an object"
    if not isinstance(entry.get("dtype"), str):
        return f"tensor {name!r}: dtype is not a string"
    shape = entry.get("shape")
    if not isinstance(shape, list) or not all(type(d) is int and d >= 0 for d in shape):
        return f"tensor {name!r}: shape is not a list of non-negative integers"
    offsets = entry.get("data_offsets")
    if (
        not isinstance(offsets, list)
        or len(offsets) != 2
        or not all(type(o) is int for o in offsets)
        or not 0 <= offsets[0] <= offsets[1] < 1 << 64
    ):
        return f"tensor {name!r}: data_offsets is not two integers 0 <= begin <= end < 2**64"
    return None


def read_header(path: Path, folder: Path | None = None) -> Shard:
    """A safetensors file's header (8-byte little-endian length, then JSON), checked against the file size:
    a shard cut short by an interrupted download names itself here. A header whose entries are not
    tensors (nested objects, offsets that are not integers) is a finding, never a crash. ``folder``: the
    resolved model folder a link must stay in (default: the shard's own)."""
    try:
        fd = _open_regular(path, folder)
        with os.fdopen(fd, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            raw = _read_bounded(fh, 8)
            if len(raw) < 8:
                return Shard(path, {}, f"{size} bytes: no safetensors header")
            (length,) = struct.unpack("<Q", raw)
            if length > min(MAX_HEADER, size - 8):
                return Shard(path, {}, f"header length {length} does not fit the file ({size} bytes)")
            header = json.loads(_read_bounded(fh, length))
    except _Refused as exc:
        return Shard(path, {}, f"not read: {exc}")
    except OSError as exc:
        return Shard(path, {}, f"unreadable: {exc.strerror}")
    except (ValueError, RecursionError) as exc:
        return Shard(path, {}, f"header is not JSON: {_json_error(exc)}")
    if not isinstance(header, dict):
        return Shard(path, {}, "header is not a JSON object")
    entries = {k: v for k, v in header.items() if k != "__metadata__"}
    problems = [p for k, v in entries.items() if (p := _tensor_problem(k, v)) is not None]
    tensors = {k: v for k, v in entries.items() if _tensor_problem(k, v) is None}
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        return Shard(path, tensors, f"header entry not a tensor: {problems[0]}{more}")
    end = max((t["data_offsets"][1] for t in tensors.values()), default=0)
    if 8 + length + end > size:
        return Shard(path, tensors, f"truncated: tensors end at byte {8 + length + end}, file has {size}")
    return Shard(path, tensors)


@dataclass(frozen=True)
class Checkpoint:
    folder: Path
    config: dict[str, Any] | None
    config_error: str | None
    quant: dict[
        str, Any
    ]  # quantization_config (config.json) merged with hf_quant_config.json's "quantization"
    shards: tuple[Shard, ...]
    index: dict[str, str] | None  # weight_map of model.safetensors.index.json
    index_error: str | None


def _load_json(path: Path) -> tuple[Any, str | None]:
    """A small JSON file of the folder; a FIFO, a device or an oversized file is an error, not a wait."""
    try:
        with os.fdopen(_open_regular(path, path.parent), "rb") as fh:
            raw = _read_bounded(fh, MAX_JSON + 1)
        if len(raw) > MAX_JSON:
            return None, f"{path.name}: larger than {MAX_JSON >> 20} MiB"
        return json.loads(raw.decode("utf-8")), None
    except FileNotFoundError:
        return None, None
    except _Refused as exc:
        return None, f"{path.name}: not read: {exc}"
    except OSError as exc:
        return None, f"{path.name}: {exc.strerror}"
    except (ValueError, RecursionError) as exc:
        return None, f"{path.name}: not JSON: {_json_error(exc)}"


def _read(folder: Path) -> Checkpoint:
    config, config_error = _load_json(folder / "config.json")
    if config is None and config_error is None:
        config_error = "no config.json"
    quant: dict[str, Any] = {}
    if isinstance(config, dict) and isinstance(config.get("quantization_config"), dict):
        quant.update(config["quantization_config"])
    modelopt, _ = _load_json(folder / "hf_quant_config.json")
    if isinstance(modelopt, dict) and isinstance(modelopt.get("quantization"), dict):
        quant.update(modelopt["quantization"])
    index_doc, index_error = _load_json(folder / INDEX)
    index = None
    if isinstance(index_doc, dict) and isinstance(index_doc.get("weight_map"), dict):
        index = {str(k): str(v) for k, v in index_doc["weight_map"].items()}
    elif index_doc is not None:
        index_error = f"{INDEX}: no weight_map"
    shards = tuple(read_header(p, folder) for p in sorted(folder.glob("*.safetensors")))
    return Checkpoint(
        folder, config if isinstance(config, dict) else None, config_error, quant, shards, index, index_error
    )


def checkpoint_of(opts: DoctorOptions) -> Checkpoint | None:
    return _read(opts.model_dir.resolve()) if opts.model_dir is not None else None


def target_archs(snap: Snapshot, opts: DoctorOptions) -> list[str]:
    """The archs to judge against: --gpu-arch, else this node's GPUs (KFD), only those the data knows."""
    archs = list(opts.gpu_archs) or sorted({n.arch for n in snap.kfd or []})
    return [a for a in archs if a in data()["fp8"]]


def _no_target(snap: Snapshot, opts: DoctorOptions) -> Result | None:
    if opts.model_dir is None:
        return skipped("no model folder given (--model DIR)")
    if not target_archs(snap, opts):
        known = ", ".join(data()["fp8"])
        return skipped(f"no Instinct arch to judge against (this node has none of {known}; give --gpu-arch)")
    return None


def fp8_format(snap: Snapshot, opts: DoctorOptions) -> Result:
    if (skip := _no_target(snap, opts)) is not None:
        return skip
    ckpt = checkpoint_of(opts)
    assert ckpt is not None
    counts = Counter(t.get("dtype") for s in ckpt.shards for t in s.tensors.values())
    fp8 = {d: n for d, n in counts.items() if d in data()["fp8_dtypes"]}
    if not fp8:
        return passed(
            f"no FP8 tensors ({', '.join(f'{d}: {n}' for d, n in sorted(counts.items())) or 'none'})"
        )
    problems: list[str] = []
    convertible: list[str] = []
    for arch in target_archs(snap, opts):
        native = data()["fp8"][arch]
        for dtype, n in sorted(fp8.items()):
            if dtype not in native:
                info, want = data()["fp8_dtypes"][dtype], data()["fp8_dtypes"][native[0]]
                line = (
                    f"{n} tensor(s) in {info['torch']} (max {info['max']}); {arch} computes in "
                    f"{want['torch']} (max {want['max']})"
                )
                (convertible if dtype in data()["fp8_convertible"][arch] else problems).append(line)
    held = ", ".join(f"{data()['fp8_dtypes'][d]['torch']}: {n}" for d, n in sorted(fp8.items()))
    if problems:
        return failed(
            problems[0],
            *problems,
            *convertible,
            f"FP8 tensors: {held}",
            fix="Use a checkpoint quantised for this arch's FP8 format (e4m3fn for gfx950)",
        )
    if convertible:
        return warned(
            f"{convertible[0]}: the engine must convert them at load",
            *convertible,
            f"FP8 tensors: {held}",
            fix="Keep to an engine path that converts them (vLLM's FP8 methods normalise e4m3fn to e4m3fnuz) "
            "and check accuracy (GSM8K) once, or use a checkpoint quantised in e4m3fnuz",
        )
    return passed(f"FP8 tensors in this arch's format ({held})")


def _fp4_method(quant: dict[str, Any]) -> str | None:
    names = data()["method_names"]
    method = str(quant.get("quant_method") or "").lower()
    algo = str(quant.get("quant_algo") or "").upper()
    raw_groups = quant.get("config_groups")
    groups: dict[str, Any] = raw_groups if isinstance(raw_groups, dict) else {}
    formats = {str(quant.get("format") or "")} | {
        str(g.get("format") or "") for g in groups.values() if isinstance(g, dict)
    }
    for key, spec in names.items():
        if method in spec.get("quant_method", []) or algo in spec.get("quant_algo", []):
            return str(key)
        if formats & set(spec.get("formats", [])):
            return str(key)
    return None


def quant_method(snap: Snapshot, opts: DoctorOptions) -> Result:
    if (skip := _no_target(snap, opts)) is not None:
        return skip
    ckpt = checkpoint_of(opts)
    assert ckpt is not None
    if not ckpt.quant:
        return passed("not quantised (no quantization_config)")
    label = str(ckpt.quant.get("quant_method") or ckpt.quant.get("quant_algo") or "?")
    fp4 = _fp4_method(ckpt.quant)
    if fp4 is None:
        return passed(f"quantisation {label}: no 4-bit float format this check judges")
    spec = data()["fp4_methods"][fp4]
    missing = [a for a in target_archs(snap, opts) if a not in spec["archs"]]
    if missing:
        who = f"only {', '.join(spec['archs'])} can" if spec["archs"] else "no Instinct GPU can"
        verdict = failed if spec["elsewhere"] == "fail" else warned
        return verdict(
            f"{spec['name']} checkpoint (quantisation {label}): {', '.join(missing)} cannot compute it "
            f"({who})"
            + (
                ""
                if spec["elsewhere"] == "fail"
                else "; an engine can at best unpack it to wider types there"
            ),
            fix="Use a checkpoint in a format this arch computes (FP8 for gfx942, FP8 or MXFP4 for gfx950) "
            "or the unquantised weights",
        )
    return passed(f"{spec['name']} checkpoint: computed natively on {', '.join(target_archs(snap, opts))}")


def _checkpoint_kv(ckpt: Checkpoint) -> str | None:
    """The FP8 kind the checkpoint calibrated its KV cache for, or None when it carries no KV scales."""
    scheme = ckpt.quant.get("kv_cache_scheme")
    if isinstance(scheme, dict):
        return "e5m2" if "e5m2" in json.dumps(scheme).lower() else "e4m3"
    algo = str(ckpt.quant.get("kv_cache_quant_algo") or "").upper()
    if algo.startswith("FP8"):
        return "e4m3"
    if any(name.endswith(KV_SCALE_SUFFIXES) for s in ckpt.shards for name in s.tensors):
        return "e4m3"  # calibrated scales; e4m3 is what vLLM and SGLang read them as
    return None


def kv_cache_dtype(snap: Snapshot, opts: DoctorOptions) -> Result:
    if (skip := _no_target(snap, opts)) is not None:
        return skip
    ckpt = checkpoint_of(opts)
    assert ckpt is not None
    stored = _checkpoint_kv(ckpt)
    setting = opts.kv_cache_dtype
    kinds = data()["kv_cache"]
    if setting is None:
        return passed(
            "checkpoint "
            + (f"carries FP8 ({stored}) KV-cache scales" if stored else "has no KV-cache scales")
            + "; no --kv-cache-dtype given to compare"
        )
    if setting not in kinds:
        return failed(
            f"--kv-cache-dtype {setting!r} is not a KV-cache dtype the engines take",
            fix=f"one of {', '.join(kinds)}",
        )
    wanted = kinds[setting]
    if wanted and stored and wanted != stored:
        return failed(
            f"KV cache set to {setting} ({wanted}) but the checkpoint's KV scales are calibrated for {stored}",
            fix=f"Set --kv-cache-dtype fp8_{stored} (or fp8), or use a checkpoint calibrated for {wanted}",
        )
    if wanted and not stored:
        return warned(
            f"KV cache set to {setting} but the checkpoint has no KV scales: the engine uses 1.0",
            fix="Use a checkpoint with calibrated k_scale/v_scale, or keep --kv-cache-dtype auto",
        )
    if stored and not wanted:
        return warned(
            f"the checkpoint carries FP8 ({stored}) KV-cache scales that --kv-cache-dtype {setting} leaves unused",
            fix="Set --kv-cache-dtype fp8 to use them (and halve the KV cache's memory)",
        )
    return passed(f"KV cache {setting} matches the checkpoint ({stored or 'no KV scales'})")


def shards(snap: Snapshot, opts: DoctorOptions) -> Result:
    if opts.model_dir is None:
        return skipped("no model folder given (--model DIR)")
    ckpt = checkpoint_of(opts)
    assert ckpt is not None
    problems: list[str] = []
    extra: list[str] = []
    if ckpt.config_error:
        problems.append(ckpt.config_error)
    if ckpt.index_error:
        problems.append(ckpt.index_error)
    problems += [f"{s.path.name}: {s.error}" for s in ckpt.shards if s.error]
    if not ckpt.shards:
        problems.append("no *.safetensors file")
    by_name = {s.path.name: s for s in ckpt.shards}
    if ckpt.index is not None:
        wanted = sorted(set(ckpt.index.values()))
        for name in wanted:
            if name not in by_name:
                n = sum(v == name for v in ckpt.index.values())
                problems.append(f"{name}: listed in {INDEX} for {n} tensor(s), not in the folder")
        absent = [t for t, f in ckpt.index.items() if f in by_name and t not in by_name[f].tensors]
        if absent:
            problems.append(
                f"{len(absent)} tensor(s) the index places in a shard that lacks them: {absent[0]}"
            )
        unlisted = sorted(t for s in ckpt.shards for t in s.tensors if t not in ckpt.index)
        if unlisted:
            extra.append(f"{len(unlisted)} tensor(s) in a shard but not in {INDEX}: {unlisted[0]}")
        extra += [f"{n}: not in {INDEX}" for n in sorted(set(by_name) - set(wanted))]
    elif len(ckpt.shards) > 1:
        problems.append(f"{len(ckpt.shards)} shards and no {INDEX}")
    fix = "Download the checkpoint again (a shard or the index is missing or cut short)"
    if problems:
        return failed(
            f"{len(problems)} problem(s) with the checkpoint's files: {problems[0]}",
            *problems,
            *extra,
            fix=fix,
        )
    if extra:
        return warned(f"files the index does not name: {extra[0]}", *extra, fix=fix)
    tensors = sum(len(s.tensors) for s in ckpt.shards)
    return passed(f"{len(ckpt.shards)} shard(s), {tensors} tensor(s), every index entry present")


SOURCE_FP8 = "https://github.com/sgl-project/sglang/issues/28889"
CHECKS = (
    Check(
        "checkpoint-shards",
        "checkpoint",
        "Every shard and index entry of the model folder present",
        shards,
        "https://huggingface.co/docs/safetensors/en/index",
    ),
    Check(
        "checkpoint-fp8",
        "checkpoint",
        "FP8 tensors in the format this arch computes in",
        fp8_format,
        SOURCE_FP8,
    ),
    Check(
        "checkpoint-quant",
        "checkpoint",
        "Quantisation method this arch computes (NVFP4, MXFP4)",
        quant_method,
        "https://docs.vllm.ai/en/latest/features/quantization/supported_hardware.html",
    ),
    Check(
        "checkpoint-kv-cache",
        "checkpoint",
        "KV-cache dtype matches the checkpoint's KV scales",
        kv_cache_dtype,
        "https://github.com/vllm-project/vllm/issues/42893",
    ),
)
