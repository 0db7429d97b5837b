"""What the chart renders, for every documented value set, against Kubernetes' strict OpenAPI schemas
(the package kubernetes-validate ships them: unknown fields fail), offline, for the oldest Kubernetes
the chart supports and the newest the package knows; the Prometheus Operator's objects against
their CRDs' schemas (tests/deploy/crds). Then what each new object says: the PodDisruptionBudget,
the NetworkPolicy, the ServiceAccount, the PrometheusRule (the alert rules of docker/, with
runbook links), the Kafka client properties file, the probes and the `helm test` pod."""

from __future__ import annotations

import base64
import http.server
import json
import subprocess
import sys
import threading
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
import yaml

from .conftest import ALERT_RULES, CHART, CHART_ALERT_RULES, chart_kube_version, tool
from .helm_chart import (KEY, OAUTHBEARER, RELEASE, VALUE_SETS, lint, pod_spec, render, render_failure,
                         schema_error, template, worker)

CRDS = Path(__file__).parent / "crds"
CUSTOM_RESOURCES = {("monitoring.coreos.com/v1", "ServiceMonitor"): CRDS / "servicemonitor.schema.json",
                    ("monitoring.coreos.com/v1", "PrometheusRule"): CRDS / "prometheusrule.schema.json"}
KUBE_VERSIONS = (chart_kube_version(), kubernetes_validate.utils.latest_version())


def rendered_objects(helm, values: dict) -> list[dict]:
    result = template(helm, values)
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def strict_errors(obj: dict) -> list[str]:
    """Where ``obj`` breaks Kubernetes' strict schema of its kind (or its CRD's), at each version."""
    errors = []
    custom = CUSTOM_RESOURCES.get((obj["apiVersion"], obj["kind"]))
    if custom is not None:
        validator = jsonschema.Draft202012Validator(json.loads(custom.read_text()))
        errors += [f"{'.'.join(map(str, e.path))}: {e.message}" for e in validator.iter_errors(obj)]
        # ObjectMeta is Kubernetes' own: check it as the metadata of an object Kubernetes knows
        obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": obj["metadata"]}
    for version in KUBE_VERSIONS:
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as error:
            errors.append(f"Kubernetes {version}: {'.'.join(map(str, error.path))}: {error.message}")
    return errors


def test_the_schemas_know_every_kind_the_chart_renders(helm):
    """A kind without a schema would pass unchecked (kubernetes-validate only warns)."""
    everything = rendered_objects(helm, VALUE_SETS["every optional part"])
    for obj in everything:
        if (obj["apiVersion"], obj["kind"]) not in CUSTOM_RESOURCES:
            for version in KUBE_VERSIONS:
                assert kubernetes_validate.validate(obj, version, strict=True), (obj["kind"], version)


@pytest.mark.parametrize("values", VALUE_SETS.values(), ids=VALUE_SETS)
def test_every_documented_value_set_lints_and_renders_objects_kubernetes_accepts(helm, values):
    linted = lint(helm, values)
    assert linted.returncode == 0, linted.stdout + linted.stderr
    objects = rendered_objects(helm, values)
    assert {"Deployment", "Service", "ConfigMap"} <= {obj["kind"] for obj in objects}
    failures = {f"{obj['kind']}/{obj['metadata']['name']}": strict_errors(obj) for obj in objects}
    assert not {name: errors for name, errors in failures.items() if errors}


@pytest.mark.parametrize("obj", [
    {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "x"},
     "spec": {"maxUnavailable": 1, "unhealthyPodEvictionPolicy": "AlwaysAllow", "selectr": {}}},
    {"apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor", "metadata": {"name": "x"},
     "spec": {"selector": {}, "endpoints": [{"port": "metrics", "intervall": "15s"}]}},
    {"apiVersion": "monitoring.coreos.com/v1", "kind": "PrometheusRule", "metadata": {"name": "x", "labells": {}},
     "spec": {"groups": []}},
], ids=["kubernetes", "crd", "crd metadata"])
def test_the_strict_check_refuses_a_misspelt_field(obj):
    assert strict_errors(obj)


# --- the PrometheusRule ---------------------------------------------------------------------------

def test_the_chart_carries_docker_alert_rules_byte_for_byte():
    assert CHART_ALERT_RULES.read_bytes() == ALERT_RULES.read_bytes(), (
        "helm/wevent/files/alerts.yml differs from docker/prometheus/alerts.yml: "
        "cp docker/prometheus/alerts.yml helm/wevent/files/alerts.yml")


def test_the_prometheus_rule_has_the_alert_rules_with_runbook_links(helm, tmp_path):
    base = "https://git.example.com/wevent/-/blob/v0.1.0/"  # a trailing slash is not doubled
    [rule] = render(helm, {"noiseKey": {"value": KEY},
                           "prometheusRule": {"enabled": True, "runbookBaseUrl": base}})["PrometheusRule"]
    expected = yaml.safe_load(ALERT_RULES.read_text())
    links = 0
    for group in expected["groups"]:
        for entry in group["rules"]:
            if "runbook_url" in entry.get("annotations", {}):
                entry["annotations"]["runbook_url"] = base + entry["annotations"]["runbook_url"]
                links += 1
    assert links == sum("alert" in entry for group in expected["groups"] for entry in group["rules"]) > 0
    assert rule["spec"] == expected
    rules_file = tmp_path / "rules.yml"
    rules_file.write_text(yaml.safe_dump(rule["spec"]))
    checked = subprocess.run([tool("promtool", "prometheus"), "check", "rules", str(rules_file)],
                             capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_the_service_monitor_gives_the_job_label_the_rules_select(helm):
    manifests = render(helm, {"noiseKey": {"value": KEY}, "serviceMonitor": {"enabled": True}})
    [monitor] = manifests["ServiceMonitor"]
    [endpoint] = monitor["spec"]["endpoints"]
    assert {"targetLabel": "job", "replacement": "wevent-worker"} in endpoint["relabelings"]
    assert 'job="wevent-worker"' in ALERT_RULES.read_text()
    [service] = manifests["Service"]
    assert endpoint["port"] in [port["name"] for port in service["spec"]["ports"]]


# --- the Kafka client properties -----------------------------------------------------------------

def properties_file(manifests: dict[str, list[dict]]) -> tuple[str, str, str, str | None]:
    """(WEVENT_KAFKA_PROPERTIES_FILE, the Secret and entry mounted there, the file when the chart's Secret holds it)."""
    env = {e["name"]: e.get("value") for e in worker(manifests)["env"]}
    path = env["WEVENT_KAFKA_PROPERTIES_FILE"]
    directory, name = path.rsplit("/", 1)
    [mount] = [m for m in worker(manifests)["volumeMounts"] if m["mountPath"] == directory]
    assert mount["readOnly"] is True
    [volume] = [v for v in pod_spec(manifests)["volumes"] if v["name"] == mount["name"]]
    [item] = volume["secret"]["items"]
    assert item["path"] == name and volume["secret"]["defaultMode"] == 0o440
    secrets = {s["metadata"]["name"]: s["data"] for s in manifests.get("Secret", [])}
    held = secrets.get(volume["secret"]["secretName"], {}).get(item["key"])
    return path, volume["secret"]["secretName"], item["key"], base64.b64decode(held).decode() if held else None


def test_kafka_properties_become_a_mounted_properties_file(helm):
    manifests = render(helm, {"noiseKey": {"value": KEY}, "kafka": {"properties": OAUTHBEARER}})
    path, secret, key, text = properties_file(manifests)
    assert (path, secret, key) == ("/etc/wevent-kafka-properties/kafka.properties", f"{RELEASE}-wevent",
                                   "kafka.properties")
    lines = text.splitlines()
    assert lines[0].startswith("#")
    assert lines[1:] == [f"{name}={value}" for name, value in sorted(OAUTHBEARER.items())]
    env = {e["name"]: e.get("value") for e in worker(manifests)["env"]}
    assert env["WEVENT_KAFKA_SECURITY_PROTOCOL"] == "SASL_SSL"  # the properties' own, not PLAINTEXT
    assert not {"WEVENT_KAFKA_SASL_MECHANISM", "WEVENT_KAFKA_USERNAME", "WEVENT_KAFKA_PASSWORD"} & set(env)


def test_a_change_of_the_properties_rolls_the_workers(helm):
    def checksum(properties):
        manifests = render(helm, {"noiseKey": {"value": KEY}, "kafka": {"properties": properties}})
        [deployment] = manifests["Deployment"]
        return deployment["spec"]["template"]["metadata"]["annotations"]["checksum/secret"]
    assert checksum({"client.id": "a"}) != checksum({"client.id": "b"})


def test_kafka_properties_from_an_existing_secret(helm):
    manifests = render(helm, {"noiseKey": {"existingSecret": "wevent-noise-key"},
                              "kafka": {"securityProtocol": "SASL_SSL",
                                        "propertiesFile": {"existingSecret": "kafka-client", "key": "client.properties"}}})
    assert "Secret" not in manifests
    assert properties_file(manifests) == ("/etc/wevent-kafka-properties/kafka.properties", "kafka-client",
                                          "client.properties", None)


def test_without_properties_no_file_is_named(helm):
    env = [e["name"] for e in worker(render(helm, {"noiseKey": {"value": KEY}}))["env"]]
    assert "WEVENT_KAFKA_PROPERTIES_FILE" not in env


@pytest.mark.parametrize("kafka, message", [
    ({"properties": {"bootstrap.servers": "a:9092"}}, "kafka.properties sets bootstrap.servers: set kafka.bootstrap"),
    ({"securityProtocol": "SSL", "properties": {"security.protocol": "SSL"}},
     "kafka.properties sets security.protocol and kafka.securityProtocol is set"),
    ({"sasl": {"username": "wevent", "password": "pw"}, "properties": {"sasl.mechanism": "PLAIN", "client.id": "w"}},
     "kafka.properties sets sasl.mechanism and kafka.sasl.username is set"),
    ({"securityProtocol": "SSL", "tls": {"existingSecret": "kafka-ca"}, "properties": {"ssl.ca.location": "/ca.pem"}},
     "kafka.properties sets ssl.ca.location and kafka.tls.existingSecret is set"),
    ({"properties": {"ssl.keystore.location": "/k.jks"}},
     "kafka.properties sets ssl.keystore.location but the security protocol PLAINTEXT uses no TLS"),
    ({"properties": {"sasl.mechanism": "OAUTHBEARER"}},
     "kafka.properties sets sasl.mechanism but the security protocol PLAINTEXT sends no credentials"),
    ({"properties": {"security.protocol": "sasl_ssl"}},
     "kafka.securityProtocol SASL_SSL needs kafka.sasl.username (and the password or kafka.sasl.existingSecret), "
     "or sasl.mechanism and its settings in kafka.properties"),
    ({"properties": {"client.id": "w"}, "propertiesFile": {"existingSecret": "kafka-client"}},
     "kafka.properties and kafka.propertiesFile.existingSecret are both set"),
    ({"propertiesFile": {"existingSecret": "kafka-client"}},
     "kafka.propertiesFile.existingSecret is set but kafka.securityProtocol is not"),
])
def test_kafka_properties_that_disagree_with_the_values_fail_the_render(helm, kafka, message):
    stderr = render_failure(helm, {"noiseKey": {"value": KEY}, "kafka": kafka})
    assert message in stderr, stderr


@pytest.mark.parametrize("properties", [
    {"client.id": "a\nsecurity.protocol=PLAINTEXT"},  # a line break would smuggle in another property
    {"ssl.ca.location": "C:\\certs\\ca.pem"},  # backslashes are escapes to some readers, not to others
    {"client.id": " padded"},  # leading blanks are dropped by properties readers
    {"request.timeout.ms": 30000},  # not a string: quote numbers
    {"client id": "w"},
    {"a=b": "c"},
    {"security.protocol": "TLS"},
])
def test_helm_refuses_properties_a_properties_file_cannot_carry(helm, properties):
    assert schema_error(helm, {"noiseKey": {"value": KEY}, "kafka": {"properties": properties}})


# --- disruption budget, network policy, service account -------------------------------------------

def selector(manifests) -> dict:
    [deployment] = manifests["Deployment"]
    return deployment["spec"]["selector"]["matchLabels"]


def test_the_disruption_budget_covers_the_workers_one_at_a_time(helm):
    manifests = render(helm, {"noiseKey": {"value": KEY}})
    [budget] = manifests["PodDisruptionBudget"]
    assert budget["spec"] == {"maxUnavailable": 1, "unhealthyPodEvictionPolicy": "AlwaysAllow",
                              "selector": {"matchLabels": selector(manifests)}}
    by_share = render(helm, {"noiseKey": {"value": KEY},
                             "podDisruptionBudget": {"maxUnavailable": None, "minAvailable": "50%"}})
    assert by_share["PodDisruptionBudget"][0]["spec"]["minAvailable"] == "50%"
    assert "maxUnavailable" not in by_share["PodDisruptionBudget"][0]["spec"]
    assert "PodDisruptionBudget" not in render(helm, {"noiseKey": {"value": KEY},
                                                      "podDisruptionBudget": {"enabled": False}})


@pytest.mark.parametrize("budget", [{"minAvailable": 1}, {"maxUnavailable": None}])
def test_a_budget_needs_exactly_one_bound(helm, budget):
    stderr = render_failure(helm, {"noiseKey": {"value": KEY}, "podDisruptionBudget": budget})
    assert "podDisruptionBudget: set one of maxUnavailable and minAvailable, the other null" in stderr


def network_policy(helm, values: dict) -> tuple[dict, dict]:
    manifests = render(helm, {"noiseKey": {"value": KEY}, **values})
    [policy] = manifests["NetworkPolicy"]
    return policy["spec"], manifests


def test_the_network_policy_admits_prometheus_query_clients_and_helm_test_to_the_web_port_only(helm):
    clients = [{"podSelector": {"matchLabels": {"role": "analyst"}}}]
    spec, manifests = network_policy(helm, {"networkPolicy": {"enabled": True, "queryClients": clients}})
    assert spec["podSelector"] == {"matchLabels": selector(manifests)}
    assert spec["policyTypes"] == ["Ingress", "Egress"]
    [ingress] = spec["ingress"]
    [port] = ingress["ports"]
    assert port == {"port": "web", "protocol": "TCP"}
    assert port["port"] in [p["name"] for p in worker(manifests)["ports"]]
    [test_pod] = manifests["Pod"]
    default_prometheus = yaml.safe_load((CHART / "values.yaml").read_text())["networkPolicy"]["prometheus"]
    assert ingress["from"][:-1] == [*default_prometheus, *clients]
    test_peer = ingress["from"][-1]["podSelector"]["matchLabels"]
    assert test_peer.items() <= test_pod["metadata"]["labels"].items()
    assert not test_peer.items() <= selector(manifests).items()  # the test pod's labels are not a worker's


def test_without_peers_only_the_helm_test_pod_is_admitted(helm):
    spec, manifests = network_policy(helm, {"networkPolicy": {"enabled": True, "prometheus": []}})
    [ingress] = spec["ingress"]
    [peer] = ingress["from"]
    assert peer["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "test"


def test_egress_goes_to_the_bootstrap_ports_and_dns(helm):
    bootstrap = "kafka-0.kafka:9093,kafka-1.kafka:9093,kafka-2.kafka:9094"
    spec, _ = network_policy(helm, {"kafka": {"bootstrap": bootstrap}, "networkPolicy": {"enabled": True}})
    kafka, dns = spec["egress"]
    assert kafka == {"ports": [{"port": 9093, "protocol": "TCP"}, {"port": 9094, "protocol": "TCP"}]}
    assert dns["ports"] == [{"port": 53, "protocol": "UDP"}, {"port": 53, "protocol": "TCP"}]
    assert dns["to"][0]["podSelector"] == {"matchLabels": {"k8s-app": "kube-dns"}}
    brokers = [{"ipBlock": {"cidr": "10.20.0.0/16"}}]
    ports = [{"port": 9095, "protocol": "TCP"}]
    extra = {"to": [{"ipBlock": {"cidr": "203.0.113.10/32"}}], "ports": [{"port": 443, "protocol": "TCP"}]}
    spec, _ = network_policy(helm, {"networkPolicy": {"enabled": True, "kafka": {"to": brokers, "ports": ports},
                                                      "extraEgress": [extra]}})
    assert spec["egress"][0] == {"ports": ports, "to": brokers}
    assert spec["egress"][2] == extra


def test_the_pod_runs_as_its_service_account_without_a_token(helm):
    manifests = render(helm, {"noiseKey": {"value": KEY}})
    [account] = manifests["ServiceAccount"]
    assert account["automountServiceAccountToken"] is False
    spec = pod_spec(manifests)
    assert spec["serviceAccountName"] == account["metadata"]["name"] == f"{RELEASE}-wevent"
    assert spec["automountServiceAccountToken"] is False
    existing = render(helm, {"noiseKey": {"value": KEY}, "serviceAccount": {"create": False, "name": "runner"}})
    assert "ServiceAccount" not in existing and pod_spec(existing)["serviceAccountName"] == "runner"
    assert pod_spec(render(helm, {"noiseKey": {"value": KEY}, "serviceAccount": {"create": False}}))[
        "serviceAccountName"] == "default"


# --- the pod ---------------------------------------------------------------------------------------

def test_probes_ask_livez_and_readyz_with_the_values_timings(helm):
    probes = {"liveness": {"periodSeconds": 20, "timeoutSeconds": 3, "failureThreshold": 5},
              "readiness": {"periodSeconds": 7, "timeoutSeconds": 2, "failureThreshold": 2, "successThreshold": 2}}
    container = worker(render(helm, {"noiseKey": {"value": KEY}, "probes": probes}))
    assert container["startupProbe"]["httpGet"] == {"path": "/livez", "port": "web"}
    assert container["livenessProbe"] == {"httpGet": {"path": "/livez", "port": "web"}, **probes["liveness"]}
    assert container["readinessProbe"] == {"httpGet": {"path": "/readyz", "port": "web"}, **probes["readiness"]}


def test_the_image_is_pulled_by_digest_when_one_is_given(helm):
    digest = "sha256:" + "ab" * 32
    assert worker(render(helm, {"noiseKey": {"value": KEY}}))["image"] == "wevent:0.1.0"
    assert worker(render(helm, {"noiseKey": {"value": KEY}, "image": {"tag": "0.1.1"}}))["image"] == "wevent:0.1.1"
    manifests = render(helm, {"noiseKey": {"value": KEY}, "image": {"tag": "0.1.1", "digest": digest}})
    assert worker(manifests)["image"] == f"wevent@{digest}"
    assert manifests["Pod"][0]["spec"]["containers"][0]["image"] == f"wevent@{digest}"
    assert schema_error(helm, {"noiseKey": {"value": KEY}, "image": {"digest": "0.1.1"}})


def test_spread_constraints_count_the_workers_unless_they_say_otherwise(helm):
    own = {"matchLabels": {"app.kubernetes.io/component": "worker"}}
    manifests = render(helm, {"noiseKey": {"value": KEY}, "topologySpreadConstraints": [
        {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule"},
        {"maxSkew": 2, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "ScheduleAnyway",
         "labelSelector": own}]})
    zone, host = pod_spec(manifests)["topologySpreadConstraints"]
    assert zone == {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": {"matchLabels": selector(manifests)}}
    assert host["labelSelector"] == own
    default = pod_spec(render(helm, {"noiseKey": {"value": KEY}}))["topologySpreadConstraints"]
    assert [(c["topologyKey"], c["whenUnsatisfiable"]) for c in default] == [("kubernetes.io/hostname",
                                                                             "ScheduleAnyway")]


def test_scheduling_values_reach_the_pod(helm):
    spec = pod_spec(render(helm, {"noiseKey": {"value": KEY}, "priorityClassName": "stream-critical",
                                  "terminationGracePeriodSeconds": 90}))
    assert (spec["priorityClassName"], spec["terminationGracePeriodSeconds"]) == ("stream-critical", 90)
    assert "priorityClassName" not in pod_spec(render(helm, {"noiseKey": {"value": KEY}}))


def test_name_overrides_name_every_object(helm):
    objects = rendered_objects(helm, {"noiseKey": {"value": KEY}, "fullnameOverride": "streams",
                                      "nameOverride": "dp", "networkPolicy": {"enabled": True}})
    names = {obj["kind"]: obj["metadata"]["name"] for obj in objects}
    assert names.pop("Pod") == "streams-test-readyz"
    assert set(names.values()) == {"streams"}
    assert {obj["metadata"]["labels"]["app.kubernetes.io/name"] for obj in objects} == {"dp"}
    release_named = rendered_objects(helm, {"noiseKey": {"value": KEY}, "nameOverride": "dp"})
    assert {obj["metadata"]["name"] for obj in release_named if obj["kind"] != "Pod"} == {f"{RELEASE}-dp"}


def test_the_helm_test_pod_asks_readyz_through_the_service(helm):
    manifests = render(helm, {"noiseKey": {"value": KEY}, "service": {"port": 8080}})
    [pod] = manifests["Pod"]
    [service] = manifests["Service"]
    assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    assert pod["spec"]["restartPolicy"] == "Never" and pod["spec"]["automountServiceAccountToken"] is False
    [container] = pod["spec"]["containers"]
    assert container["image"] == worker(manifests)["image"]
    assert container["args"] == [f"http://{service['metadata']['name']}:8080/readyz"]
    assert container["securityContext"] == worker(manifests)["securityContext"]
    assert pod["spec"]["securityContext"]["runAsNonRoot"] is True


class _Readyz(http.server.BaseHTTPRequestHandler):
    """A worker's /readyz answering with the server's ``status``."""

    def do_GET(self):  # noqa: N802 (the name http.server calls)
        self.send_response(self.server.status if self.path == "/readyz" else 404)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.mark.parametrize("status, exit_code", [(200, 0), (503, 1)])
def test_the_helm_test_pod_passes_on_a_ready_worker_only(helm, status, exit_code):
    """The pod's own command, run here against a stand-in /readyz on a port the system picks."""
    [pod] = render(helm, {"noiseKey": {"value": KEY}})["Pod"]
    [container] = pod["spec"]["containers"]
    server = http.server.HTTPServer(("127.0.0.1", 0), _Readyz)
    server.status = status
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_port}/readyz"
        assert container["command"][0] == "python"  # the image's; here, this test's interpreter
        command = [sys.executable, *container["command"][1:], url]
        result = subprocess.run(command, capture_output=True, text=True, timeout=30)
    finally:
        server.shutdown()
        server.server_close()
    assert result.returncode == exit_code, result.stderr
    output = (result.stdout + result.stderr).strip()
    assert len(output.splitlines()) == 1 and url in output, output  # one line, no traceback
