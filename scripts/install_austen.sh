#!/usr/bin/env bash
# Install Jane Austen's six novels (Debian's r-cran-janeaustenr, 1.6 MB) offline: the .deb is
# downloaded and extracted, never installed (installing it would pull R), under
# $TOKENGEO_DATA (default ~/.cache/tokengeo)/r-cran-janeaustenr; its R lazy-load database
# is then read by tokengeo.data.austen with the `rdata` package (installed here too).
# A copy already there is kept when it reads; a missing or damaged one is extracted afresh.
# Needs Debian's package lists (`apt-get update` once on a fresh machine; done here as root).
# Usage: bash scripts/install_austen.sh   (PY=path/to/python to choose the interpreter)
set -euo pipefail

cd "$(dirname "$0")/.."
PY="${PY:-}"
if [ -z "$PY" ]; then
    if [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=python3; fi
fi
dest="${TOKENGEO_DATA:-$HOME/.cache/tokengeo}/r-cran-janeaustenr"

extract() {
    local tmp
    tmp="$(mktemp -d)"
    if ! (cd "$tmp" && apt-get download -qq r-cran-janeaustenr >/dev/null 2>&1); then
        if [ "$(id -u)" = 0 ]; then
            apt-get update -qq
            (cd "$tmp" && apt-get download -qq r-cran-janeaustenr >/dev/null)
        else
            rm -rf "$tmp"
            echo "tokengeo: could not download r-cran-janeaustenr; run 'sudo apt-get update' first" >&2
            exit 1
        fi
    fi
    # extract beside the destination, then rename: an interrupted run leaves no half copy
    mkdir -p "$(dirname "$dest")"
    rm -rf "$dest.partial"
    dpkg-deb -x "$tmp"/r-cran-janeaustenr_*.deb "$dest.partial"
    rm -rf "$tmp" "$dest"
    mv "$dest.partial" "$dest"
}

check() {  # prints the novels' size; fails on a missing or damaged copy
    TOKENGEO_AUSTEN_DIR= PYTHONPATH="src${PYTHONPATH:+:$PYTHONPATH}" "$PY" -c \
        'from tokengeo.data.austen import read_novels; n = read_novels(); print(f"tokengeo: Jane Austen, {len(n)} novels, {sum(map(len, n.values())):,} characters")'
}

"$PY" -m pip install --quiet rdata
if ! check 2>/dev/null; then
    extract
    check
fi
