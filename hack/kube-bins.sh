#!/usr/bin/env bash
# kube-bins.sh VERSION [BINARY...] builds the Kubernetes binaries pinned by
# hack/kube/VERSION/go.mod into .cache/kube/VERSION/ (etcd and kube-apiserver by default;
# kube-controller-manager, kube-scheduler and kubelet on request). Builds are incremental: Go's build cache makes a second
# run take seconds.
set -euo pipefail
version=${1:-v1.37.1}
shift || true
bins=("$@")
[ ${#bins[@]} -gt 0 ] || bins=(etcd kube-apiserver)
root=$(cd "$(dirname "$0")/.." && pwd)
mod="$root/hack/kube/$version"
out="$root/.cache/kube/$version"
[ -f "$mod/go.mod" ] || { echo "kube-bins: no tools module for $version (run hack/kube-module.sh)" >&2; exit 1; }
mkdir -p "$out"
cd "$mod"
for b in "${bins[@]}"; do
  case "$b" in
    etcd) pkg=go.etcd.io/etcd/server/v3 ;;
    kube-apiserver|kube-controller-manager|kube-scheduler|kubelet) pkg=k8s.io/kubernetes/cmd/$b ;;
    *) echo "kube-bins: unknown binary $b" >&2; exit 1 ;;
  esac
  if [ -x "$out/$b" ] && [ "$out/$b" -nt go.mod ] && [ "$out/$b" -nt go.sum ]; then
    continue
  fi
  echo "kube-bins: building $b $version (first build takes several minutes)" >&2
  # A temporary name of its own, so that two builds at once (make demo beside make test) never
  # move each other's half-written file.
  tmp=$(mktemp "$out/$b.XXXXXX")
  go build -trimpath -o "$tmp" "$pkg" || { rm -f "$tmp"; exit 1; }
  mv "$tmp" "$out/$b"
done
