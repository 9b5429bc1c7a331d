# Maidian: `make demo` runs the main job on an embedded broker; `make test` runs every test.
# Both install what they need (Debian packages, Python test clients) when it is missing.

SWIFT ?= swift
# Hyperscan is x86-64 only; Vectorscan provides the same libhs (hs/hs.h, libhs.pc) on other architectures.
HS_PACKAGE := $(shell [ "$$(dpkg --print-architecture 2>/dev/null)" = amd64 ] && echo libhyperscan-dev || echo libvectorscan-dev)
APT_PACKAGES := librdkafka-dev libzstd-dev libmaxminddb-dev $(HS_PACKAGE) pkg-config kcat zstd docker-compose
PY_PACKAGES := confluent-kafka zstandard jsonschema pyyaml
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: all deps build release test unit golden demo bench bench-match compose-check build-context-check deploy-check clean fuzz fuzz-build

all: build

## Installs missing Debian packages and Python test clients.
deps:
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing >/dev/null; \
	fi
	@python3 -c "import confluent_kafka, zstandard, jsonschema, yaml" 2>/dev/null || \
	  (echo "installing Python packages: $(PY_PACKAGES)"; python3 -m pip install -q $(PY_PACKAGES) 2>&1 | grep -v WARNING || true)

build: deps
	$(SWIFT) build

release: deps
	$(SWIFT) build -c release

## Every test: unit tests, Kafka tests on the mock cluster, the golden tests on testdata/, the image's
## build context and docker-compose.yml, the files under deploy/, the pipeline tests under pipelines/tests/,
## and a short run of every fuzz target (FUZZ_SECONDS, 20 here: CI stays under its 30 minutes). The XCTest
## suites run in three lanes at once (scripts/test-lanes.sh: the broker suites, which mostly wait, beside the
## rest); `LANES=1 make test` runs them in one process.
test: deps compose-check build-context-check deploy-check
	$(SWIFT) build --build-tests
	SWIFT=$(SWIFT) scripts/test-lanes.sh
	$$($(SWIFT) build --show-bin-path)/maidian test 'pipelines/tests/*.yaml'
	$(MAKE) fuzz FUZZ_SECONDS=$${FUZZ_SECONDS:-20}

## libFuzzer targets (Fuzz/, a package of its own): record bytes and headers through the sample pipeline, the
## pipeline loader, the rules loader. Each runs FUZZ_SECONDS (default 60) from its seed corpus
## (Fuzz/corpus/<target>); new inputs go to Fuzz/.build/corpus-<target>, crashes to Fuzz/findings/. A target that
## overruns by 5 minutes (a hang libFuzzer's own -timeout could not stop) is killed and fails.
FUZZ_SECONDS ?= 60
FUZZ_TARGETS := FuzzRecord:record FuzzPipeline:pipeline FuzzRules:rules FuzzInternal:internal
fuzz-build: deps
	cd Fuzz && $(SWIFT) build -c release -Xswiftc -sanitize=fuzzer

fuzz: fuzz-build
	@bin=$$(cd Fuzz && $(SWIFT) build -c release -Xswiftc -sanitize=fuzzer --show-bin-path); \
	mkdir -p Fuzz/findings; \
	for pair in $(FUZZ_TARGETS); do \
	  t=$${pair%%:*}; c=$${pair##*:}; mkdir -p Fuzz/.build/corpus-$$c; \
	  echo "fuzzing $$t for $(FUZZ_SECONDS) s"; \
	  timeout -s KILL $$(( $(FUZZ_SECONDS) + 300 )) $$bin/$$t -max_total_time=$(FUZZ_SECONDS) -timeout=20 -rss_limit_mb=2048 -print_final_stats=1 \
	    -artifact_prefix=Fuzz/findings/$$c- Fuzz/.build/corpus-$$c Fuzz/corpus/$$c || exit 1; \
	done

compose-check:
	docker-compose -f docker-compose.yml config -q && echo "docker-compose.yml: ok"

## The image's build context as .dockerignore filters it builds (no Docker engine needed); compose profiles.
build-context-check:
	scripts/check-build-context.sh

## The Grafana dashboard (JSON schema), the Prometheus alert rules and the Kubernetes manifests under deploy/.
deploy-check:
	python3 scripts/check_deploy.py

## The main job on an embedded broker with generated traffic; prints what came out.
demo: release
	scripts/demo.sh

## Throughput of the full pipeline on RECORDING (release build); without one, on traffic `maidian gen`
## generates once (scripts/bench-recording.sh).
bench: release
	rec=$${RECORDING:-$$(scripts/bench-recording.sh)} && $$($(SWIFT) build -c release --show-bin-path)/maidian bench pipelines/app-analytics.yaml --recording $$rec

## The match stage alone, with 10, 1,000 and 10,000 rules generated from RECORDING (default as for bench).
bench-match: release
	rec=$${RECORDING:-$$(scripts/bench-recording.sh)} && $$($(SWIFT) build -c release --show-bin-path)/maidian bench-match --rules 10,1000,10000 --runs 15 --recording $$rec

clean:
	rm -rf .build demo-out
