# README's two commands: `make run` (the main job) and `make test` (the whole suite).
# Both create .venv and install what they need on a machine that has only Python and pip.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: setup deploy-tools kafka-jars run test test-quick test-kafka clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[test]'
	touch $@

# What tests/deploy runs besides Python: Debian's docker-compose (`docker-compose config`) and
# prometheus (promtool, the server) when missing, and a Python 3.12 venv with helm-sdkpy where a
# Python 3.12 exists. Quick when all is there already.
DEPLOY_DEBS := docker-compose:docker-compose promtool:prometheus prometheus:prometheus
HELM_VENV := .venv312

deploy-tools: $(VENV)/.installed
	@missing=$$(for pair in $(DEPLOY_DEBS); do command -v $${pair%%:*} >/dev/null || echo $${pair##*:}; done | sort -u); \
	if [ -n "$$missing" ]; then \
		echo "apt-get install $$missing"; \
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; } \
			|| echo "could not install $$missing: the deploy tests that need them will fail"; \
	fi
	@python312=$$($(PY) tests/deploy/python312.py) || { echo "no Python 3.12: the helm lint tests will skip"; exit 0; }; \
	if [ ! -f $(HELM_VENV)/.installed ] || [ tests/deploy/helm-requirements.txt -nt $(HELM_VENV)/.installed ]; then \
		$$python312 -m venv $(HELM_VENV) && \
		$(HELM_VENV)/bin/pip install --quiet --disable-pip-version-check -r tests/deploy/helm-requirements.txt && \
		touch $(HELM_VENV)/.installed; \
	fi

# Apache Kafka's jars (Maven Central, via mvn) for the tests against a real Kafka, cached in
# ~/.cache/wevent/kafka-<version> ($WEVENT_KAFKA_CACHE): fetched once, quick afterwards.
kafka-jars: $(VENV)/.installed
	$(PY) -m pipeline.stream.apache_kafka --install

run: setup
	$(VENV)/bin/wevent run

test: setup deploy-tools kafka-jars
	$(PY) -m pytest

test-quick: setup deploy-tools kafka-jars
	$(PY) -m pytest -m "not slow"

# Every integration test on Apache Kafka, the long runs included (about 20 minutes more).
test-kafka: setup kafka-jars
	WEVENT_KAFKA_LONG=1 $(PY) -m pytest tests/integration -k kafka

clean:
	rm -rf $(VENV) $(HELM_VENV) .pytest_cache .hypothesis build *.egg-info
