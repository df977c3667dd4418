# bf16 helper, session 11: B11_KERNELS points the kernel build at a snapshot of kernels/ (the sources the carried
# cubin cache was compiled from), so that edits of kernels/ by others during the call do not make the cache stale.
import os
if os.environ.get("B11_KERNELS"):
    from pathlib import Path
    import convnet.paths as _paths
    _paths.KERNELS_DIR = Path(os.environ["B11_KERNELS"]).resolve()
