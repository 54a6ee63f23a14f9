#!/bin/sh
# docker/base.sh — makes the Dockerfile's base image (debian:12-slim) without an image
# registry: debootstrap a minimal Debian 12 root from the apt mirror this machine already
# uses and `docker import` it under that tag. Does nothing when the image exists.
#
#   sh docker/base.sh [TAG]          (default debian:12-slim; needs root: debootstrap)
#
# Variables: DEBIAN_MIRROR (default: the first deb.debian.org-like URI of
# /etc/apt/sources.list*, else http://deb.debian.org/debian).
set -eu
tag=${1:-debian:12-slim}
if docker image inspect "$tag" >/dev/null 2>&1; then
    echo "base: $tag exists"
    exit 0
fi
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO=sudo
command -v debootstrap >/dev/null ||
    { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq \
        --no-install-recommends debootstrap >&2; }
if [ -z "${DEBIAN_MIRROR:-}" ]; then
    # the main archive of this machine's sources (one-line or deb822 format), not -security
    DEBIAN_MIRROR=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list \
        /etc/apt/sources.list.d/*.sources 2>/dev/null |
        grep -oE 'https?://[^ ]*/debian/?( |$)' | head -n 1 | tr -d ' ')
    DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
fi
rootfs=$(mktemp -d /tmp/cellcast-rootfs.XXXXXX)
trap '$SUDO rm -rf "$rootfs"' EXIT
echo "base: debootstrap bookworm from $DEBIAN_MIRROR" >&2
$SUDO debootstrap --variant=minbase bookworm "$rootfs" "$DEBIAN_MIRROR" >/tmp/cellcast-debootstrap.log 2>&1 ||
    { tail -n 20 /tmp/cellcast-debootstrap.log >&2; exit 1; }
# slim, as the registry's -slim: no apt lists or caches, docs, man pages or translations
$SUDO rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin \
    "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* \
    "$rootfs"/usr/share/info/* "$rootfs"/var/log/*.log "$rootfs"/var/cache/debconf/*-old
$SUDO find "$rootfs"/usr/share/locale -mindepth 1 -maxdepth 1 ! -name locale.alias \
    -exec rm -rf {} +
# and stays so: apt keeps no .deb files or translations, dpkg installs no docs (the
# registry's debian:*-slim configuration)
$SUDO sh -c "cat > '$rootfs/etc/apt/apt.conf.d/docker-clean'" <<'CFG'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
Acquire::Languages "none";
CFG
$SUDO sh -c "cat > '$rootfs/etc/dpkg/dpkg.cfg.d/docker-slim'" <<'CFG'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
path-exclude /usr/share/lintian/*
CFG
$SUDO tar -C "$rootfs" -c . | docker import -c 'CMD ["bash"]' - "$tag" >/dev/null
echo "base: imported $tag ($(docker image inspect -f '{{.Size}}' "$tag") bytes)"
