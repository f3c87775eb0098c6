# The two commands: `make book` builds the website, `make test` runs every test.
# Both create .venv with the pinned requirements and `pip install -e .` first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
BUILD_FLAGS := -W -n --keep-going

# Stored outputs must not depend on the CPU: the same nbval run under other BLAS/SIMD
# paths and thread counts (see CONTRIBUTING.md, "给维护者").
NBVAL := $(BIN)/python -m pytest --nbval --nbval-current-env --nbval-sanitize-with tests/notebooks/nbval_sanitize.cfg book
KERNELS_AVX2 := MKL_ENABLE_INSTRUCTIONS=AVX2
KERNELS_SCALAR := ATEN_CPU_CAPABILITY=default OMP_NUM_THREADS=1
KERNELS_OTHER := $(KERNELS_AVX2) $(KERNELS_SCALAR)

.PHONY: book test quick unit nbval nbval-other-kernels nbval-matrix colab site execute clean lab site-speed pdf bundle

$(STAMP): requirements.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -r requirements.txt
	$(BIN)/python -m pip install -q --no-deps -e .
	touch $(STAMP)

# The build installs the pinned npm packages itself (npm ci: package-lock.json into node_modules/,
# served files into _vendor/): tools/book_ext.py calls tools/fetch_assets.py at every build. No CDN.
book: $(STAMP)
	$(BIN)/jupyter-book build . --builder html $(BUILD_FLAGS)
	@echo "网站已生成：open $(CURDIR)/_build/html/index.html"

# The whole book as one PDF, _build/release/mha-course-<version>.pdf: Sphinx's single-page HTML
# printed by Chromium with bookmarks and page numbers (tools/book_pdf.py, tools/book_pdf.css).
pdf: $(STAMP)
	$(BIN)/jupyter-book build . --builder singlehtml $(BUILD_FLAGS)
	$(BIN)/python tools/book_pdf.py

# The built site and all notebooks as zips in _build/release/ (tools/bundle.py). To read the
# site offline: unpack, then in its folder `python -m http.server` and open http://127.0.0.1:8000.
bundle: book
	$(BIN)/python tools/bundle.py

test: unit nbval nbval-other-kernels colab

unit: $(STAMP)
	$(BIN)/python -m pytest tests

# The core, the checkers and everything else that needs no website, browser, training or server
# (pytest markers site/browser/slow, see tests/conftest.py): under 2 minutes.
quick: $(STAMP)
	$(BIN)/python -m pytest tests -q -m "not site and not browser and not slow"

nbval: $(STAMP)
	$(NBVAL)

# One pass that changes every kernel choice at once (part of `make test`).
nbval-other-kernels: $(STAMP)
	env $(KERNELS_OTHER) $(NBVAL)

# The full numeric matrix: native, AVX2 BLAS, scalar ATen on one thread, and all of them together.
nbval-matrix: $(STAMP)
	$(NBVAL)
	env $(KERNELS_AVX2) $(NBVAL)
	env $(KERNELS_SCALAR) $(NBVAL)
	env $(KERNELS_OTHER) $(NBVAL)

# Every chapter in a Colab-like environment (noxfile.py: Colab's ipywidgets/IPython/matplotlib,
# mha installed with --no-deps); the environment is kept in .nox/ and reused.
colab: $(STAMP)
	$(BIN)/nox -s colab

# A reader without Colab: JupyterLab on book/ with the pinned environment (ipywidgets 8 and its
# JupyterLab extension come from requirements.txt). tests/course/test_lab.py starts it with
# LAB_FLAGS="--no-browser --port=... --ServerApp.token=..." and checks that it serves.
# (Jupyter refuses to run as root without --allow-root: containers and CI run as root.)
LAB_FLAGS ?=
LAB_AS_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root)
# Benchmark: every page of the built site (make book first) on the slow mobile link; prints a table
site-speed: $(STAMP)
	$(BIN)/python tools/site_speed.py

lab: $(STAMP)
	$(BIN)/jupyter lab --ServerApp.root_dir=book $(LAB_AS_ROOT) $(LAB_FLAGS)

# Re-execute notebooks in place (after editing a chapter), then commit with outputs:
# `make execute` (all) or `make execute NB=book/08_full_layer.ipynb`.
# nbconvert's ClearMetadataPreprocessor (it runs after execution) drops the stored widget
# state (metadata.widgets): useless without a kernel, and hundreds of KB. nbclient's own
# store_widget_state=False would be the direct way, but nbclient 0.11.0 raises KeyError
# (nbclient/output_widget.py) on any ipywidgets.Output, which chapters 5, 8, 9, 10 display.
NB ?= book/*.ipynb
# The kernel loads the IPython extension mha.course.pictures.png_text: every stored PNG carries its smallest
# text size for the browser figure test (a student's kernel loads nothing of the kind).
EXECUTE := $(BIN)/jupyter nbconvert --to notebook --execute --inplace \
	--ExecutePreprocessor.timeout=180 \
	'--ExecutePreprocessor.extra_arguments=["--IPKernelApp.extensions=mha.course.pictures.png_text"]' \
	--ClearMetadataPreprocessor.enabled=True --ClearMetadataPreprocessor.clear_cell_metadata=False \
	$(foreach key,kernelspec language_info colab,--ClearMetadataPreprocessor.preserve_nb_metadata_mask=$(key))
execute: $(STAMP)
	$(BIN)/python tools/setup_cell.py
	$(EXECUTE) $(NB)

clean:
	rm -rf _build
