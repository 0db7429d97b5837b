#!/bin/sh
# Rewrites docker/requirements.lock with the exact versions pip resolves for '.[stream]' on this
# machine (CPython 3.11, Linux x86-64, like the image's base). Run after changing pyproject.toml.
set -eu
cd "$(dirname "$0")/.."
python="${PYTHON:-python3}"
"$python" -m pip install --dry-run --ignore-installed --quiet --disable-pip-version-check --report - '.[stream]' |
"$python" -c '
import json, sys
report = json.load(sys.stdin)
pins = sorted((i["metadata"]["name"], i["metadata"]["version"]) for i in report["install"] if not i.get("is_direct"))
print("# Exact versions of what `pip install .[stream]` resolves (CPython 3.11, Linux x86-64), installed")
print("# with --no-deps into the image before the project. Written by docker/update-lock.sh: do not edit.")
print("\n".join(f"{name}=={version}" for name, version in pins))
' > docker/requirements.lock.new
mv docker/requirements.lock.new docker/requirements.lock
