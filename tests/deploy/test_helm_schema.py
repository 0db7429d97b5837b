"""helm/wevent/values.schema.json is strict and complete: every object of the chart's own values
refuses keys it does not list, an object passed through to Kubernetes lists exactly the fields of
its Kubernetes type (or says it is passed through whole), every key of values.yaml is in the
schema, helm refuses an unknown key, and helm/README.md documents every value. Which parts are
generated from the workers' own rules is the generator's test (tests/stream/test_config.py)."""

from __future__ import annotations

import importlib.resources
import json
import re
from collections.abc import Iterator

import kubernetes_validate
import pytest
import yaml

from wevent.stream.helm_schema import GENERATED

from .conftest import CHART
from .helm_chart import KEY, SCHEMA_ERROR, lint, schema_error, template

SCHEMA = json.loads((CHART / "values.schema.json").read_text())
VALUES = yaml.safe_load((CHART / "values.yaml").read_text())
README = CHART.parent / "README.md"
KUBERNETES_TYPE = re.compile(r"^Kubernetes (io\.k8s\.\S+?)[:,]")


def kubernetes_definitions() -> dict:
    """Kubernetes' strict definitions at the newest release kubernetes-validate ships."""
    version = kubernetes_validate.utils.latest_version()
    folder = importlib.resources.files("kubernetes_validate") / "kubernetes-json-schema"
    [strict] = [d for d in folder.iterdir() if d.name.startswith(f"v{version}") and d.name.endswith("-local-strict")]
    return json.loads((strict / "_definitions.json").read_text())["$defs"]


def schema_nodes(node: dict, path: str = "") -> Iterator[tuple[str, dict]]:
    """Every subschema of the chart's values, by value path ([] for list items, * for map entries)."""
    yield path, node
    for name, child in node.get("properties", {}).items():
        yield from schema_nodes(child, f"{path}.{name}" if path else name)
    if isinstance(node.get("additionalProperties"), dict):
        yield from schema_nodes(node["additionalProperties"], f"{path}.*")
    if isinstance(node.get("items"), dict):
        yield from schema_nodes(node["items"], f"{path}[]")


def kubernetes_type(node: dict) -> str | None:
    found = KUBERNETES_TYPE.match(node.get("$comment", ""))
    return found.group(1) if found else None


def test_the_schema_says_which_parts_are_generated_and_which_are_written_by_hand():
    comment = SCHEMA["$comment"]
    assert "pipeline/stream/helm_schema.py" in comment and "written by hand in this file" in comment
    assert f"the properties {', '.join(GENERATED)} are made there" in comment
    assert set(GENERATED) < set(SCHEMA["properties"])


def strict_in_every_branch(parent: dict, name: str) -> bool:
    """Whether each conditional branch of ``parent`` (allOf: if/then, as a stream's options per
    mechanism) gives its property ``name`` a closed list of keys."""
    branches = [branch.get("then", branch) for branch in parent.get("allOf", [])]
    return bool(branches) and all("additionalProperties" in branch.get("properties", {}).get(name, {})
                                  for branch in branches)


def test_every_object_of_the_chart_refuses_keys_it_does_not_list():
    loose = []
    nodes = dict(schema_nodes(SCHEMA))
    for path, node in nodes.items():
        if node.get("type") == "object" or "properties" in node:
            parent, _, name = path.rpartition(".")
            if "additionalProperties" not in node and kubernetes_type(node) is None \
                    and not strict_in_every_branch(nodes[parent], name):
                loose.append(path or "(top)")
    assert not loose, f"objects that accept any key: {loose}"


def test_listed_kubernetes_objects_list_exactly_their_types_fields():
    definitions = kubernetes_definitions()
    seen = set()
    for path, node in schema_nodes(SCHEMA):
        kind = kubernetes_type(node)
        if kind is None:
            continue
        assert kind in definitions, (path, kind)
        seen.add(kind)
        if node.get("additionalProperties") is False:
            assert sorted(node["properties"]) == sorted(definitions[kind]["properties"]), path
        else:
            assert "passed through whole" in node["$comment"], path
    assert {"io.k8s.api.core.v1.PodSecurityContext", "io.k8s.api.networking.v1.NetworkPolicyPeer"} <= seen


def values_paths(values, schema: dict, path: str = "") -> Iterator[tuple[str, dict | None]]:
    """Each key of values.yaml (list items included) with its subschema, None where the schema lacks it."""
    if isinstance(values, dict):
        for name, value in values.items():
            child = schema.get("properties", {}).get(name)
            if child is None and isinstance(schema.get("additionalProperties"), dict):
                child = schema["additionalProperties"]
            here = f"{path}.{name}" if path else name
            yield here, child
            if child is not None and kubernetes_type(child) is None:
                yield from values_paths(value, child, here)
    elif isinstance(values, list) and isinstance(schema.get("items"), dict):
        for value in values:
            yield from values_paths(value, schema["items"], f"{path}[]")


def test_every_key_of_values_yaml_is_in_the_schema():
    missing = [path for path, child in values_paths(VALUES, SCHEMA) if child is None]
    assert not missing
    assert {"podAnnotations", "tolerations", "securityContext", "networkPolicy.kafka.ports",
            "kafka.properties"} <= {path for path, _ in values_paths(VALUES, SCHEMA)}


@pytest.mark.parametrize("values", [
    {"replicaCont": 3},
    {"image": {"digst": "sha256:" + "0" * 64}},
    {"probes": {"liveness": {"path": "/healthz"}}},
    {"probes": {"liveness": {"successThreshold": 2}}},  # Kubernetes allows 1 only, outside readiness
    {"networkPolicy": {"kafka": {"cidrs": ["10.0.0.0/8"]}}},
    {"networkPolicy": {"prometheus": [{"namespace": "monitoring"}]}},
    {"podDisruptionBudget": {"maxUnavailabe": 1}},
    {"podSecurityContext": {"runAsNonroot": True}},
    {"resources": {"limit": {"memory": "1Gi"}}},
    {"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone"}]},
    {"serviceAccount": {"automount": True}},
    {"prometheusRule": {"runbookBaseURL": "https://example.com"}},
    {"serviceMonitor": {"intervall": "30s"}},
])
def test_helm_refuses_an_unknown_or_misplaced_key(helm, values):
    assert schema_error(helm, {"noiseKey": {"value": KEY}, **values})


def test_helm_refuses_a_misspelt_set_flag(helm):
    for command in (("lint", "--strict"), ("template", "release")):
        result = helm(*command, str(CHART), "--set", "replicaCont=3", "--set", f"noiseKey.value={KEY}")
        assert result.returncode != 0 and SCHEMA_ERROR in result.stdout + result.stderr, command
        assert "replicaCont" in result.stdout + result.stderr


def test_the_default_values_pass_the_schema(helm):
    assert lint(helm, {}).returncode == 0
    assert template(helm, {"noiseKey": {"value": KEY}}).returncode == 0


def documented_paths(values, schema: dict, path: str = "") -> Iterator[str]:
    """The values helm/README.md must name: each key down to the first value that is not an object of
    the chart's own (a scalar, a list, a map, a Kubernetes object, the stream config, whose format the
    repository's README documents)."""
    for name, value in values.items():
        child = schema["properties"][name]
        here = f"{path}.{name}" if path else name
        if isinstance(value, dict) and child.get("additionalProperties") is False and kubernetes_type(child) is None \
                and here != "config":
            yield from documented_paths(value, child, here)
        else:
            yield here


def test_the_readme_documents_every_value():
    """Each value appears in backticks, by its path or (for a group of values of one object) by its
    parent's path followed by its own name, as in "`probes.liveness` ... `periodSeconds`"."""
    text = README.read_text()
    named = set(re.findall(r"`([A-Za-z][\w.]*)`", text))
    missing = [path for path in documented_paths(VALUES, SCHEMA)
               if path not in named and not (path.rpartition(".")[0] in named and path.rpartition(".")[2] in named)]
    assert not missing, f"helm/README.md does not name {missing}"
