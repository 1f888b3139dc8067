#!/usr/bin/env bash
# Debian packages the test suite and benchmarks need, installed only when missing.
# Needs root (CI and the dev machines run as root); prints what it would install otherwise.
set -euo pipefail
want=()
command -v chromium >/dev/null || want+=(chromium)
command -v fio >/dev/null || want+=(fio)
for pkg in "$@"; do
  dpkg -s "$pkg" >/dev/null 2>&1 || want+=("$pkg")
done
[ ${#want[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "movebench: please install these Debian packages (as root): ${want[*]}" >&2
  exit 1
fi
echo "movebench: installing ${want[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${want[@]}" >/dev/null
