#!/usr/bin/env bash
# Builds the pinned upstream control plane (etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler) that the integration tests run.
#
# The programs come from the Go module proxy at the versions in go.mod/go.sum
# and land in a cache folder outside the checkout, named after a hash of
# everything that decides their bytes, so every clone on the machine shares
# one build and a second run does nothing.
#
#   bash tests/controlplane/build.sh              build if needed; print the folder
#   bash tests/controlplane/build.sh --print-dir  print the folder, build nothing
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache_root="${XDG_CACHE_HOME:-$HOME/.cache}/kai/controlplane"
core=(etcd kube-apiserver kube-controller-manager)
extra=(kube-scheduler)

if ! command -v go >/dev/null 2>&1; then
    echo "build.sh: 'go' is not on PATH; install Go 1.26 or later" >&2
    exit 1
fi

module_version() { # prints the version go.mod requires for module $1
    awk -v m="$1" '$1 == m && $2 ~ /^v/ { print $2; exit }' "$here/go.mod"
}
k8s_version="$(module_version k8s.io/kubernetes)"
etcd_version="$(module_version go.etcd.io/etcd/server/v3)"
k8s_minor="${k8s_version#v1.}"
k8s_minor="${k8s_minor%%.*}"

# Upstream's release builds stamp the version the same way; without it the
# programs report v0.0.0-master.
version_pkgs=(k8s.io/component-base/version k8s.io/client-go/pkg/version)
ldflags="-s -w"
for pkg in "${version_pkgs[@]}"; do
    ldflags+=" -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=1"
    ldflags+=" -X $pkg.gitMinor=$k8s_minor -X $pkg.gitTreeState=clean"
done
export CGO_ENABLED=0
export GOFLAGS="-trimpath -mod=readonly -buildvcs=false"

key_hash="$(
    {
        go env GOVERSION GOOS GOARCH
        echo "$GOFLAGS $ldflags CGO_ENABLED=$CGO_ENABLED"
        cd "$here" && cat go.mod go.sum cmd/*/main.go
    } | sha256sum | cut -c1-16
)"
out="$cache_root/k8s-$k8s_version-etcd-$etcd_version-$key_hash"

if [[ "${1:-}" == "--print-dir" ]]; then
    echo "$out"
    exit 0
fi

mkdir -p "$cache_root"
exec 9>"$cache_root/.lock"
flock 9 # another clone may be building the same key right now

if [[ -x "$out/${extra[-1]}" ]]; then
    echo "$out"
    exit 0
fi

# Holding the lock, any staging folder left is from a build that was killed.
rm -rf "$cache_root"/.building-*
staging="$(mktemp -d "$cache_root/.building-XXXXXX")"
trap 'rm -rf "$staging"' EXIT

build() { # builds the named cmd/ programs into $staging and reports the time
    local start=$SECONDS pkgs=()
    for name in "$@"; do pkgs+=("./cmd/$name"); done
    echo "build.sh: building $* ($k8s_version, etcd $etcd_version)" >&2
    (cd "$here" && go build -ldflags "$ldflags" -o "$staging/" "${pkgs[@]}")
    echo "build.sh: built $* in $((SECONDS - start)) s" >&2
}
build "${core[@]}"
build "${extra[@]}"

chmod 755 "$staging" # mktemp made it private; the programs are not secret
rm -rf "$out"          # an incomplete folder, e.g. a program deleted by hand
mv "$staging" "$out"
trap - EXIT
echo "$out"
