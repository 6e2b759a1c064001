#!/usr/bin/env bash
# Builds the pinned client tools the tests drive: helm (helm/go.mod) and a
# kubectl at the control plane's Kubernetes release (kubectl/go.mod). A fresh
# machine has neither, and a kubectl found on PATH could be any version.
#
# Same cache discipline as tests/controlplane/build.sh: each tool lands in
# ${XDG_CACHE_HOME:-~/.cache}/kai/tools/<name>-<version>-<hash>/, the hash
# covering everything that decides its bytes, so every clone on the machine
# shares one build and a second run does nothing.
#
#   bash tests/tools/build.sh [helm|kubectl ...]              build if needed; print each folder
#   bash tests/tools/build.sh --print-dir [helm|kubectl ...]  print each folder, build nothing
#
# With no names, both tools, helm first; one folder per line, in the order named.
set -euo pipefail
shopt -s nullglob # helm/ has no .go files of its own

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache_root="${XDG_CACHE_HOME:-$HOME/.cache}/kai/tools"

print_only=false
if [[ "${1:-}" == "--print-dir" ]]; then
    print_only=true
    shift
fi
names=("$@")
[[ ${#names[@]} -gt 0 ]] || names=(helm kubectl)
for name in "${names[@]}"; do
    case "$name" in
        helm | kubectl) ;;
        *) echo "build.sh: unknown tool '$name' (helm, kubectl)" >&2; exit 2 ;;
    esac
done

if ! command -v go >/dev/null 2>&1; then
    echo "build.sh: 'go' is not on PATH; install Go 1.26 or later" >&2
    exit 1
fi

module_version() { # prints the version go.mod $1 requires for module $2
    awk -v m="$2" '$1 == m && $2 ~ /^v/ { print $2; exit }' "$1"
}

export CGO_ENABLED=0
export GOFLAGS="-trimpath -mod=readonly -buildvcs=false"

# Sets version, package and ldflags for tool $1, stamping the version the way
# upstream's release builds do (otherwise `helm version` says v3.22 and
# `kubectl version` v0.0.0-master).
configure() {
    local mod="$here/$1/go.mod"
    case "$1" in
        helm)
            version="$(module_version "$mod" helm.sh/helm/v3)"
            package=helm.sh/helm/v3/cmd/helm
            # helm's Makefile: the Kubernetes version `helm template` and
            # `helm lint` assume is the one its client-go is from (v0.37 -> 1.37).
            local client_go k8s_minor
            client_go="$(module_version "$mod" k8s.io/client-go)"
            k8s_minor="${client_go#v0.}"
            k8s_minor="${k8s_minor%%.*}"
            ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$version"
            ldflags+=" -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
            for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
                ldflags+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$k8s_minor"
            done
            ;;
        kubectl)
            local kubectl_mod k8s_minor control_plane
            kubectl_mod="$(module_version "$mod" k8s.io/kubectl)" # v0.36.3
            version="v1.${kubectl_mod#v0.}"                       # v1.36.3
            control_plane="$(module_version "$here/../controlplane/go.mod" k8s.io/kubernetes)"
            if [[ "$version" != "$control_plane" ]]; then
                echo "build.sh: kubectl/go.mod pins k8s.io/kubectl $kubectl_mod but the" \
                    "control plane is $control_plane; pin v0.${control_plane#v1.}" >&2
                exit 1
            fi
            package=.
            k8s_minor="${version#v1.}"
            k8s_minor="${k8s_minor%%.*}"
            ldflags="-s -w"
            for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
                ldflags+=" -X $pkg.gitVersion=$version -X $pkg.gitMajor=1"
                ldflags+=" -X $pkg.gitMinor=$k8s_minor -X $pkg.gitTreeState=clean"
            done
            ;;
    esac
    local key_hash
    key_hash="$(
        {
            go env GOVERSION GOOS GOARCH
            echo "$package $GOFLAGS $ldflags CGO_ENABLED=$CGO_ENABLED"
            cd "$here/$1" && cat go.mod go.sum ./*.go
        } | sha256sum | cut -c1-16
    )"
    out="$cache_root/$1-$version-$key_hash"
}

build_tool() { # builds tool $1 into its cache folder unless it is there
    local name="$1" lock_fd staging start=$SECONDS
    mkdir -p "$cache_root"
    exec {lock_fd}>"$cache_root/.$name.lock"
    flock "$lock_fd" # another clone may be building the same tool right now
    if [[ -x "$out/$name" ]]; then
        exec {lock_fd}>&-
        return
    fi
    # Holding the lock, any staging folder left is from a build that was killed.
    rm -rf "$cache_root/.building-$name-"*
    staging="$(mktemp -d "$cache_root/.building-$name-XXXXXX")"
    trap 'rm -rf "$staging"' EXIT
    echo "build.sh: building $name $version" >&2
    (cd "$here/$name" && go build -ldflags "$ldflags" -o "$staging/$name" "$package")
    echo "build.sh: built $name in $((SECONDS - start)) s" >&2
    chmod 755 "$staging" # mktemp made it private; the program is not secret
    rm -rf "$out"        # an incomplete folder, e.g. the program deleted by hand
    mv "$staging" "$out"
    trap - EXIT
    exec {lock_fd}>&-
}

for name in "${names[@]}"; do
    configure "$name"
    $print_only || build_tool "$name"
    echo "$out"
done
