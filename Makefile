# The two commands: `make book` builds the website, `make test` runs every test.
# Both create .venv with the pinned requirements and `pip install -e .` first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
BUILD_FLAGS := -W -n --keep-going

.PHONY: book test unit nbval site execute clean

$(STAMP): requirements.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -r requirements.txt
	$(BIN)/python -m pip install -q --no-deps -e .
	touch $(STAMP)

# tools/fetch_assets.py puts the pinned MathJax (npm registry) into _vendor/ (git-ignored;
# a no-op when already there): the site serves it itself, no CDN.
book: $(STAMP)
	$(BIN)/python tools/fetch_assets.py
	$(BIN)/jupyter-book build . --builder html $(BUILD_FLAGS)
	@echo "网站已生成：open $(CURDIR)/_build/html/index.html"

test: unit nbval

unit: $(STAMP)
	$(BIN)/python -m pytest tests

nbval: $(STAMP)
	$(BIN)/python -m pytest --nbval --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg book

# Re-execute every notebook in place (after editing a chapter), then commit with outputs.
execute: $(STAMP)
	$(BIN)/python tools/setup_cell.py
	$(BIN)/jupyter nbconvert --to notebook --execute --inplace --ExecutePreprocessor.timeout=120 book/*.ipynb
	$(BIN)/python tools/strip_widget_state.py book/*.ipynb

clean:
	rm -rf _build
