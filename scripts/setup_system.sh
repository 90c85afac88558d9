#!/usr/bin/env bash
# Install what tokengeo reads from the system: offline data sets (README "Data") and
# Debian's chromium (renders the reproduction report in tests).
# As root: installs missing Debian packages. Otherwise: prints the command to run.
set -euo pipefail

missing=()
[ -d /usr/share/datasets/fashion-mnist ] || missing+=(dataset-fashion-mnist)
[ -d /usr/share/games/fortunes ] || missing+=(fortunes)
command -v chromium >/dev/null || missing+=(chromium)

if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        echo "tokengeo: installing Debian packages: ${missing[*]}"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    else
        echo "tokengeo: optional system packages missing; install them with:"
        echo "    sudo apt-get update && sudo apt-get install -y ${missing[*]}"
    fi
fi

# Python 3.11 documentation sources (reST prose): extracted, never installed, because
# installing python3.11-doc would upgrade the system Python.
docs_dir="${TOKENGEO_DATA:-$HOME/.cache/tokengeo}/python3.11-doc"
if [ ! -d "$docs_dir/usr/share/doc/python3.11/html/_sources" ]; then
    if command -v apt-get >/dev/null; then
        tmp="$(mktemp -d)"
        if (cd "$tmp" && apt-get download -qq python3.11-doc >/dev/null 2>&1); then
            mkdir -p "$docs_dir"
            dpkg -x "$tmp"/python3.11-doc_*.deb "$docs_dir"
            echo "tokengeo: Python docs extracted to $docs_dir"
        else
            echo "tokengeo: could not download python3.11-doc (run 'apt-get update' first); the python-docs corpus stays unavailable"
        fi
        rm -rf "$tmp"
    fi
fi
