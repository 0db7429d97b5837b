# README's two commands: `make run` (the main job) and `make test` (the whole suite).
# Both create .venv and install what they need on a machine that has only Python and pip:
# `make run` only what running needs (the stream and broker extras), `make test` the rest, at the
# versions of docker/requirements.lock, so the suite tests what the image runs.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check

.PHONY: setup setup-run deploy-tools kafka-jars run test test-quick test-kafka clean

setup-run: $(VENV)/.installed-run

setup: $(VENV)/.installed $(VENV)/typecheck/wevent

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed-run: pyproject.toml | $(VENV)/bin/python
	@echo "installing wevent with its stream and broker extras into $(VENV) (the first time takes a minute or two)"
	$(PIP) install --progress-bar on -e '.[stream,broker]'
	touch $@

$(VENV)/constraints.txt: docker/requirements.lock | $(VENV)/bin/python
	sed -e '/^#/d' -e '/--hash=/d' -e 's/ \\$$//' $< > $@

$(VENV)/.installed: pyproject.toml $(VENV)/constraints.txt | $(VENV)/bin/python
	@echo "installing wevent with its test extra into $(VENV), at the locked versions"
	$(PIP) install --quiet -c $(VENV)/constraints.txt -e '.[test]'
	touch $@ $(VENV)/.installed-run

# mypy finds a package by its folder and cannot follow the editable install's import hook, and the
# import name wevent spans three folders (package-dir in pyproject.toml): this tree of links gives
# mypy the package under its own name ([tool.mypy] reads it from here). It follows pipeline/'s
# listing, so a new module there relinks it.
$(VENV)/typecheck/wevent: pipeline | $(VENV)/bin/python
	rm -rf $@ && mkdir -p $@
	ln -s $(CURDIR)/pipeline/* $(CURDIR)/producers $(CURDIR)/topologies $@/

# What tests/deploy runs besides Python: Debian's docker-compose (`docker-compose config`) and
# prometheus (promtool, the server) when missing, and the real helm at a pinned release, built
# with the machine's Go from the Go module proxy into a cache kept across checkouts (a few minutes
# the first time, nothing after; tests/deploy/conftest.py finds it by HELM_VERSION). Quick when
# all is there already.
DEPLOY_DEBS := docker-compose:docker-compose promtool:prometheus prometheus:prometheus
HELM_VERSION := v3.22.0
HELM := $(HOME)/.cache/wevent/helm-$(HELM_VERSION)/helm
GO ?= $(shell command -v go || echo /usr/local/go/bin/go)

deploy-tools: $(VENV)/.installed $(HELM)
	@missing=$$(for pair in $(DEPLOY_DEBS); do command -v $${pair%%:*} >/dev/null || echo $${pair##*:}; done | sort -u); \
	if [ -n "$$missing" ]; then \
		echo "apt-get install $$missing"; \
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; } \
			|| echo "could not install $$missing: the deploy tests that need them will fail"; \
	fi

# `helm version` says the release only when the build stamps it (ldflags), as helm's own release does.
$(HELM):
	@echo "building helm $(HELM_VERSION) into $(@D) with Go"
	@GOBIN=$(@D) GOFLAGS=-mod=mod CGO_ENABLED=0 $(GO) install \
		-ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$(HELM_VERSION)" \
		helm.sh/helm/v3/cmd/helm@$(HELM_VERSION) \
		|| echo "could not build helm $(HELM_VERSION) (it needs Go 1.26 or later): the helm tests will fail"

# Apache Kafka's jars (Maven Central, via mvn) for the tests against a real Kafka, cached in
# ~/.cache/wevent/kafka-<version> ($WEVENT_KAFKA_CACHE): fetched once, quick afterwards.
kafka-jars: $(VENV)/.installed
	$(PY) -m wevent.stream.runtime.apache_kafka --install

run: setup-run
	$(VENV)/bin/wevent run

# The suite mostly waits on brokers and child processes (one pytest used 76% of a core), so two
# pytest-xdist processes run it, a test file each at a time: a file's tests share its fixtures
# (one Apache Kafka per process). Files go out in tests/conftest.py's order, the long ones (real
# brokers) first, not by their number of tests. TEST_PROCESSES=0 runs it in one process.
TEST_PROCESSES ?= 2
PYTEST := $(PY) -m pytest -n $(TEST_PROCESSES) --dist loadfile --no-loadscope-reorder

test: setup deploy-tools kafka-jars
	$(PYTEST)

test-quick: setup deploy-tools kafka-jars
	$(PYTEST) -m "not slow"

# Every integration test on Apache Kafka alone (`make test` runs them too).
test-kafka: setup kafka-jars
	$(PYTEST) tests/integration -k kafka

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis build *.egg-info
