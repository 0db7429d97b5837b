"""The Helm chart's ``values.schema.json``, generated in part from the workers' own rules::

    python -m wevent.stream.helm_schema helm/wevent/values.schema.json

rewrites, in place, the properties of the chart's schema named in :data:`GENERATED`:

- ``config``, from the tables the config loader checks with
  (:func:`~wevent.stream.config_schema.config_json_schema`), so the two cannot say different things;
- ``kafka``, whose protocols and SASL mechanisms are the settings' own (:mod:`.settings`), and the
  extra env and volumes, defined here (:func:`helm_values_json_schema`).

Every other property of the file (image, probes, networkPolicy, ...) is written by hand in the
file itself and kept as written; the file's top-level ``$comment`` says which is which. Every
object of the chart's own values refuses keys it does not list (``additionalProperties: false``);
a value that is a Kubernetes object passed through whole says so in its ``$comment``
(tests/deploy/test_helm_schema.py holds both rules, and the Kubernetes field lists, to account).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from .config_schema import config_json_schema
from .settings import SASL_MECHANISMS, SECURITY_PROTOCOLS

__all__ = ["GENERATED", "helm_values_json_schema", "helm_schema_text", "write_helm_schema"]


# Kubernetes' names of Secrets (DNS subdomains) and of their entries; empty means "not set".
_SECRET_NAME = {"type": "string", "maxLength": 253,
                "pattern": r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*)?$"}
_SECRET_KEY = {"type": "string", "maxLength": 253, "pattern": r"^[-._a-zA-Z0-9]*$"}


def _values(properties: dict[str, tuple[str, dict]], required: tuple[str, ...] = ()) -> dict:
    """An object of the chart's values with known keys only: a misspelt key (``securityprotocol``)
    would otherwise be ignored and leave the default in force."""
    out: dict[str, Any] = {"type": "object", "additionalProperties": False,
                           "properties": {k: {"description": doc, **schema} for k, (doc, schema) in properties.items()}}
    if required:
        out["required"] = list(required)
    return out


def _kubernetes_list(doc: str, kind: str, *required: str) -> dict:
    """A list of Kubernetes objects of ``kind`` (EnvVar, Volume, ...): the API server checks them
    whole; the schema checks that each is an object with its identifying fields."""
    item: dict[str, Any] = {"$comment": f"Kubernetes io.k8s.api.core.v1.{kind}, passed through whole", "type": "object"}
    if required:
        item |= {"required": list(required), "properties": {k: {"type": "string", "minLength": 1} for k in required}}
    return {"description": doc, "type": "array", "items": item}


# A Java properties file's line is ``name=value``: names without separators or spaces, values
# without line breaks or backslashes (escapes that readers of properties files treat differently)
# and without leading blanks (which they drop).
_PROPERTY_NAME = {"pattern": r"^[A-Za-z0-9][A-Za-z0-9._-]*$"}
_PROPERTY_VALUE = {"type": "string", "pattern": r"^([^\s\\][^\\\r\n]*)?$"}


def helm_values_json_schema() -> dict:
    """JSON Schema (draft-07) of the chart's values defined here, by value name."""
    kafka = _values({
        "bootstrap": ("bootstrap servers, host:port[,host:port...]",
                      {"type": "string", "pattern": r"^[^,:\s]+:[0-9]+(,[^,:\s]+:[0-9]+)*$"}),
        "securityProtocol": ("WEVENT_KAFKA_SECURITY_PROTOCOL; empty: SASL_SSL with sasl.username, else PLAINTEXT",
                             {"enum": ["", *SECURITY_PROTOCOLS]}),
        "sasl": ("SASL credentials (protocols SASL_PLAINTEXT and SASL_SSL)", _values({
            "mechanism": ("WEVENT_KAFKA_SASL_MECHANISM", {"enum": list(SASL_MECHANISMS)}),
            "username": ("the user; empty: no SASL", {"type": "string"}),
            "password": ("the password, stored in the chart's Secret", {"type": "string"}),
            "existingSecret": ("a Secret with the entries kafka-username and kafka-password", _SECRET_NAME),
        })),
        "tls": ("TLS files (protocols SSL and SASL_SSL), mounted from an existing Secret", _values({
            "existingSecret": ("a Secret with ca.crt and/or tls.crt and tls.key", _SECRET_NAME),
            "ca": ("mount ca.crt, the brokers' CA bundle (WEVENT_KAFKA_SSL_CAFILE)", {"type": "boolean"}),
            "clientCertificate": ("mount tls.crt and tls.key for mutual TLS (WEVENT_KAFKA_SSL_CERTFILE, "
                                  "WEVENT_KAFKA_SSL_KEYFILE)", {"type": "boolean"}),
            "keyPasswordKey": ("the entry of existingSecret with tls.key's password (WEVENT_KAFKA_SSL_KEY_PASSWORD)",
                               _SECRET_KEY),
        })),
        "properties": ("any other client property by name (librdkafka or Java style), as a string, written into "
                       "the file WEVENT_KAFKA_PROPERTIES_FILE names", {
                           "type": "object", "propertyNames": _PROPERTY_NAME,
                           "properties": {"security.protocol": {
                               "enum": [*SECURITY_PROTOCOLS, *(p.lower() for p in SECURITY_PROTOCOLS)]}},
                           "additionalProperties": _PROPERTY_VALUE}),
        "propertiesFile": ("or the properties file from an existing Secret", _values({
            "existingSecret": ("a Secret holding a Java properties file", _SECRET_NAME),
            "key": ("the file's entry in existingSecret", {**_SECRET_KEY, "minLength": 1}),
        })),
    }, required=("bootstrap",))
    return {
        "kafka": {"description": "How the workers reach Kafka (generated by pipeline/stream/helm_schema.py: "
                                 "do not edit)", **kafka},
        "extraEnv": _kubernetes_list("extra environment variables of the worker (EnvVar)", "EnvVar", "name"),
        "extraEnvFrom": _kubernetes_list("extra sources of environment variables (EnvFromSource)", "EnvFromSource"),
        "extraVolumes": _kubernetes_list("extra volumes of the pod (Volume)", "Volume", "name"),
        "extraVolumeMounts": _kubernetes_list("extra mounts of the worker (VolumeMount)", "VolumeMount", "name",
                                              "mountPath"),
    }


# The chart's values whose schema is generated here; the rest of values.schema.json is written by hand.
GENERATED = ("config", *helm_values_json_schema())


def helm_schema_text(current: str) -> str:
    """The chart's values.schema.json text with its generated properties made afresh."""
    schema = json.loads(current)
    schema = {"$schema": schema["$schema"], "$comment": (
        "Generated in part by pipeline/stream/helm_schema.py (python -m wevent.stream.helm_schema "
        f"helm/wevent/values.schema.json): the properties {', '.join(GENERATED)} are made there from the "
        "workers' own config and Kafka settings (do not edit them here); every other property is written "
        "by hand in this file. Objects refuse keys they do not list; a $comment naming a Kubernetes type "
        "marks an object passed through to Kubernetes, which checks it."), **schema}
    schema["properties"]["config"] = {
        "description": "The stream configuration (generated by pipeline/stream/helm_schema.py: do not edit)",
        **config_json_schema(),
    }
    schema["properties"].update(helm_values_json_schema())
    return json.dumps(schema, indent=2) + "\n"


def write_helm_schema(path: str | Path) -> None:
    path = Path(path)
    path.write_text(helm_schema_text(path.read_text()))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m wevent.stream.helm_schema helm/wevent/values.schema.json")
    write_helm_schema(sys.argv[1])
