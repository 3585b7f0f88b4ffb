#!/usr/bin/env bash
# node-deps.sh installs what the real-kubelet tests run besides Go-built binaries: the
# container runtime containerd and runc, from the distribution's packages (Debian/Ubuntu),
# when they are missing. It needs root (or sudo) only when it has something to install.
set -euo pipefail
missing=()
command -v containerd >/dev/null || missing+=(containerd)
command -v runc >/dev/null || missing+=(runc)
[ ${#missing[@]} -eq 0 ] && exit 0
sudo=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "node-deps: ${missing[*]} missing; install them as root (apt-get install ${missing[*]})" >&2; exit 1; }
  sudo=(sudo)
fi
command -v apt-get >/dev/null || { echo "node-deps: ${missing[*]} missing and no apt-get: install them with your package manager" >&2; exit 1; }
echo "node-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null 2>&1 ||
  { "${sudo[@]}" apt-get update >/dev/null && "${sudo[@]}" apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null; }
