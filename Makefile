# Every target does its own set-up: a fresh machine needs only Python 3.11 and Java 17.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

export PYSPARK_PYTHON        := $(abspath $(PY))
export PYSPARK_DRIVER_PYTHON := $(abspath $(PY))
export SPARK_LOCAL_IP        := 127.0.0.1

.PHONY: setup demo demo-kafka test test-all faults lint bench bench-history longrun soak librdkafka-suite clean

setup: $(STAMP)

$(STAMP): pyproject.toml demo/worker_pythonpath.py
	@echo "setup: creating $(VENV) and installing txnlog with pyspark (~400 MB) and the test tools;"
	@echo "setup: the first run takes a few minutes, later runs skip this"
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# editable: a .pth names the project root (pyproject's package-dir), so Spark's pkgutil
	# scan finds pyspark_txnlog; every extra: spark, kafka (Kafka mode), test, dev
	$(PY) -m pip install --quiet -e '.[spark,kafka,test,dev]'
	# Spark's Python workers import the installed pyspark, not its source zip (demo/worker_pythonpath.py)
	$(PY) -m demo.worker_pythonpath
	touch $(STAMP)
	@echo "setup: done ($(VENV))"

## demo: set up, then run the main job
demo: setup
	$(PY) -m demo.main_job

## demo-kafka: the main job in Kafka mode, the query talking to a `txnlog serve` through
## kafka.bootstrap.servers (confluent-kafka) as it would to any Kafka cluster
demo-kafka: setup
	$(PY) -m demo.main_job --kafka

## test: set up, then run every suite but the slow ones (unit, process, Spark, fast faults), on
## two workers: integration/ (Spark, fault injection) on one, in order, the rest on both
test: setup
	$(PY) -m pytest -q -n 2 --dist loadgroup -m "not slow" --durations=25

## test-all: every test, the slow ones included
test-all: setup
	$(PY) -m pytest -q

## faults: the fault-injection suites (embedded and Kafka mode) on ten times the data, the
## adversarial suites (the engine's, and Kafka mode's: several queries and sinks on one
## txnlog serve) for ten / five times as long, and the wire fuzzes (frames, batches) with ten
## times the examples, with a fresh seed (replay one: TXNLOG_TEST_SEED=<printed seed> make faults)
faults: setup
	TXNLOG_FAULT_SCALE=10 TXNLOG_FUZZ_SCALE=10 $(PY) -m pytest -q -s \
		integration/test_fault_injection.py integration/test_fault_injection_kafka.py \
		integration/test_kafka_adversarial.py tests/txn_log/processes/test_adversarial.py \
		tests/txn_wire/test_frame_fuzz.py tests/txn_wire/test_batch_fuzz.py

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

bench: setup
	$(PY) bench/bench_codec.py
	$(PY) bench/bench_frame_bounds.py
	$(PY) bench/bench_partition_log.py
	$(PY) bench/bench_source.py
	$(PY) bench/bench_sink.py
	# issue 27's table: in-process vs the wire, rdkafka_performance (says how to build it when
	# absent), the Spark pipeline vs the Python Data Source ceiling, Kafka mode vs embedded,
	# commit latency; each with its target, repeated together at the end
	$(PY) bench/bench_table.py

## bench-history: start-up cost and the internal topics' size, raw and cleaned, against 1,000 / 20,000 /
## 100,000 historic transactions, on a default log and one with 1 MiB internal segments (10-20 min,
## so not part of make bench)
bench-history: setup
	$(PY) bench/bench_history.py

## longrun: 100,000 micro-batch commits through the sink's commit protocol (no Spark), then a
## real Spark query restarted on that log (3 times, each on a copy of it; the median counts),
## against the same after 1,000 (about 45 minutes: ~26 ms a commit; not part of make test).
## Fewer: make longrun LONGRUN_SIZES=1000,20000
LONGRUN_SIZES ?= 1000,100000
longrun: setup
	$(PY) -m bench.longrun_history --sizes $(LONGRUN_SIZES)

## soak: at least 50 random kills over at least 1,000,000 records (not part of make test)
soak: setup
	$(PY) -m integration.soak

## librdkafka-suite: librdkafka's own test suite (v2.15.0) against `txnlog serve`, a fresh server
## per test number, full mode, default and idempotent (-P) (about an hour; not part of make test).
## Needs LIBRDKAFKA_TESTS=<built librdkafka>/tests (README, "librdkafka's test suite"); without
## it, it says what it needs and skips. Fewer: make librdkafka-suite LIBRDKAFKA_SUITE_ARGS="--tests 0001,0030-0045"
LIBRDKAFKA_SUITE_ARGS ?=
librdkafka-suite: setup
	$(PY) -m integration.librdkafka_suite $(LIBRDKAFKA_SUITE_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache build *.egg-info
