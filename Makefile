# movebench: `make run` runs the default campaign, `make test` the whole test suite.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
PROFILE ?= local
# Empty: the profile's campaign, config/config.yaml. CONFIG=my.yaml makes my.yaml the whole campaign.
CONFIG ?=
CONFIG_ARG := $(if $(CONFIG),--configfile $(CONFIG))
# Passed on to snakemake by `make run` and `make dry-run`: ARGS="-n", ARGS="--unlock", ARGS="results/tables/io.csv"
ARGS ?=
PYTEST_ARGS ?=
PLAN_ARGS ?=
NODES ?= 2
# make sbatch: the allocation's time limit, and more sbatch options (SBATCH_ARGS="-p batch -A myproject")
TIME ?= 1:00:00
SBATCH_ARGS ?=
LINK ?=
# make slurm-up: CPUs each namespace node declares to Slurm (they share this machine's cores)
CPUS ?= 2

.PHONY: help install system-deps campaign-deps run dry-run plan sbatch test test-fast bench studies osu-ref stacks lint format slurm-up slurm-down clean

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[workflow,mpi,mpich,sparse,dragon,azure,test,lint]"
	# bytecode now: where PYTHONDONTWRITEBYTECODE is set (containers, CI) every rank would compile movebench again
	$(PY) -m compileall -q src
	touch $@

install: $(VENV)/.installed  ## create .venv and install movebench with its dependencies

run: install campaign-deps  ## run the default campaign on this machine (snakemake --profile local); the report lands in results/report.html
	$(PY) -m movebench $(CONFIG_ARG) run --profile $(PROFILE) $(ARGS)

dry-run: install  ## count, per rule, the jobs a run would start (a launch of a point or of a launch group), running none
	$(PY) -m movebench $(CONFIG_ARG) run --profile $(PROFILE) --dry-run --quiet rules $(ARGS)

plan: install  ## Slurm jobs, nodes and node-hours the campaign asks for (PLAN_ARGS="--group-components shuffle=8")
	$(PY) -m movebench $(CONFIG_ARG) plan $(PLAN_ARGS)

sbatch: install  ## the campaign in one Slurm allocation: NODES=4 TIME=1:00:00 (profiles/allocation, scripts/sbatch-campaign.sh)
	sbatch -N $(NODES) -t $(TIME) $(SBATCH_ARGS) scripts/sbatch-campaign.sh $(CONFIG_ARG) $(ARGS)

campaign-deps: install  ## what the default campaign uses, installed when missing: Debian's fio, Azurite (npm)
	scripts/system-deps.sh --campaign
	@# here, before the campaign's clock starts, rather than on the first run's way in (10 s of npm in its wall time)
	$(PY) -m movebench.services.azurite install >/dev/null

system-deps:  ## Debian packages for tests and benchmarks (chromium, fio), installed when missing
	scripts/system-deps.sh

test: install system-deps  ## the whole test suite: unit, MPI, pipeline, browser, services
	$(VENV)/bin/pytest $(PYTEST_ARGS)

test-fast: install  ## unit tests only
	$(VENV)/bin/pytest -m "not mpi and not pipeline and not browser and not slurm and not netns and not dragon and not azurite" $(PYTEST_ARGS)

bench: install system-deps osu-ref  ## the benchmarks quoted in the closing notes (about 210 minutes)
	$(PY) bench/c_reference.py
	$(PY) bench/memory_mode.py
	$(PY) bench/point_overhead.py
	$(PY) bench/ucx_mem_events.py
	$(PY) bench/shuffle.py
	$(PY) bench/bcast.py
	$(PY) bench/io.py --blob
	$(PY) bench/campaign.py
	$(PY) bench/kv.py
	$(PY) bench/multinode.py
	$(PY) bench/stacks.py
	$(PY) bench/launches.py
	$(PY) bench/launch_groups.py
	$(PY) bench/sensitivity.py
	$(PY) bench/history.py

studies: install system-deps  ## the four studies' here campaigns, timed, their claims judged (STUDIES="bcast shuffle")
	$(PY) bench/studies.py $(STUDIES)

stacks: install  ## every communication stack's environment under .stacks/ (the first campaign naming one also does)
	$(PY) -m movebench.engine.stacks $(STACKS)

osu-ref: build/bench/osu_ref build/bench/libosu_ref.so  ## the C reference of bench/c_reference.py (venv's MPICH)

build/bench/osu_ref: bench/osu_ref/osu_ref.c $(VENV)/.installed
	mkdir -p $(@D)
	$(VENV)/bin/mpicc -O2 -Wall -o $@ $<

build/bench/libosu_ref.so: bench/osu_ref/osu_ref.c $(VENV)/.installed
	mkdir -p $(@D)
	$(VENV)/bin/mpicc -O2 -Wall -fPIC -shared -DOSU_REF_LIBRARY -o $@ $<

lint: install  ## snakemake --lint, snakefmt --check, ruff
	$(VENV)/bin/snakemake --lint --profile local $(CONFIG_ARG)
	$(VENV)/bin/snakefmt --check Snakefile workflow/rules
	$(VENV)/bin/ruff check src tests scripts bench

format: install  ## apply snakefmt and ruff's fixes
	$(VENV)/bin/snakefmt Snakefile workflow/rules
	$(VENV)/bin/ruff check --fix src tests scripts bench

slurm-up: install  ## start the local Slurm test cluster: NODES=2 namespaces as hosts, LINK="rate=5gbit" shapes links, CPUS=2 per node
	$(PY) -m movebench_testcluster up --nodes "$(NODES)" --link "$(LINK)" --cpus-per-node "$(CPUS)"

slurm-down:  ## stop the local Slurm test cluster
	$(PY) -m movebench_testcluster down

clean:  ## remove results and Snakemake's state (keeps .venv)
	rm -rf results .snakemake
