"""JSON Schemas (draft 2020-12) of the messages that programs other than wevent read or write.

One file per message, shipped with the package (``<name>.schema.json`` beside this module), for
producers and consumers in any language:

* ``release``: ``releases`` (and the lines of a release log);
* ``audit``: ``audit``;
* ``report``: the JSON form of ``reports``, a report or a watermark;
* ``ldp-request`` and ``ldp-reports``: the JSON header of the signed binary envelopes of
  ``ldp.requests`` and ``ldp.reports``, whose framing and signature each schema's description
  spells out;
* ``deadletter``: ``deadletter``.

Every message carries ``version`` (a message without one is version 1); readers ignore fields
they do not know, so the schemas allow additional properties.

>>> load(TOPIC_SCHEMAS["releases"])["title"]
'wevent release'
"""

from __future__ import annotations

import json
from importlib.resources import files

from ..topics import AUDIT, DEAD_LETTERS, LDP_REPORTS, LDP_REQUESTS, RELEASES, REPORTS

__all__ = ["TOPIC_SCHEMAS", "load"]

TOPIC_SCHEMAS = {RELEASES: "release", AUDIT: "audit", REPORTS: "report", LDP_REQUESTS: "ldp-request",
                 LDP_REPORTS: "ldp-reports", DEAD_LETTERS: "deadletter"}


def load(name: str) -> dict:
    """The schema ``name`` (a value of :data:`TOPIC_SCHEMAS`) as a dict."""
    return json.loads(files(__name__).joinpath(f"{name}.schema.json").read_text(encoding="utf-8"))
