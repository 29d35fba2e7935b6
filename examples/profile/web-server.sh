#!/bin/sh
# A web server under a loopback client for `scalecheck profile`: lighttpd serving one small
# page on 127.0.0.1, ab fetching it REQUESTS times, CONCURRENCY at once. Everything lives in
# the scratch directory. Says "completed: N requests" (those that did not fail).
# Usage: web-server.sh [REQUESTS] [CONCURRENCY] (default 2000 2).
set -e
requests=${1:-2000}
concurrency=${2:-2}
work=${TMPDIR:-/tmp}/web-server
port=${PORT:-8080}
mkdir -p "$work/www"
echo "<html><body>scalecheck</body></html>" > "$work/www/index.html"
cat > "$work/lighttpd.conf" <<CONF
server.document-root = "$work/www"
server.bind = "127.0.0.1"
server.port = $port
server.errorlog = "$work/error.log"
index-file.names = ("index.html")
mimetype.assign = (".html" => "text/html")
CONF
lighttpd -D -f "$work/lighttpd.conf" &
server=$!
trap 'kill $server 2>/dev/null' EXIT
# Until lighttpd listens (state 0A in /proc/net/tcp): cheaper than a client's tries.
listening=$(printf '0100007F:%04X 00000000:0000 0A' "$port")
i=0
until grep -q "$listening" /proc/net/tcp; do
	i=$((i + 1))
	[ $i -lt 300 ] || { echo "lighttpd did not start" >&2; exit 1; }
	sleep 0.1
done
ab -q -n "$requests" -c "$concurrency" "http://127.0.0.1:$port/" > "$work/ab.txt"
grep -E "^(Complete|Failed|Requests per)" "$work/ab.txt"
# the requests that succeeded, for scalecheck profile's figures per request
awk '/^Complete requests/ { done = $3 } /^Failed requests/ { failed = $3 }
	END { print "completed: " done - failed " requests" }' "$work/ab.txt"
