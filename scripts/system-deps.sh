#!/usr/bin/env bash
# Debian packages the test suite and benchmarks need, installed only when missing.
# Needs root (CI and the dev machines run as root); prints what it would install otherwise.
# --campaign: only what the default campaign uses (fio, calibration's bound for io's posix points); without
# root that is a note, not a failure: the campaign then runs without that bound and says so.
set -euo pipefail
want=()
campaign=0
if [ "${1:-}" = "--campaign" ]; then
  campaign=1
  shift
fi
[ $campaign -eq 1 ] || command -v chromium >/dev/null || want+=(chromium)
command -v fio >/dev/null || want+=(fio)
for pkg in "$@"; do
  dpkg -s "$pkg" >/dev/null 2>&1 || want+=("$pkg")
done
[ ${#want[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "movebench: please install these Debian packages (as root): ${want[*]}" >&2
  [ $campaign -eq 1 ] && exit 0
  exit 1
fi
echo "movebench: installing ${want[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${want[@]}" >/dev/null
