#!/usr/bin/env bash
# Installs Debian's headless Chromium, which the report test renders the HTML report in.
# Idempotent: does nothing when `chromium` is already on the PATH.
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then exit 0; fi
if [[ "$(id -u)" != 0 ]]; then
    echo "error: chromium is missing; install it with: sudo apt-get install -y chromium" >&2
    exit 1
fi
echo "installing chromium (headless report test)" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends chromium >/dev/null
command -v chromium >/dev/null
