#!/bin/sh
# Runs node's test runner over the files named, as `npm test` and `npm run test:smoke` do. The
# report is spec on a terminal and TAP otherwise (a log, CI, suite-under-load read TAP's
# "# pass" / "not ok" lines), as Node.js 20 chose; Node.js 23 and newer print spec everywhere.
# After the run, scripts/test-failures.mjs lists the failed tests with their files on stderr.
reporter=tap
[ -t 1 ] && reporter=spec
here=$(cd "$(dirname "$0")" && pwd)
# --test-global-setup (the system tier's shared Temporal server) needs Node.js 24; an older runner
# goes without it, and each test file starts a server of its own.
if ! node --help | grep -q -- --test-global-setup; then
  for a; do
    shift
    case $a in --test-global-setup=*) ;; *) set -- "$@" "$a" ;; esac
  done
fi
exec node --import tsx --test --test-reporter="$reporter" --test-reporter-destination=stdout \
  --test-reporter="$here/test-failures.mjs" --test-reporter-destination=stderr \
  --test-concurrency=2 --test-timeout=300000 "$@"
