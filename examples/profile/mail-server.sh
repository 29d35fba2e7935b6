#!/bin/sh
# A mail server under a load generator for `scalecheck profile`: postfix's smtp-sink (an SMTP
# server that accepts and drops mail) on 127.0.0.1, and postfix's smtp-source sending it
# MESSAGES messages over SESSIONS sessions at once. Usage: mail-server.sh [MESSAGES]
# [SESSIONS] (default 500 2).
set -e
messages=${1:-500}
sessions=${2:-2}
port=${PORT:-2525}
smtp-sink -u "${SINK_USER:-nobody}" "127.0.0.1:$port" 100 &
sink=$!
trap 'kill $sink 2>/dev/null' EXIT
sleep 0.5
smtp-source -l 512 -m "$messages" -s "$sessions" "127.0.0.1:$port"
# smtp-source stops at its first failure: here every message was sent
echo "completed: $messages messages"
