"""The variant catalogue: milestones/*.toml -> Variant records that the CLI, the GPU runtime
and the tests read. Adding a variant means adding one table there (and, if new, its kernel).

Each file serves one model, named by its top-level `model` key (default "lenet86"; GPT-2's file says
"gpt2"); variant names are unique within a model, so both can have a `baseline`."""
from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, replace
from functools import lru_cache

from .errors import UsageError
from .paths import MILESTONES_DIR

REQUIRED = ("milestone", "backend", "title", "changes", "expected")


@dataclass(frozen=True)
class Variant:
    name: str
    milestone: str
    backend: str              # "cpu" or "gpu"
    title: str
    changes: str
    expected: str
    strategy: str = ""        # GPU: which convolution strategy in convnet/gpu/conv.py runs it
    defines: dict = field(default_factory=dict)   # GPU: -D compile-time constants of its kernels
    params: dict = field(default_factory=dict)    # GPU: host-side settings (GEMM version, mini-batch, ...)
    precision: str = "fp32"   # fp32, fp16, tf32
    tolerance: float = 1e-5   # relative error against the float64 reference the tests demand
    streams: int = 1          # GPU: streams the batch is pipelined over
    main: bool = False        # the variant `--variant auto` tries first where a GPU is present
    min_sm: int = 0           # GPU: lowest compute capability x 10 its kernels run on (80 = mma.sync, 90 = wgmma)
    fallback: str = ""        # GPU: the variant `auto` takes instead where this one's min_sm is not met
    source: str = ""          # the catalogue file it came from
    model: str = "lenet86"    # the network it runs: lenet86 or gpt2
    base: str = ""            # the variant this one states its changes against (its keys are inherited)
    archived: bool = False    # from milestones/archive/: listed with --list --all, compile-tested only

    @property
    def needs_gpu(self) -> bool:
        return self.backend == "gpu"


# keys a variant does not take from its base: only one variant is `main`, and a base's fallback is its own
NOT_INHERITED = ("main", "fallback", "base")


def _resolve(name: str, tables: dict, source: str, seen=()) -> dict:
    """A variant's table with its `base` chain applied: the base's keys, then the variant's own (defines and
    params merged key by key; everything else replaced)."""
    table = tables[name]
    base = table.get("base")
    if base is None:
        return dict(table)
    if base not in tables:
        raise ValueError(f"{source}: variant {name!r} names an unknown base {base!r}")
    if base in seen or base == name:
        raise ValueError(f"{source}: variant {name!r}: its base chain loops through {base!r}")
    merged = {k: v for k, v in _resolve(base, tables, source, (*seen, name)).items() if k not in NOT_INHERITED}
    for key, value in table.items():
        merged[key] = {**merged.get(key, {}), **value} if key in ("defines", "params") else value
    return merged


def _parse(name: str, table: dict, source: str, model: str, archived: bool = False) -> Variant:
    missing = [k for k in REQUIRED if k not in table]
    if missing:
        raise ValueError(f"{source}: variant {name!r} lacks {', '.join(missing)}")
    known = set(Variant.__dataclass_fields__) - {"name", "source", "model", "archived"}
    unknown = set(table) - known
    if unknown:
        raise ValueError(f"{source}: variant {name!r} has unknown keys {sorted(unknown)}")
    if table["backend"] not in ("cpu", "gpu"):
        raise ValueError(f"{source}: variant {name!r} has backend {table['backend']!r}")
    if table.get("min_sm", 0) and table.get("main") and not table.get("fallback"):
        raise ValueError(f"{source}: main variant {name!r} needs sm {table['min_sm']} but names no fallback")
    if model == "gpt2":
        from .gpt2.host_params import check
        check(name, table.get("params", {}), source)
    return Variant(name=name, source=source, model=model, archived=archived, **table)


MODELS = ("lenet86", "gpt2", "onnx")
ARCHIVE_DIR = "archive"       # milestones/archive/*.toml: snapshots and ablations kept to compare against


@lru_cache(maxsize=None)
def _load(model: str) -> dict[str, Variant]:
    """Every variant of `model`, current and archived (an archived one may name a current one as its base)."""
    if model not in MODELS:
        raise UsageError(f"unknown model {model!r}; known models: {', '.join(MODELS)}")
    tables, where = {}, {}
    files = [(p, False) for p in sorted(MILESTONES_DIR.glob("*.toml"))] + \
            [(p, True) for p in sorted((MILESTONES_DIR / ARCHIVE_DIR).glob("*.toml"))]
    for path, archived in files:
        with open(path, "rb") as f:
            doc = tomllib.load(f)
        if doc.get("model", "lenet86") != model:
            continue
        for name, table in doc.get("variant", {}).items():
            if name in tables:
                raise ValueError(f"{path.name}: variant {name!r} already defined in {where[name][0]}")
            tables[name], where[name] = table, (path.name, archived)
    return {name: _parse(name, _resolve(name, tables, where[name][0]), where[name][0], model, where[name][1])
            for name in tables}


def load_all(model: str = "lenet86", archive: bool = False) -> dict[str, Variant]:
    """The current catalogue of `model` (what a user chooses between); with archive=True the archived
    snapshots and ablations too."""
    return {n: v for n, v in _load(model).items() if archive or not v.archived}


def get(name: str, model: str = "lenet86") -> Variant:
    """A variant by name, current or archived."""
    variants = _load(model)
    if name not in variants:
        raise UsageError(f"unknown {model} variant {name!r}; known variants: {', '.join(load_all(model))} "
                         f"(archived ones: --list --all)")
    return variants[name]


def main_gpu_variant(model: str = "lenet86") -> Variant | None:
    return next((v for v in load_all(model).values() if v.main and v.needs_gpu), None)


def best_gpu_variant(model: str, sm: int) -> Variant | None:
    """The variant `auto` runs on a GPU of compute capability `sm` (x 10): the main one, or the first along
    its fallback chain whose min_sm the GPU meets; None where none does."""
    v, seen = main_gpu_variant(model), set()
    while v is not None and v.min_sm > sm:
        seen.add(v.name)
        if not v.fallback or v.fallback in seen:
            return None
        v = get(v.fallback, model)
    return v


def setting_value(text: str):
    """A setting's value as written on a command line: a whole number as int, anything else as it is."""
    return int(text) if text.lstrip("-").isdigit() else text


def with_setting(variant: Variant, setting: dict) -> Variant:
    """variant with settings on top: lower-case keys its params, upper-case ones its -D constants."""
    params = {**variant.params, **{k: v for k, v in setting.items() if k.islower()}}
    defines = {**variant.defines, **{k: v for k, v in setting.items() if not k.islower()}}
    return replace(variant, params=params, defines=defines)


def variant_spec(spec: str, model: str) -> Variant:
    """'name@KEY=V,key=v' -> the catalogue variant with those settings (upper-case keys -D constants, lower-case ones
    params; whole numbers as int), named after the spec, e.g. igemm_f16_wgmma@nhwc_depthwise=1: one optimization
    switched on or off without a catalogue entry. A plain name is the variant itself."""
    name, at, extra = spec.partition("@")
    if not at:
        return get(name, model)
    pairs = [kv.partition("=") for kv in extra.split(",") if kv]
    if not pairs or any(not k or not sep or not v for k, sep, v in pairs):
        raise UsageError(f"{spec!r}: expected NAME@KEY=VALUE,KEY=VALUE")
    setting = {k: setting_value(v) for k, _, v in pairs}
    v = with_setting(get(name, model), setting)
    if model == "gpt2":
        v = _checked_gpt2(spec, v)
    return replace(v, name=spec.replace("@", "_").replace("=", "").replace(",", "_"))


def _checked_gpt2(spec: str, v: Variant) -> Variant:
    """A GPT-2 spec's params as the catalogue checks its own (a name or a choice it does not know is one line, not a
    setting the model would ignore); 0 and 1 stand for false and true where a param is a flag."""
    from dataclasses import fields
    from .gpt2.host_params import GPT2Params, check
    flags = {f.name for f in fields(GPT2Params) if f.type.startswith("bool")}
    params = {k: bool(x) if k in flags and x in (0, 1) and not isinstance(x, bool) else x for k, x in v.params.items()}
    try:
        check(spec, params, "--variants")
    except ValueError as e:
        raise UsageError(str(e)) from None
    return replace(v, params=params)
