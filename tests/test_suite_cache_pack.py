"""The suite's builds carried as one file (convnet.bench.dryrun pack / unpack; PACK= for tools/precompile_*.py,
SUITE_CACHE for tools/gpu_suite.py), without nvcc: what is packed is exactly the cache's files of the builds asked
for, and unpacking writes only plain files under cubin/ into the other cache."""
import io
import tarfile


def test_pack_then_unpack_moves_the_builds_cubins_and_logs(tmp_path, monkeypatch):
    from convnet.bench import dryrun
    from convnet.gpu import build
    here, there = tmp_path / "cpu", tmp_path / "gpu"
    monkeypatch.setenv("CONVNET_CACHE", str(here))
    builds = {("ops.cu", ()), ("transformer.cu", (("LN_CONST", 0),))}
    missing = ("attention.cu", ())                         # asked for, never compiled: left out
    cubins = build.cubin_dir()
    cubins.mkdir(parents=True, exist_ok=True)              # (cubin_dir may make it)
    for f, d in builds:
        name = build.cache_name(f, dict(d), "sm_90a")
        (cubins / f"{name}.cubin").write_bytes(f"cubin of {f}".encode())
        (cubins / f"{name}.log").write_text(f"ptxas of {f}")
    (cubins / "stale-0123.cubin").write_bytes(b"not asked for")
    path = tmp_path / "suite.tar.xz"
    assert dryrun.pack(builds | {missing}, "sm_90a", path) == 2
    with tarfile.open(path) as tar:
        names = sorted(tar.getnames())
    assert len(names) == 4 and all(n.startswith("cubin/") for n in names) and "cubin/stale-0123.cubin" not in names
    monkeypatch.setenv("CONVNET_CACHE", str(there))
    assert dryrun.unpack(path) == 4
    for f, d in builds:
        name = build.cache_name(f, dict(d), "sm_90a")
        assert (there / "cubin" / f"{name}.cubin").read_bytes() == f"cubin of {f}".encode()
        assert (there / "cubin" / f"{name}.log").read_text() == f"ptxas of {f}"


def test_unpack_writes_nothing_outside_the_cubin_folder(tmp_path, monkeypatch):
    from convnet.bench import dryrun
    monkeypatch.setenv("CONVNET_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "evil.tar.xz"
    with tarfile.open(path, "w:xz") as tar:
        for name in ("../escape.cubin", "cubin/../../escape2.cubin", "other/x.cubin", "cubin/sub/y.cubin",
                     "cubin/ok.cubin"):
            data = b"x"
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    assert dryrun.unpack(path) == 1
    assert [p.name for p in (tmp_path / "cache" / "cubin").iterdir()] == ["ok.cubin"]
    assert not (tmp_path / "escape.cubin").exists() and not (tmp_path / "escape2.cubin").exists()

