#!/bin/sh
# Bad input for `scalecheck profile`: fills the scratch directory, reaches for the network,
# forks a thousand children, and never exits (the bound ends it).
dd if=/dev/zero of="${TMPDIR:-/tmp}/fill" bs=1M 2>&1 | tail -n 1
busybox wget -q -T 2 -O /dev/null http://192.0.2.1/ 2>&1 || echo "no network"
i=0
while [ $i -lt 1000 ]; do
	sleep 1000 &
	i=$((i + 1))
done
echo "forked $i"
sleep 100000
