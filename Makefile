# phalanx: `make demo` runs the main job, `make test` checks everything.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install test test-fast lint typecheck demo bench bench-serving bench-serving-scale gpu-check docs clean

install: $(STAMP)

# Re-installs only when the project's dependency list changes.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,ray,docs]'
	touch $(STAMP)

# The demo's training job and the DDP tests (on the local executor and across Ray
# nodes) need PyTorch: the CPU build, installed once.
TORCH := $(VENV)/.torch

$(TORCH): $(STAMP)
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/python -m pip install --quiet torch==2.13.0
	touch $(TORCH)

lint: install
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench

typecheck: install
	$(BIN)/mypy

# pytest-xdist workers: more than the cores, since most integration tests wait on
# processes and timers; tests/conftest.py's GROUPS keeps apart what must not overlap.
WORKERS ?= 4

# Everything: the unit, property and scenario tests use the CPU alone, so two workers
# (one per core here) halve their time; the integration tests mostly wait on servers,
# tasks and timers, so four workers overlap them (tests/conftest.py's GROUPS runs what
# shares fixed addresses or uid ranges one at a time): 1,480 s -> 970 s here.
test: lint typecheck $(TORCH)
	$(BIN)/pytest -n 2 tests/unit tests/property tests/scenarios
	$(BIN)/pytest -n $(WORKERS) tests/integration

# The inner loop: unit, scenario and property tests, less those marked slow and with a
# fifth of each property's examples. make test (and CI) runs everything.
test-fast: install
	PHALANX_PROPERTY_SHARE=0.2 $(BIN)/pytest -n $(WORKERS) -m "not slow" tests/unit tests/scenarios tests/property

demo: install $(TORCH)
	$(BIN)/phalanx demo --port 0

bench: install
	$(BIN)/python bench/engine.py

# On a machine with NVIDIA GPUs: a real server reads the cards through NVML while the DDP
# example trains on them over NCCL; its readings must be attributed and exported
# (bench/gpu_check.py prints what it saw; exit 2 where there is no GPU to check).
gpu-check: install $(TORCH)
	$(BIN)/python bench/gpu_check.py

# The gateway against Ray Serve's proxy (bench/serving.py); Ray Serve gets an environment
# of its own, so that its dependencies never move the project's.
RAYSERVE := .venv-rayserve/bin/python

$(RAYSERVE):
	$(PYTHON) -m venv .venv-rayserve
	$(RAYSERVE) -m pip install --quiet "ray[serve]==2.60.0"

bench-serving: install $(RAYSERVE)
	$(BIN)/python bench/serving.py

# Scale from zero and a 10x burst, phalanx (a real `phalanx up`) against Ray Serve.
bench-serving-scale: install $(RAYSERVE)
	$(BIN)/python bench/serving_scale.py

# Sia's own simulator (siasosp23/artifacts, sia-simulator/) on its eight Philly workloads,
# its sia and pollux policies: the reference for the heterogeneous runs (issue 43). It gets
# an environment of its own with the dependencies its README names, pinned (numpy 1.23,
# pymoo 0.4.2.1 for Pollux, cvxpy with CBC through cylp for Sia's MIP); the project carries
# none of its code: SIA_ARTIFACTS names a clone of siasosp23/artifacts, which
# bench/sia_reference.py exports into a temporary folder. SIA_ARGS: e.g. --workloads 1-4.
SIA := .venv-sia/bin/python
SIA_ARGS ?=

$(SIA):
	$(PYTHON) -m venv .venv-sia
	$(SIA) -m pip install --quiet "numpy==1.23.5" "scipy==1.10.1" "pandas==1.5.3" \
		"matplotlib==3.7.5" "cvxpy==1.3.2" "cylp==0.91.6" "osqp==0.6.3" "ecos==2.0.12" \
		"scs==3.2.4" "autograd==1.6.2" "cma==2.7.0" "pymoo==0.4.2.1" "rich==13.7.1" \
		"psutil==5.9.8"

.PHONY: bench-sia-reference
bench-sia-reference: install $(SIA)
	$(BIN)/python bench/sia_reference.py $(SIA_ARGS)

# The model check against Sia's simulator (issue 43): the same jobs at fixed size (rigid),
# one after another on one GPU type, in Sia's simulator and phalanx's; prints both average
# JCTs per workload and type (bench/sia_check.py). SIA_ARGS: e.g. --workloads 1-3.
.PHONY: bench-sia-check
bench-sia-check: install $(SIA)
	$(BIN)/python bench/sia_check.py $(SIA_ARGS)

# The documentation site (mkdocs.yml), built strictly into site/: a broken link fails it.
docs: install
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache site
