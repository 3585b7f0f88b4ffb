#!/usr/bin/env bash
# node-deps.sh installs what the tests run besides Go-built binaries, from the distribution's
# packages (Debian/Ubuntu), when they are missing: the container runtime containerd and runc
# (real-kubelet tests; its ctr imports the images they run), Debian's CA bundle (make image), SoftHSM2 (the PKCS#11 keystore backend), swtpm (the TPM backend
# against a separate TPM process) and OpenSSL's headers (the in-process TPM simulator of
# go-tpm-tools links libcrypto), systemd's tools (test/deploy verifies the server's unit) and
# PostgreSQL's server (the fleet's shared state, started by internal/pgtest in a test's own
# data directory; the package's postgres user runs it when the tests run as root). It needs root (or sudo) only when it has something to install;
# without either it prints the one command to run and fails: a missing HSM or TPM is a test
# failure, never a skip.
set -euo pipefail
missing=()
command -v containerd >/dev/null || missing+=(containerd)
command -v runc >/dev/null || missing+=(runc)
command -v ctr >/dev/null || missing+=(containerd)  # its client ctr imports the test images
[ -r /etc/ssl/certs/ca-certificates.crt ] || missing+=(ca-certificates)  # make image's CA bundle
command -v softhsm2-util >/dev/null || missing+=(softhsm2)
command -v swtpm >/dev/null || missing+=(swtpm)
command -v swtpm_setup >/dev/null || missing+=(swtpm-tools)
[ -e /usr/include/openssl/evp.h ] || missing+=(libssl-dev)
command -v systemd-analyze >/dev/null && command -v systemd-sysusers >/dev/null || missing+=(systemd)
compgen -G '/usr/lib/postgresql/*/bin/postgres' >/dev/null || missing+=(postgresql)  # the fleet's state tests (internal/pgtest)
[ ${#missing[@]} -eq 0 ] && exit 0
sudo=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "node-deps: ${missing[*]} missing; install them as root: apt-get install ${missing[*]}" >&2; exit 1; }
  sudo=(sudo -n)
fi
command -v apt-get >/dev/null || { echo "node-deps: ${missing[*]} missing and no apt-get: install them with your package manager" >&2; exit 1; }
echo "node-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null 2>&1 ||
  { "${sudo[@]}" apt-get update >/dev/null && "${sudo[@]}" apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null; } ||
  { echo "node-deps: could not install ${missing[*]}; run as root: apt-get install ${missing[*]}" >&2; exit 1; }
