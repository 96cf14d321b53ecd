# Entry points of the study. `make study book` reruns everything; `make test` checks it.
VENV ?= .venv
PYTHON := $(VENV)/bin/python
PROFILE ?= auto
EDITION ?= auto
STUDY_ARGS ?=

.PHONY: setup gpu-check study book test lint clean-book

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	test -x $(PYTHON) || python3 -m venv $(VENV)
	$(PYTHON) -m pip install --upgrade pip
	$(PYTHON) -m pip install -e ".[dev,lightning]"
	touch $@

gpu-check: setup  ## every GPU path once, at a tiny size (minutes); exits 1 if one fails, 0 without GPUs
	$(PYTHON) -m helpers.gpu_check

study: setup  ## run the chapters of profile $(PROFILE) into book/chapters/$(PROFILE)/ (auto: gpu if CUDA, else cpu)
	$(PYTHON) -m helpers.study --profile $(PROFILE) $(STUDY_ARGS)

book: setup  ## HTML book from the executed chapters of edition $(EDITION) (auto: GPU where executed), no re-execution
	$(PYTHON) -m helpers.provenance --edition $(EDITION)
	$(VENV)/bin/jupyter-book build . --toc book/_toc.yml -W -n --keep-going
	@echo "Open _build/html/index.html"

test: setup  ## lint, unit tests, and nbval over the notebooks' committed smoke outputs
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(PYTHON) -m pytest tests notebooks --nbval-lax --nbval-sanitize-with tests/nbval_sanitize.cfg --durations=15

lint: setup  ## fix what ruff can fix
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

clean-book:
	rm -rf _build
