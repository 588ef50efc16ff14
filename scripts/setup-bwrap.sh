#!/usr/bin/env bash
# Installs bubblewrap, the sandbox every worker that runs untrusted code starts in (see
# python/ksmith/confine and [sandbox] in configs/default.toml). Idempotent.
#
#   scripts/setup-bwrap.sh                  install: nothing when a working `bwrap` is found;
#                                           Debian's package as root; else a carried .deb
#   scripts/setup-bwrap.sh --download DIR   put the .deb (from this machine's package registry)
#                                           in DIR, to carry to a machine that has none
#
# A carried .deb (in $KSMITH_BWRAP_DEBS, default .debs/ in the checkout) is unpacked, without
# root, under ~/.cache/ksmith/bwrap, where the sandbox launcher looks after `bwrap` on PATH.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
unpacked="$HOME/.cache/ksmith/bwrap"

if [[ "${1:-}" == "--download" ]]; then
    dir="${2:?usage: setup-bwrap.sh --download DIR}"
    mkdir -p "$dir"
    (cd "$dir" && apt-get download bubblewrap)
    ls "$dir"/bubblewrap_*.deb
    exit 0
fi

works() { "$1" --ro-bind / / --unshare-user --unshare-pid --proc /proc -- true 2>/dev/null; }

if command -v bwrap >/dev/null 2>&1; then
    works "$(command -v bwrap)" || echo "warning: bwrap is installed but cannot create a sandbox here (user namespaces off?)" >&2
    exit 0
fi
if [[ -x "$unpacked/usr/bin/bwrap" ]] && works "$unpacked/usr/bin/bwrap"; then
    exit 0
fi
if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null 2>&1 && apt-get install -y -qq --no-install-recommends bubblewrap >/dev/null 2>&1; then
    exit 0
fi
if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null 2>&1; then
    echo "installing bubblewrap (the sandbox for untrusted code)" >&2
    export DEBIAN_FRONTEND=noninteractive
    if apt-get update -qq && apt-get install -y -qq --no-install-recommends bubblewrap >/dev/null; then
        command -v bwrap >/dev/null && exit 0
    fi
fi
debs="${KSMITH_BWRAP_DEBS:-$here/.debs}"
deb="$(ls "$debs"/bubblewrap_*.deb 2>/dev/null | head -n 1 || true)"
if [[ -n "$deb" ]]; then
    rm -rf "$unpacked"
    mkdir -p "$unpacked"
    dpkg-deb -x "$deb" "$unpacked"
    if works "$unpacked/usr/bin/bwrap"; then
        echo "bubblewrap unpacked from $deb into $unpacked" >&2
        exit 0
    fi
    echo "error: $unpacked/usr/bin/bwrap (from $deb) does not run here" >&2
    exit 1
fi
echo "error: bubblewrap is missing. Install it (sudo apt-get install -y bubblewrap), or carry its" \
    ".deb here (scripts/setup-bwrap.sh --download .debs on a machine with a package registry)." \
    "Without it, [sandbox] require = true refuses to run untrusted code; require = false runs it" \
    "without the filesystem sandbox and warns." >&2
exit 1
