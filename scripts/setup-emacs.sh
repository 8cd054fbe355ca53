#!/usr/bin/env bash
# Installs Emacs >= 29 (for the eglot test, tests/lsp/test_lsp_eglot.py), idempotently: Debian
# bookworm's own Emacs is 28 (no built-in eglot), so this adds the bookworm-backports suite (on the
# mirror host the machine's Debian sources already use) and installs `emacs-nox` from it (Emacs 30,
# about 125 MB). Needs root only when something is missing; prints how long it took.
set -euo pipefail
start=$(date +%s)
say() { echo "setup-emacs: $*" >&2; }
emacs_major() { emacs --version 2>/dev/null | sed -n '1s/^GNU Emacs \([0-9]*\).*/\1/p'; }
if [ "$(emacs_major || true)" -ge 29 ] 2>/dev/null; then
  say "$(emacs --version | head -1) present"; exit 0
fi
if [ "$(id -u)" != 0 ]; then say "needs root for apt-get (Emacs >= 29 missing)"; exit 1; fi
list=/etc/apt/sources.list.d/bookworm-backports.list
if ! grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
  # the mirror of the existing Debian sources (deb822 "URIs:" or one-line "deb URL bookworm …")
  mirror=$(grep -rhsE '^URIs:.*/debian/?$' /etc/apt/sources.list.d/*.sources | head -1 | awk '{print $2}')
  [ -n "$mirror" ] || mirror=$(grep -rhsE '^deb .*/debian/? bookworm( |$)' /etc/apt/sources.list /etc/apt/sources.list.d/*.list | head -1 | awk '{print $2}')
  mirror=${mirror:-http://deb.debian.org/debian}
  say "adding $mirror bookworm-backports"
  echo "deb $mirror bookworm-backports main" > "$list"
fi
export DEBIAN_FRONTEND=noninteractive
apt-get -o DPkg::Lock::Timeout=600 update -qq >&2
apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends -t bookworm-backports emacs-nox >&2
[ "$(emacs_major)" -ge 29 ] || { say "emacs-nox from bookworm-backports is not >= 29: $(emacs --version | head -1)"; exit 1; }
say "$(emacs --version | head -1) ready in $(( $(date +%s) - start )) s"
