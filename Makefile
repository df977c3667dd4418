# Two commands set up a fresh machine: `make run` (the main job) and `make test` (the test suite).
# Knobs: PYTHON (>= 3.11), VENV, VARIANT (default auto), BATCH (default 10000),
#        GPU=1 / GPU=0 (default: 1 where nvidia-smi is on PATH): with 1 the venv also gets PyCUDA.
PYTHON  ?= python3
VENV    ?= .venv
PY       = $(VENV)/bin/python
VARIANT ?= auto
BATCH   ?= 10000
GPU     ?= $(shell command -v nvidia-smi >/dev/null 2>&1 && echo 1 || echo 0)
# the interpreter the venv was made from: a different one (version or path) rebuilds it
PYTHON_ID := $(shell $(PYTHON) -c 'import sys; print(sys.version.split()[0], sys.executable)' 2>/dev/null)

.PHONY: run test test-archive gpu-test kernels venv python-check clean clean-cache

venv: python-check $(VENV)/.installed-gpu$(GPU)

python-check:
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null || \
	  { echo "error: $(PYTHON) is missing or older than Python 3.11 (make PYTHON=python3.11 ...)"; exit 1; }
	@if [ -f $(VENV)/.python-id ] && [ "$$(cat $(VENV)/.python-id)" != "$(PYTHON_ID)" ]; then \
	  echo "note: $(VENV) was made with $$(cat $(VENV)/.python-id), not $(PYTHON_ID): rebuilding it"; rm -rf $(VENV); fi

$(VENV)/.installed-gpu$(GPU): setup.cfg setup.py pyproject.toml
	[ -x $(PY) ] || $(PYTHON) -m venv $(VENV)
	echo "$(PYTHON_ID)" > $(VENV)/.python-id
	rm -f $(VENV)/.installed-*
	@if [ "$(GPU)" != 1 ]; then $(PY) -m pip install -q -e '.[test]'; \
	elif ! $(PY) -m pip install -q -e '.[gpu,test]' > $(VENV)/pycuda-install.log 2>&1; then \
	  $(PY) -m pip install -q -e '.[test]'; \
	  echo "NOTE: a GPU is present but PyCUDA could not be installed (log: $(VENV)/pycuda-install.log)."; \
	  echo "      PyCUDA builds against the CUDA toolkit: install it (nvcc and cuda.h, e.g. apt install"; \
	  echo "      nvidia-cuda-toolkit, or CUDA from NVIDIA) and run make again. Until then: the CPU path."; \
	fi
	touch $@

NVCC    := $(shell command -v nvcc 2>/dev/null || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
KERNEL_ARCHS ?= sm_90a,sm_80,compute_80
PREBUILT = build/kernels/manifest.json

run: venv $(if $(NVCC),$(PREBUILT))
	$(PY) run_milestone.py --variant $(VARIANT) --batch $(BATCH)

# the current catalogue's kernels for the common shapes (LeNet; GPT-2 124M to xl), compiled in parallel on every core
# for sm_90a and sm_80 (cubins) and compute_80 (PTX: GPUs past Hopper)
# into build/kernels (the wheel carries them): at run time loaded, not compiled. Again when a kernel or catalogue changes.
kernels: venv
	$(PY) -m convnet.gpu.ahead --arch $(KERNEL_ARCHS)

$(PREBUILT): kernels/*.cu kernels/*.cuh kernels/*/*.cuh milestones/*.toml | venv
	$(PY) -m convnet.gpu.ahead --arch $(KERNEL_ARCHS)

test: venv
	$(PY) -m pytest -q -m "not archive"

# the archived variants' kernels compile (make test covers the current catalogue; CI runs both)
test-archive: venv
	$(PY) -m pytest -q -m archive tests/test_kernels_compile.py

# the whole GPU suite (current catalogue) in one go: builds compiled in parallel first (or unpacked from
# build/suite_cache.tar.xz, packed where nvcc ran ahead: tools/gpu_suite.py says how), then tests in shards on the
# one GPU; fails (instead of reporting every test skipped) where no GPU test can run
gpu-test: venv
	CONVNET_REQUIRE_GPU=1 $(PY) tools/gpu_suite.py

clean:
	rm -rf $(VENV) build dist *.egg-info

# the cache: preprocessed data, compiled kernels (~300 MB after the GPU tests), per-device measurements
clean-cache: venv
	$(PY) run_milestone.py --clear-cache
