#!/bin/sh
# Runs node's test runner over the files named, as `npm test` and `npm run test:smoke` do. The
# report is spec on a terminal and TAP otherwise (a log, CI, suite-under-load read TAP's
# "# pass" / "not ok" lines), as Node.js 20 chose; Node.js 23 and newer print spec everywhere.
# After the run, scripts/test-failures.mjs lists the failed tests with their files on stderr.
reporter=tap
[ -t 1 ] && reporter=spec
here=$(cd "$(dirname "$0")" && pwd)
exec node --import tsx --test --test-reporter="$reporter" --test-reporter-destination=stdout \
  --test-reporter="$here/test-failures.mjs" --test-reporter-destination=stderr \
  --test-concurrency=2 --test-timeout=300000 "$@"
