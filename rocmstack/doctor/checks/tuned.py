"""Tuned kernel configs: which MoE/GEMM configs the image's engines ship for this GPU (and, for SGLang, this
Triton), and which MoE shapes of the models a recipe names would run on the engine's default config.

How each engine looks a config up is data (tuned_configs.yaml), the models' shapes too (gpu/moe_shapes.yaml)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from rocmstack.doctor.checks.image import read_lock
from rocmstack.doctor.model import Check, DoctorOptions, Result, passed, skipped, warned
from rocmstack.errors import InputError
from rocmstack.gpu.shapes import moe_shapes
from rocmstack.platform.snapshot import Snapshot
from rocmstack.recipe.load import load_recipe
from rocmstack.resources import yaml_data

HERE = Path(__file__).resolve().parents[1]


def engines_data() -> dict:
    loaded: dict = yaml_data(HERE / "tuned_configs.yaml")
    return loaded


@cache
def model_shapes() -> dict[str, dict[str, Any]]:

    return moe_shapes()


def check_model_names(names: tuple[str, ...], where: str) -> None:
    known = model_shapes()
    for name in names:
        if name not in known:
            raise InputError(f"{where}: unknown model {name!r}", fix=f"one of {', '.join(known)}")


def device_name(device_id: int) -> str | None:
    names = {
        int(str(k), 16) if isinstance(k, str) else int(k): v
        for k, v in engines_data()["device_names"].items()
    }
    return names.get(device_id)


def moe_file_name(engine: str, experts: int, n: int, variant: dict | None, device: str) -> str:
    """The file name the engine looks for (get_config_file_name of vLLM / SGLang)."""
    spec = engines_data()["engines"][engine]
    name = f"E={experts},N={n},device_name={device}"
    if variant:
        name += f",dtype={variant['dtype']}"
        if variant.get("block_shape"):
            bn, bk = variant["block_shape"]
            name += ",block_shape=" + spec["block_shape"].format(n=bn, k=bk)
    return name + ".json"


def triton_dir(version: str) -> str:
    # SGLang keys its folders by triton.__version__ with dots made underscores (triton_3_5_1)
    return "triton_" + version.replace(".", "_")


@dataclass(frozen=True)
class EngineConfigs:
    engine: str
    moe_roots: tuple[Path, ...]  # searched in this order
    versioned: bool  # SGLang: roots hold triton_<version>/ folders
    gemm_dir: Path


def engine_configs(engine: str, package: Path, env: dict[str, str]) -> EngineConfigs:
    spec = engines_data()["engines"][engine]
    own = package / spec["moe_dir"]
    roots: list[Path] = []
    override = env.get(spec["moe_env"])
    if override:
        roots.append(Path(override) if spec["moe_env_layout"] == "flat" else Path(override) / "configs")
    if not (override and spec["moe_env_layout"] == "parent"):  # SGLang's variable replaces its own folder
        roots.append(own)
    return EngineConfigs(engine, tuple(roots), bool(spec["triton_versioned"]), package / spec["gemm_dir"])


def lookup(cfg: EngineConfigs, name: str, triton: str | None) -> tuple[Path | None, bool]:
    """(the file the engine would read, whether it was tuned for this Triton); (None, False) = defaults."""
    for root in cfg.moe_roots:
        if not cfg.versioned:
            if (root / name).is_file():
                return root / name, True
            continue
        if triton and (root / triton_dir(triton) / name).is_file():
            return root / triton_dir(triton) / name, True
        others = sorted(
            (d for d in root.glob("triton_*") if d.is_dir()),
            key=lambda d: tuple(int(x) for x in d.name[7:].split("_") if x.isdigit()),
            reverse=True,
        )
        for folder in others:
            if (folder / name).is_file():
                return folder / name, False
    return None, False


def shipped_for(cfg: EngineConfigs, device: str, triton: str | None) -> list[str]:
    """Config file counts per folder for this device name (MoE, per Triton folder for SGLang; GEMM)."""
    tag = f"device_name={device}"
    out = []
    for root in cfg.moe_roots:
        folders = sorted(d for d in root.glob("triton_*") if d.is_dir()) if cfg.versioned else [root]
        for folder in folders:
            n = sum(1 for p in folder.glob("*.json") if tag in p.name)
            mark = " (this Triton)" if cfg.versioned and triton and folder.name == triton_dir(triton) else ""
            if n:
                out.append(f"MoE {folder.name if cfg.versioned else folder}: {n}{mark}")
        if cfg.versioned and triton and not (root / triton_dir(triton)).is_dir():
            out.append(f"MoE {root}: no {triton_dir(triton)} folder for the installed Triton {triton}")
    gemm = sum(1 for p in cfg.gemm_dir.glob("*.json") if tag in p.name)
    out.append(f"GEMM {cfg.gemm_dir}: {gemm}")
    return out


def recipe_models(opts: DoctorOptions) -> tuple[tuple[str, ...], str]:
    """The models to judge: --models, else the image recipe's ``models:`` where the recipe can be read."""
    if opts.models:
        return opts.models, "--models"

    lock, _ = read_lock(opts.resolved_image_root())
    name = lock.get("recipe") if isinstance(lock, dict) else None
    if not name:
        return (), "no --models and no image recipe"
    try:
        recipe, _ = load_recipe(str(name))
    except InputError:
        return (), f"recipe {name} is not on this image's recipe path"
    return tuple(recipe.models), f"recipe {name}"


def tuned_configs(snap: Snapshot, opts: DoctorOptions) -> Result:
    env = opts.environ()
    installed = [
        (e, Path(p)) for e, spec in engines_data()["engines"].items() if (p := snap.module(spec["package"]))
    ]
    if not installed:
        return skipped("neither vLLM nor SGLang is installed")
    devices = sorted({name for n in snap.kfd or [] if (name := device_name(n.device_id))})
    if not devices:
        ids = sorted({hex(n.device_id) for n in snap.kfd or []})
        return skipped(
            "no Instinct GPU whose config name is known" + (f" (device ids {', '.join(ids)})" if ids else "")
        )
    # SGLang keys by triton.__version__, which ROCm's pytorch-triton-rocm gives without its dist's local
    # label (3.4.0 for the distribution 3.4.0+gitf9e5bf54)
    dist_version = snap.dists.get("triton") or snap.dists.get("pytorch-triton-rocm")
    triton = dist_version.split("+")[0] if dist_version else None
    models, why = recipe_models(opts)
    tps = (opts.tensor_parallel,) if opts.tensor_parallel else tuple(engines_data()["tensor_parallel"])
    lines = [f"Triton {triton or 'not installed'}; models from {why}: {', '.join(models) or 'none'}"]
    defaults, other_triton = [], []
    for engine, package in installed:
        cfg = engine_configs(engine, package, env)
        for device in devices:
            lines += [f"{engine} {device}: {s}" for s in shipped_for(cfg, device, triton)]
            for model in models:
                shape = model_shapes()[model]
                for variant in shape["variants"]:
                    for tp in tps:
                        if shape["moe_intermediate_size"] % tp:
                            continue
                        n = shape["moe_intermediate_size"] // tp
                        name = moe_file_name(engine, shape["experts"], n, variant, device)
                        found, this_triton = lookup(cfg, name, triton)
                        what = (
                            f"{engine} {model} {variant['dtype'] if variant else 'bf16'} TP{tp} on {device}"
                        )
                        if found is None:
                            defaults.append(f"{what}: default config (no {name})")
                        elif not this_triton:
                            other_triton.append(f"{what}: tuned for {found.parent.name}, not Triton {triton}")
    if defaults or other_triton:
        items = defaults + other_triton
        return warned(
            f"{len(defaults)} MoE shape(s) run the engine's default config"
            + (f", {len(other_triton)} a config tuned for another Triton" if other_triton else "")
            + f": {items[0]}",
            *items,
            *lines,
            fix="Tune them on this GPU (vLLM benchmarks/kernels/benchmark_moe.py --tune, SGLang "
            "benchmark/kernels/fused_moe_triton) and ship the files via VLLM_TUNED_CONFIG_FOLDER / "
            "SGLANG_MOE_CONFIG_DIR",
        )
    if not models:
        return passed(f"tuned configs listed for {', '.join(devices)}; no model named to judge", *lines)
    return passed(
        f"every MoE shape of {', '.join(models)} has a tuned config on {', '.join(devices)}", *lines
    )


CHECKS = (
    Check(
        "tuned-configs",
        "engines",
        "MoE shapes of the recipe's models have tuned configs for this GPU",
        tuned_configs,
        "https://github.com/sgl-project/sglang/issues/34460",
    ),
)
