#!/bin/sh
# One-off: creates the namespace tidemark uses (30 days retention by default) once the server answers.
set -eu
ns="${TEMPORAL_NAMESPACE:-default}"
tries=0
until temporal operator cluster health --address "${TEMPORAL_ADDRESS}"; do
  tries=$((tries + 1))
  [ "$tries" -ge 30 ] && { echo "Temporal at ${TEMPORAL_ADDRESS} is not healthy"; exit 1; }
  sleep 2
done
temporal operator namespace describe -n "$ns" --address "${TEMPORAL_ADDRESS}" >/dev/null 2>&1 \
  || temporal operator namespace create -n "$ns" --retention "${TEMPORAL_RETENTION:-720h}" --address "${TEMPORAL_ADDRESS}"
# tidemark's search attributes, so the Web UI can filter runs by job, window and kind.
for sa in TidemarkJob=Keyword TidemarkWindowStart=Datetime TidemarkGeneration=Int TidemarkKind=Keyword; do
  temporal operator search-attribute create -n "$ns" --address "${TEMPORAL_ADDRESS}" --name "${sa%%=*}" --type "${sa#*=}" \
    || echo "search attribute ${sa%%=*} exists"
done
echo "namespace $ns ready"
