"""Shared checks for the tests."""
import re

import numpy as np


def rel_err(got, ref) -> float:
    """||got - ref|| / ||ref|| in float64; NaN anywhere (an unwritten poisoned output) fails."""
    got = np.asarray(got, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    assert got.shape == ref.shape, f"shape {got.shape} != {ref.shape}"
    assert np.isfinite(got).all(), "output holds NaN/inf: some elements were never written"
    return float(np.linalg.norm(got - ref) / max(np.linalg.norm(ref), 1e-30))


def poison(rt, prefixes=("gpt2.act.",)):
    """NaN into every fp32 and bf16 pool buffer under these name prefixes: an element a kernel forgets stays NaN."""
    from convnet.gpu.bf16 import BF16, BF16_NAN
    for prefix in prefixes:
        rt.pool.fill(prefix, np.nan, np.float32)
        rt.pool.fill(prefix, BF16_NAN, BF16)


def rel_max_err(got, want) -> float:
    """max |got - want| / max |want| (float64); NaN anywhere fails."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape and np.isfinite(got).all(), "unwritten (NaN) or misshaped output"
    return float(np.abs(got - want).max() / np.abs(want).max())


def tolerance(variant) -> float:
    """The bound a variant's output is held to against float64: 1e-5 for fp32, else the catalogue's."""
    return variant.tolerance if variant.precision != "fp32" else 1e-5


def variant_with(name: str, drop=(), model: str = "gpt2", **setting):
    """The current catalogue's variant with the constants or params in `drop` removed and `setting` on top (UPPER
    keys are -D constants, lower ones params): the one switch a test compares, on a variant users run, instead of an
    archived snapshot that differed only by it. Named after what changed, so its builds and ids say so."""
    import dataclasses
    from convnet import catalogue
    from convnet.catalogue import with_setting
    v = catalogue.get(name, model)
    v = dataclasses.replace(v, defines={k: x for k, x in v.defines.items() if k not in drop},
                            params={k: x for k, x in v.params.items() if k not in drop})
    label = "".join([f"-{k}" for k in drop] + [f"+{k}={x}" for k, x in setting.items()])
    return dataclasses.replace(with_setting(v, setting), name=name + label)


def spec_variant(spec: str, model: str = "gpt2"):
    """variant_with from a readable id: "fast_bf16", "fast-PDL-SMM_LNS" (constants dropped),
    "fast_bf16+decode_attention=split+decode_split_waves=1" (settings; ints, true / false, else strings)."""
    name, *ops = re.split(r"(?=[+-])", spec)
    drop, setting = [], {}
    for op in ops:
        key, _, value = op[1:].partition("=")
        if op[0] == "-":
            drop.append(key)
        else:
            setting[key] = int(value) if value.lstrip("-").isdigit() else \
                {"true": True, "false": False}.get(value, value)
    if not ops:
        from convnet import catalogue
        return catalogue.get(name, model)
    return variant_with(name, tuple(drop), model, **setting)


def fused_upscale_conv_check(rt, variant, n, src, dst, M, K, pool, rng, tag):
    """conv1 staging its tile straight from n random uint8 src-sized images (resized to dst inside the
    kernel) against skimage's resize + conv + ReLU + pool in float64, on a poisoned output; pixels 0 and
    255 included. Returns rel_err(got, want)."""
    from skimage.transform import resize
    from convnet import reference as ref
    from convnet.gpu.conv import make_conv
    imgs = rng.integers(0, 256, (n, *src), dtype=np.uint8)
    imgs[0, 0] = 0
    imgs[-1, -1] = 255
    w = (rng.standard_normal((M, 1, K, K)) / K).astype(np.float32)
    conv = make_conv(rt, variant, w, (1, *dst), name="conv1", pool=pool, upscale_from=src)
    xg = rt.pool.get(f"{tag}.u8", imgs.shape, np.uint8)
    yg = rt.pool.get(f"{tag}.y", conv.out_shape(n), conv.out_dtype)
    xg.set(imgs)
    yg.set(np.full(yg.shape, np.nan, conv.out_dtype))
    conv(xg, yg, n)
    rt.synchronize(f"{tag}: conv with fused upscale")
    up = np.stack([resize(i / 255.0, dst, order=1, mode="reflect", anti_aliasing=False) for i in imgs])[:, None]
    want = ref.maxpool2d(ref.relu(ref.conv2d(up, w.astype(np.float64), dtype=np.float64)), pool)
    return rel_err(yg.get(), want)


def direct_conv2d(x, w):
    """A plainly written valid convolution (loops over the kernel window), float64."""
    B, C, H, W = x.shape
    M, _, K, _ = w.shape
    Ho, Wo = H - K + 1, W - K + 1
    y = np.zeros((B, M, Ho, Wo))
    for m in range(M):
        for c in range(C):
            for p in range(K):
                for q in range(K):
                    y[:, m] += w[m, c, p, q] * x[:, c, p:p + Ho, q:q + Wo]
    return y


def direct_maxpool(x, k):
    B, C, H, W = x.shape
    y = np.full((B, C, H // k, W // k), -np.inf)
    for i in range(H // k):
        for j in range(W // k):
            for p in range(k):
                for q in range(k):
                    y[:, :, i, j] = np.maximum(y[:, :, i, j], x[:, :, i * k + p, j * k + q])
    return y


def declared_arity() -> dict:
    """kernel name -> number of parameters, from the extern "C" signatures in kernels/*.cu."""
    arity = {}
    from convnet.gpu.build import expanded_text, macro_kernels
    from convnet.paths import KERNELS_DIR
    for path in KERNELS_DIR.glob("*.cu"):
        text = expanded_text(path)                      # gemm.cu with its pieces under kernels/gemm/
        macros = {m.group(1): m.group(2).count(",") + 1
                  for m in re.finditer(r"#define (\w+_PARAMS) ((?:[^\n]*\\\n)*[^\n]*)", text)}
        for m in re.finditer(r'extern "C" __global__ void\s+(?:__launch_bounds__\([^)]*\)\s*)?(\w+)\s*\(([^)]*)\)', text):
            params = [p.strip() for p in m.group(2).split(",")]
            arity[m.group(1)] = sum(macros.get(p, 1) for p in params)
        # entries a macro makes per width (transformer.cu: LN_WIDTHS(LN_ENTRIES) defines layernorm_warp_c##N ...)
        lists = {m.group(1): re.findall(r"X\(\s*\w+\s*,\s*(\w+)\s*\)", m.group(2))
                 for m in re.finditer(r"#define (\w+)\(X\) ((?:[^\n]*\\\n)*[^\n]*)", text)}
        for m in re.finditer(r"#define (\w+)\(V, N\)((?:[^\n]*\\\n)*[^\n]*)", text):
            widths = [n for name, ns in lists.items() if re.search(rf"\b{name}\({m.group(1)}\)", text) for n in ns]
            for e in re.finditer(r'extern "C" __global__ void\s+(\w+)##N\s*\(([^)]*)\)', m.group(2)):
                params = [p.strip().rstrip("\\").strip() for p in e.group(2).split(",")]
                for n in widths:
                    arity[f"{e.group(1)}{n}"] = len(params)
        # entries a function-like macro declares per invocation, its name pasted from the arguments (gemm/v13)
        for _, kernel, params in macro_kernels(text):
            arity[kernel] = sum(macros.get(p, 1) for p in params)
    return arity


def gpt2_small_params(config, seed=0, layernorms=True, wte_scale=1.0):
    """A random GPT-2 with non-trivial biases (and LayerNorm gains unless layernorms=False), so every epilogue
    term matters; wte_scale > 1 makes larger logits (greedy paths away from near-ties)."""
    from convnet.gpt2 import model as ref
    p = ref.random_params(config, seed)
    rng = np.random.default_rng(seed + 1)
    for name, a in p.items():
        if name.endswith("bias"):
            p[name] = rng.normal(0, 0.05, a.shape).astype(np.float32)
        elif layernorms and name.endswith(("ln_1.weight", "ln_2.weight", "ln_f.weight")):
            p[name] = (1 + rng.normal(0, 0.2, a.shape)).astype(np.float32)
        elif name == "wte" and wte_scale != 1.0:
            p[name] = (a * wte_scale).astype(np.float32)
    return p


class Builds:
    """Kernel builds compiled by worker threads that take them one at a time from a shared list, into a cache
    folder fixed when the list is made (tests that point CONVNET_CACHE elsewhere meanwhile do not see them): the
    compile test starts one worker when the session starts, so nvcc uses the core the single-threaded CPU tests
    leave idle, and adds a worker per core when its own turn comes."""

    def __init__(self, builds, arch: str = "sm_90a"):
        import threading
        from convnet.gpu import build
        self.todo, self.arch, self.out_dir = list(sorted(builds)), arch, build.cubin_dir()
        self.lock, self.threads, self.reports = threading.Lock(), [], {}

    def _work(self):
        from convnet.errors import GPUError
        from convnet.gpu import build
        while True:
            with self.lock:
                if not self.todo:
                    return
                b = self.todo.pop(0)
            try:
                report = build.compile_cubin(b[0], dict(b[1]), self.arch, out_dir=self.out_dir)[1]
            except GPUError as e:
                report = e
            with self.lock:
                self.reports[b] = report

    def start(self, workers: int) -> "Builds":
        import threading
        for _ in range(workers):
            t = threading.Thread(target=self._work, daemon=True)
            t.start()
            self.threads.append(t)
        return self

    def finish(self, workers: int) -> dict:
        """Adds `workers` threads, waits for every build; {build: ptxas report, or the GPUError nvcc gave}."""
        self.start(workers)
        for t in self.threads:
            t.join()
        return dict(self.reports)


def kernel_names(launches) -> list:
    """The kernels of recorded launches by name, the warp LayerNorms without their row-width suffix
    (layernorm_warp_bf16_c768 -> layernorm_warp_bf16): what a test of the launch plan counts."""
    return [re.sub(r"^(layernorm_\w+?)_c\d+$", r"\1", k) for k, *_ in launches]
