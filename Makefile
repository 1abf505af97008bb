# Two commands on a fresh machine: `make site` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# The CPU build of torch lies on this machine's disk; an unpinned torch would fetch a multi-GB CUDA build.
TORCH  := torch==2.13.0
# pip compiles what it installs one file at a time; compileall does it on every core afterwards (the same .pyc files)
PIP     := $(BIN)/pip install -q --no-compile
COMPILE := $(BIN)/python -m compileall -q -j 0 $(VENV)/lib >/dev/null || true

.PHONY: install install-test site readme-picture test bench sweep sweep-shapes gallery docs clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(PIP) $(TORCH)
	$(PIP) -e '.[hf]'
	$(COMPILE)
	touch $@

# the test extras (which hold hf's) and the package in one pip call after torch: one resolve and one editable build
# fewer than `install` then `.[test]`, ~20 s of a fresh clone's `make test`
$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	$(PIP) $(TORCH)
	$(PIP) -e '.[hf,test]'
	$(COMPILE)
	touch $(VENV)/.installed $@

install: $(VENV)/.installed
install-test: $(VENV)/.installed-test

# The annotations cite transformers' modeling file; its links are pinned to the installed release's tag (v5.23.0)
# without --source-url, which is for a model's own code.
site: install
	$(BIN)/archviz build examples/deepseek-v4-flash/config.json \
		--checkpoint examples/deepseek-v4-flash/manifest.json.gz \
		--annotations examples/deepseek-v4-flash/annotations.toml --cost -o site

# the README's picture: the default site's output projection page in headless Chromium (needs the test extras'
# playwright and /usr/bin/chromium)
readme-picture: site install-test
	$(BIN)/python scripts/explorer_picture.py site docs/explorer.png

# in parallel, one worker a core (pytest-xdist); a test file's tests stay on one worker, so its module fixtures are
# built once, and files that share a session fixture (the small gallery) go to one worker (tests/conftest.py's groups)
test: install-test
	$(BIN)/python -m pytest -n auto --dist loadfile -m "not serial"
	# the serial tests after, alone; only the files that mark one are collected (the whole suite's collection is ~5 s)
	$(BIN)/python -m pytest -m serial $$(grep -rl --include='*.py' 'mark.serial' tests)

bench: install-test
	$(BIN)/python bench/run.py

# the API reference (pdoc, from the docstrings) of the public modules, into docs/api/ (docs/python.md is the guide)
docs: install
	$(PIP) 'pdoc>=14'
	$(BIN)/pdoc -o docs/api --no-search archviz archviz.records archviz.kernels archviz.render.results '!archviz\.(cli|sources|walk|shapes|group|cost|checkpoint|diff|probe|pipeline|files|render\.(?!results))'

# archviz check over every transformers model type, against the layout save_pretrained writes (~30 min; not in test)
sweep: install-test
	$(BIN)/python bench/sweep_checkpoints.py

# the meta pass over every causal LM of transformers (~15 min; not in test)
sweep-shapes: install-test
	$(BIN)/python bench/sweep_checkpoints.py --shapes --causal

# every causal LM of transformers from its default config: index, explorers, compare and coverage pages (not in test)
gallery: install
	$(BIN)/archviz gallery --transformers causal -o gallery

clean:
	rm -rf $(VENV) build *.egg-info
