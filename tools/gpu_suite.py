"""The whole GPU test suite in one go on one GPU machine (`make gpu-test`): the builds compiled first, in parallel
(tools/precompile_gpu_suite.py, skipped with PRECOMPILE=0 or where no nvcc is), then every GPU test of the current
catalogue in SHARDS pytest processes at once on the GPU (default: a quarter of the cores, at least 2).

Builds compiled ahead on a machine without a GPU come as one file: there,
`CONVNET_CACHE=build/vcache PACK=build/suite_cache.tar.xz python tools/precompile_gpu_suite.py 2 sm_90a`; carried
to the GPU machine, $SUITE_CACHE (default build/suite_cache.tar.xz) is unpacked into the cache first, and the
precompile step then finds every build (H200, 1,621 builds: 17 MB, unpacked in 1 s; builds 26 s, tests 428 s).

    python tools/gpu_suite.py [pytest args, e.g. tests/test_gpu_lenet.py or -k decode]

Tests are dealt to shards by test function (the cases of a function in one shard, so they share its module
fixtures; a function with more cases than a shard's share is cut into shares), largest first onto the least
loaded shard. Each shard's log and JUnit XML go to $OUT (default
/tmp/gpu_suite); shards still running LIMIT seconds after the start (default 560, builds included) are interrupted,
so pytest still prints what failed and its slowest tests. Exit status 0 only when every shard passed."""
import os
import shlex
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MARK = "gpu and not archive"


def collect(args) -> list:
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "--collect-only", "-p", "no:cacheprovider",
                          "-m", MARK, *args], cwd=ROOT, capture_output=True, text=True)
    ids = [line for line in out.stdout.splitlines() if "::" in line]
    if not ids:
        sys.exit(f"no GPU test collected (pytest said: {out.stdout.strip().splitlines()[-1:] or out.stderr[-300:]})")
    return ids


def deal(ids: list, shards: int) -> list:
    groups = defaultdict(list)
    for i in ids:
        groups[i.split("[")[0]].append(i)
    share = -(-len(ids) // shards)                # a function with more cases than a shard's share is cut up
    groups = {(k, n): v[n:n + share] for k, v in groups.items() for n in range(0, len(v), share)}
    load, out = [0] * shards, [[] for _ in range(shards)]
    for g in sorted(groups.values(), key=len, reverse=True):
        k = load.index(min(load))
        out[k] += g
        load[k] += len(g)
    return [s for s in out if s]


def main() -> int:
    args = sys.argv[1:]
    out_dir = Path(os.environ.get("OUT", "/tmp/gpu_suite"))
    out_dir.mkdir(parents=True, exist_ok=True)
    shards = int(os.environ.get("SHARDS", max(2, (os.cpu_count() or 8) // 4)))
    t0 = time.perf_counter()
    deadline = t0 + float(os.environ.get("LIMIT", 560))
    packed = Path(os.environ.get("SUITE_CACHE", ROOT / "build" / "suite_cache.tar.xz"))
    if packed.is_file():                          # builds compiled elsewhere (PACK=... precompile_gpu_suite.py)
        from convnet.bench.dryrun import unpack
        print(f"unpacked {unpack(packed)} cache files from {packed}", flush=True)
    if os.environ.get("PRECOMPILE", "1") != "0":
        from convnet.gpu.build import nvcc_path
        if nvcc_path():
            subprocess.run([sys.executable, str(ROOT / "tools" / "precompile_gpu_suite.py"), str(os.cpu_count() or 8)],
                           cwd=ROOT, check=False)
    t_build = time.perf_counter() - t0
    ids = collect(args)
    per_file = Counter(i.split("::")[0] for i in ids)
    print(f"{len(ids)} GPU tests in {len(per_file)} files, {shards} shards:", flush=True)
    procs = []
    for n, part in enumerate(deal(ids, shards)):
        (out_dir / f"shard{n}.ids").write_text("\n".join(part) + "\n")
        log = open(out_dir / f"shard{n}.log", "w")
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", MARK, "-rfE", "--durations=15",
               f"--junitxml={out_dir / f'shard{n}.xml'}", *part]
        env = {"OMP_NUM_THREADS": str(max(1, (os.cpu_count() or 8) // shards)), **os.environ}   # torch's CPU work
        procs.append((n, len(part), log, subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                                                          env=env)))
    for n, count, log, p in procs:
        try:
            p.wait(max(1.0, deadline - time.perf_counter()))
        except subprocess.TimeoutExpired:
            p.send_signal(signal.SIGINT)              # pytest reports what it has, then exits
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        log.close()
    rc = 0
    for n, count, log, p in procs:
        lines = (out_dir / f"shard{n}.log").read_text(errors="replace").splitlines()
        summary = next((ln for ln in reversed(lines) if " in " in ln and ("passed" in ln or "failed" in ln)), "")
        failed = [ln for ln in lines if ln.startswith(("FAILED", "ERROR"))]
        print(f"  shard {n}: {count} tests, exit {p.returncode}: {summary.strip('= ')}")
        for ln in failed:
            print("    " + ln)
        rc = rc or p.returncode
    print(f"builds {t_build:.0f} s, tests {time.perf_counter() - t0 - t_build:.0f} s; logs in {out_dir} "
          f"(rerun one shard: pytest -m {shlex.quote(MARK)} $(cat {out_dir}/shardN.ids))")
    return 1 if rc else 0


if __name__ == "__main__":
    sys.exit(main())
