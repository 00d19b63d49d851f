#!/bin/sh
# Runs node's test runner over the files named, as `npm test` and `npm run test:smoke` do. The
# report is spec on a terminal and TAP otherwise (a log, CI, suite-under-load read TAP's
# "# pass" / "not ok" lines), as Node.js 20 chose; Node.js 23 and newer print spec everywhere.
reporter=tap
[ -t 1 ] && reporter=spec
exec node --import tsx --test --test-reporter="$reporter" --test-concurrency=2 --test-timeout=300000 "$@"
