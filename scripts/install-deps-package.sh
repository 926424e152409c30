#!/bin/sh
# install-deps-package.sh installs what the packaging tests (internal/manpage, packaging/) run:
# groff (man pages), bash and zsh (completion), lintian and dpkg (the .deb), rpm (rpm -qip/-qlp of
# the .rpm), debootstrap (a clean Debian root to install the .deb into; the tree is cached under
# $CANTAL_TEST_CACHE or /var/cache/cantal-test), systemd-container (systemd-nspawn), podman and
# runc (the image), file (the binaries are static), systemd (systemd-analyze verify).
set -eu

. "$(dirname "$0")/apt-lib.sh"

need_pkg groff groff-base
need_pkg zsh zsh
need_pkg lintian lintian
need_pkg rpm rpm
need_pkg debootstrap debootstrap
need_pkg systemd-nspawn systemd-container
need_pkg podman podman
need_pkg runc runc
need_pkg file file
need_pkg systemd-analyze systemd
install_needed install-deps-package.sh groff zsh lintian rpm debootstrap systemd-nspawn podman runc file systemd-analyze
