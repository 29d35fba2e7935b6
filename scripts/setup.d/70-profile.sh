#!/usr/bin/env bash
# The programs `scalecheck profile`'s recipes run in the guest (docs/profile.md): a web
# server and its client (lighttpd, ab), a mail sink and its load generator (postfix's
# smtp-sink and smtp-source), and kmod, whose modprobe finds the guest's 9p modules.
set -euo pipefail
cd "$(dirname "$0")/../.."

source scripts/lib/apt.sh
ensure_packages kmod lighttpd apache2-utils postfix
