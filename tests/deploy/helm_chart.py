"""The chart and the real helm, shared by the chart's tests: helm with no cluster, its renders, and
the documented value sets (every optional part on; each Kafka TLS and SASL form)."""

from __future__ import annotations

import subprocess

import yaml

from .conftest import CHART, Helm, chart_kube_version

RELEASE = "test-release"
KEY = "0123456789abcdef" * 4
SCHEMA_ERROR = "values don't meet the specifications of the schema"


def lint(helm: Helm, values: dict) -> subprocess.CompletedProcess:
    """`helm lint --strict` (warnings fail too)."""
    return helm("lint", "--strict", str(CHART), "--kube-version", chart_kube_version(), values=values)


def template(helm: Helm, values: dict) -> subprocess.CompletedProcess:
    """`helm template` for the oldest Kubernetes the chart supports (helm built from source assumes an
    older one than its releases do)."""
    return helm("template", RELEASE, str(CHART), "--namespace", "wevent", "--kube-version", chart_kube_version(),
                values=values)


def render(helm, values: dict) -> dict[str, list[dict]]:
    """The manifests `helm template` renders with ``values``, by kind."""
    result = template(helm, values)
    assert result.returncode == 0, result.stderr
    manifests: dict[str, list[dict]] = {}
    for doc in yaml.safe_load_all(result.stdout):
        if doc:
            manifests.setdefault(doc["kind"], []).append(doc)
    return manifests


def render_failure(helm, values: dict) -> str:
    """The one-line message of a `helm template` that fails (a template's `fail`, or the schema)."""
    result = template(helm, values)
    assert result.returncode != 0, result.stdout
    return result.stderr


def pod_spec(manifests: dict[str, list[dict]]) -> dict:
    [deployment] = manifests["Deployment"]
    return deployment["spec"]["template"]["spec"]


def worker(manifests: dict[str, list[dict]]) -> dict:
    [container] = pod_spec(manifests)["containers"]
    return container


def schema_error(helm, values: dict) -> bool:
    """Both `helm lint` and `helm template` refuse ``values`` by the chart's values.schema.json."""
    linted = lint(helm, values)
    refused_by_lint = linted.returncode != 0 and SCHEMA_ERROR in linted.stdout
    return refused_by_lint and SCHEMA_ERROR in render_failure(helm, values)


EVERYTHING = {
    "noiseKey": {"value": KEY},
    "releasePublicKey": "04551e2824aaf2de30970f1b9c2e7ad033acd0636bacbc157e111d28b4e57934",  # KEY's
    "kafka": {"bootstrap": "kafka-0.kafka:9093,kafka-1.kafka:9093", "securityProtocol": "SASL_SSL",
              "sasl": {"username": "wevent", "password": "secret"},
              "tls": {"existingSecret": "kafka-client", "clientCertificate": True, "keyPasswordKey": "key-password"},
              "properties": {"client.id": "wevent-worker", "request.timeout.ms": "60000"}},
    "configFiles": {"users.csv": "user,w,epsilon\n0,10,1.0\n"},
    "serviceMonitor": {"enabled": True, "labels": {"release": "prometheus"}},
    "prometheusRule": {"enabled": True, "labels": {"release": "prometheus"}},
    "networkPolicy": {"enabled": True, "queryClients": [{"podSelector": {"matchLabels": {"role": "analyst"}}}],
                      "kafka": {"to": [{"ipBlock": {"cidr": "10.20.0.0/16"}}]},
                      "extraEgress": [{"ports": [{"port": 443, "protocol": "TCP"}]}]},
    "serviceAccount": {"annotations": {"example.com/role": "wevent"}},
    "image": {"repository": "registry.example.com/wevent", "digest": "sha256:" + "0" * 64},
    "imagePullSecrets": [{"name": "regcred"}],
    "priorityClassName": "stream-critical",
    "podAnnotations": {"example.com/owner": "team"},
    "podLabels": {"example.com/team": "privacy"},
    "nodeSelector": {"kubernetes.io/arch": "amd64"},
    "tolerations": [{"key": "dedicated", "operator": "Exists"}],
    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "example.com/pool", "operator": "In", "values": ["streams"]}]}]}}},
    "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                                   "whenUnsatisfiable": "DoNotSchedule"}],
    "extraEnv": [{"name": "HTTPS_PROXY", "value": "http://proxy:3128"}],
    "extraEnvFrom": [{"configMapRef": {"name": "site-env"}}],
    "extraVolumes": [{"name": "site-ca", "configMap": {"name": "site-ca"}}],
    "extraVolumeMounts": [{"name": "site-ca", "mountPath": "/etc/site-ca", "readOnly": True}],
}


TLS_DIR = "/etc/wevent-kafka-tls"
CHART_SECRET = f"{RELEASE}-wevent"
SASL = {"username": "wevent", "password": "secret"}
PROTOCOL, CAFILE = "WEVENT_KAFKA_SECURITY_PROTOCOL", "WEVENT_KAFKA_SSL_CAFILE"
CERTFILE, KEYFILE = "WEVENT_KAFKA_SSL_CERTFILE", "WEVENT_KAFKA_SSL_KEYFILE"
SCRAM_512 = {"WEVENT_KAFKA_SASL_MECHANISM": "SCRAM-SHA-512"}


def credentials_in(secret: str) -> dict[str, tuple[str, str]]:
    return {"WEVENT_KAFKA_USERNAME": (secret, "kafka-username"), "WEVENT_KAFKA_PASSWORD": (secret, "kafka-password")}


# Every TLS form Kafka users meet: kafka values -> the worker's WEVENT_KAFKA_* variables (a value,
# or the Secret and entry it comes from), and the entries mounted from kafka.tls.existingSecret.
TLS_FORMS = {
    "plaintext": ({}, {PROTOCOL: "PLAINTEXT"}, None),
    "ssl, system CAs": ({"securityProtocol": "SSL"}, {PROTOCOL: "SSL"}, None),
    "ssl, custom CA": ({"securityProtocol": "SSL", "tls": {"existingSecret": "kafka-ca"}},
                       {PROTOCOL: "SSL", CAFILE: f"{TLS_DIR}/ca.crt"}, ("kafka-ca", ["ca.crt"])),
    "mutual tls": ({"securityProtocol": "SSL", "tls": {"existingSecret": "kafka-client", "clientCertificate": True}},
                   {PROTOCOL: "SSL", CAFILE: f"{TLS_DIR}/ca.crt", CERTFILE: f"{TLS_DIR}/tls.crt",
                    KEYFILE: f"{TLS_DIR}/tls.key"},
                   ("kafka-client", ["ca.crt", "tls.crt", "tls.key"])),
    "mutual tls, encrypted key, system CAs": (
        {"securityProtocol": "SSL", "tls": {"existingSecret": "kafka-client", "ca": False, "clientCertificate": True,
                                            "keyPasswordKey": "key-password"}},
        {PROTOCOL: "SSL", CERTFILE: f"{TLS_DIR}/tls.crt", KEYFILE: f"{TLS_DIR}/tls.key",
         "WEVENT_KAFKA_SSL_KEY_PASSWORD": ("kafka-client", "key-password")},
        ("kafka-client", ["tls.crt", "tls.key"])),
    "sasl_plaintext": ({"securityProtocol": "SASL_PLAINTEXT", "sasl": SASL},
                       {PROTOCOL: "SASL_PLAINTEXT", **SCRAM_512, **credentials_in(CHART_SECRET)}, None),
    "sasl_ssl, by default with a username": ({"sasl": SASL},
                                             {PROTOCOL: "SASL_SSL", **SCRAM_512, **credentials_in(CHART_SECRET)}, None),
    "sasl_ssl, custom CA, existing credentials": (
        {"securityProtocol": "SASL_SSL", "tls": {"existingSecret": "kafka-ca"},
         "sasl": {"username": "wevent", "existingSecret": "kafka-credentials", "mechanism": "SCRAM-SHA-256"}},
        {PROTOCOL: "SASL_SSL", "WEVENT_KAFKA_SASL_MECHANISM": "SCRAM-SHA-256", **credentials_in("kafka-credentials"),
         CAFILE: f"{TLS_DIR}/ca.crt"},
        ("kafka-ca", ["ca.crt"])),
}


OAUTHBEARER = {"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER", "sasl.oauthbearer.method": "oidc",
               "sasl.oauthbearer.token.endpoint.url": "https://id.example.com/oauth2/token",
               "sasl.oauthbearer.client.id": "wevent", "sasl.oauthbearer.client.secret": "s3cret"}

# Every value set the chart's documentation shows (values.yaml, helm/README.md): each must lint,
# render, and give objects Kubernetes' strict schemas accept.
VALUE_SETS = {
    "defaults": {"noiseKey": {"value": KEY}},
    "noise key from an existing Secret": {"noiseKey": {"existingSecret": "wevent-noise-key"}},
    **{f"kafka: {name}": {"noiseKey": {"value": KEY}, "kafka": kafka} for name, (kafka, _, _) in TLS_FORMS.items()},
    "kafka: OAUTHBEARER from properties": {"noiseKey": {"value": KEY}, "kafka": {"properties": OAUTHBEARER}},
    "kafka: properties from an existing Secret": {
        "noiseKey": {"existingSecret": "wevent-noise-key"},
        "kafka": {"securityProtocol": "SASL_SSL", "propertiesFile": {"existingSecret": "kafka-client-properties"}}},
    "every optional part": EVERYTHING,
    "names, digest, budget by percentage, existing service account": {
        "noiseKey": {"value": KEY}, "nameOverride": "dp", "fullnameOverride": "streams",
        "image": {"digest": "sha256:" + "ab" * 32}, "podDisruptionBudget": {"maxUnavailable": None, "minAvailable": "50%"},
        "serviceAccount": {"create": False, "name": "wevent-runner"}},
    "network policy with selectors and ports": {
        "noiseKey": {"value": KEY},
        "kafka": {"bootstrap": "kafka-0.kafka.kafka:9093,kafka-1.kafka.kafka:9093,kafka-2.kafka.kafka:9094"},
        "networkPolicy": {"enabled": True, "prometheus": [{"namespaceSelector": {}, "podSelector": {
            "matchLabels": {"app.kubernetes.io/name": "prometheus"}}}],
            "kafka": {"to": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kafka"}}}]},
            "extraIngress": [{"from": [{"ipBlock": {"cidr": "192.0.2.0/24"}}], "ports": [{"port": "web"}]}]}},
    "spread over zones and nodes, no budget": {
        "noiseKey": {"value": KEY}, "podDisruptionBudget": {"enabled": False},
        "topologySpreadConstraints": [
            {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule"},
            {"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "ScheduleAnyway",
             "labelSelector": {"matchLabels": {"app.kubernetes.io/component": "worker"}}}]},
}
