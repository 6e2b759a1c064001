#!/usr/bin/env bash
# Builds kai's container image without Docker Hub or a Docker engine.
#
# The base is Debian bookworm's own python3 (3.11), made with mmdebstrap from the Debian
# mirror, imported into podman, and the repository's Dockerfile is built on it with
# `podman build --build-arg BASE=...`: the same Dockerfile `docker build` uses with Docker
# Hub's python image. The base is cached outside the checkout under a hash of everything
# that decides its contents (as tests/controlplane/build.sh caches the control plane), and
# the image is tagged with a hash of its build context, so a second run builds nothing.
#
#   bash image/build.sh              build if needed; print the image's test tag
#   bash image/build.sh --print-ref  print that tag for this checkout, build nothing
#
# Tags: kai-scheduler:<version> (what manifests/deployment.yaml names) and
# kai-scheduler:<version>-<context hash> (what tests/integration/test_image.py runs, so a
# test never runs an image built from other sources, e.g. by another clone on the machine).
#
# Needs podman, mmdebstrap and runc; as root, missing ones are installed with apt-get.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
cache_root="${XDG_CACHE_HOME:-$HOME/.cache}/kai/image"
export LC_ALL=C # sort order, and so hashes, must not depend on the locale

version="$(awk -F'"' '$1 ~ /^version *= */ { print $2; exit }' "$repo/pyproject.toml")"
suite=bookworm
# python3-venv makes the venv (with pip, for the build stage); ca-certificates lets pip and
# the scheduler verify TLS; the C++ runtime is what the numpy and OR-Tools wheels link to
# (Docker Hub's slim images have it because apt needs it; this base has no apt). Security
# updates go in too, as Docker Hub's base has them.
packages=python3,python3-venv,ca-certificates,libstdc++6
mirrors=(
    "deb http://deb.debian.org/debian $suite main"
    "deb http://deb.debian.org/debian $suite-updates main"
    "deb http://deb.debian.org/debian-security $suite-security main"
)
# Merged /usr set up as debootstrap (and so Debian's own images) does, with usr-is-merged:
# otherwise apt picks the usrmerge package, which brings 50 MB of perl.
# No docs, man pages or translations (as Debian's slim images), but keep the licences.
mm_opts=(
    --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr
    '--dpkgopt=path-exclude=/usr/share/doc/*'
    '--dpkgopt=path-include=/usr/share/doc/*/copyright'
    '--dpkgopt=path-exclude=/usr/share/man/*'
    '--dpkgopt=path-exclude=/usr/share/info/*'
    '--dpkgopt=path-exclude=/usr/share/locale/*'
    '--dpkgopt=path-include=/usr/share/locale/locale.alias'
)
# crun, podman's default on Debian, cannot run containers on a cgroup v1 "hybrid" host
# ("cgroups in hybrid mode not supported"); runc can, on v1 and v2 alike.
podman=(podman --runtime runc)
# Without --ulimit, podman asks for nofile and nproc of 1048576 and fails with EPERM where the
# hard limit is lower (e.g. a VM's 20000); these are plenty for pip and the scheduler.
run_opts=(--network host --ulimit nofile=4096:4096 --ulimit nproc=4096:4096)
# pip in the build trusts what the host's pip trusts, e.g. an egress proxy's own CA, which
# Debian's ca-certificates in the base cannot know. Mounted for the RUN steps only.
host_ca="${PIP_CERT:-${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}}"
if [[ -s "$host_ca" ]]; then
    run_opts+=(--volume "$(realpath "$host_ca"):/run/host-ca.crt:ro" --build-arg PIP_CERT=/run/host-ca.crt)
fi

context_hash() { # what decides the image: its Dockerfile, base and build context
    {
        echo "$base_ref"
        cd "$repo"
        cat Dockerfile .dockerignore pyproject.toml README.md
        find kai -type f ! -path '*/__pycache__/*' ! -name '*.pyc' -print0 | sort -z \
            | xargs -0 sha256sum
    } | sha256sum | cut -c1-12
}

base_key="$(
    {
        echo "$suite $packages ${mirrors[*]} ${mm_opts[*]}"
        dpkg --print-architecture 2>/dev/null || uname -m
    } | sha256sum | cut -c1-12
)"
base_tar="$cache_root/debian-$suite-python3-$base_key.tar"
base_ref="localhost/kai-base:$suite-$base_key"
image="localhost/kai-scheduler:$version"
test_ref="$image-$(context_hash)"

if [[ "${1:-}" == "--print-ref" ]]; then
    echo "$test_ref"
    exit 0
fi

have() { command -v "$1" >/dev/null 2>&1 || [[ -x "/usr/sbin/$1" ]]; }
missing=()
for tool in podman mmdebstrap runc; do
    have "$tool" || missing+=("$tool")
done
if ((${#missing[@]})); then
    if [[ "$(id -u)" != 0 ]] || ! have apt-get; then
        echo "image/build.sh: missing ${missing[*]}; install them:" \
            "sudo apt-get install -y ${missing[*]}" >&2
        exit 1
    fi
    echo "image/build.sh: installing ${missing[*]} with apt-get" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "${missing[@]}" >&2
fi

mkdir -p "$cache_root"
exec 9>"$cache_root/.lock"
flock 9 # another clone may be building the same base or image right now

if ! "${podman[@]}" image exists "$base_ref"; then
    if [[ ! -s "$base_tar" ]]; then
        start=$SECONDS
        echo "image/build.sh: making the $suite base with mmdebstrap ($packages)" >&2
        staging="$base_tar.partial"
        trap 'rm -f "$staging"' EXIT
        mmdebstrap --variant=essential --include="$packages" "${mm_opts[@]}" \
            --format=tar "$suite" "$staging" "${mirrors[@]}" </dev/null
        mv "$staging" "$base_tar"
        trap - EXIT
        echo "image/build.sh: made the base in $((SECONDS - start)) s" >&2
    fi
    "${podman[@]}" import --quiet "$base_tar" "$base_ref" >/dev/null
fi

if ! "${podman[@]}" image exists "$test_ref"; then
    start=$SECONDS
    echo "image/build.sh: building $test_ref on $base_ref" >&2
    "${podman[@]}" build "${run_opts[@]}" --build-arg "BASE=$base_ref" \
        --file "$repo/Dockerfile" --tag "$test_ref" "$repo" >&2
    echo "image/build.sh: built the image in $((SECONDS - start)) s" >&2
fi
"${podman[@]}" tag "$test_ref" "$image"
size="$("${podman[@]}" image inspect --format '{{.Size}}' "$test_ref")"
echo "image/build.sh: $image is $((size / 1000000)) MB" >&2
echo "$test_ref"
