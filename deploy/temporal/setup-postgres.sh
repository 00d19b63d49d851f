#!/bin/sh
# One-off: creates Temporal's two databases on PostgreSQL and brings their schemas up to date.
# Runs in the temporalio/admin-tools image; safe to run again (create tolerates existing).
set -eu
tool="temporal-sql-tool --plugin postgres12 --ep ${POSTGRES_SEEDS} -u ${POSTGRES_USER} -p ${DB_PORT}"
schema_dir=/etc/temporal/schema/postgresql/v12
until nc -z -w 5 "${POSTGRES_SEEDS}" "${DB_PORT}"; do echo "waiting for PostgreSQL"; sleep 2; done
for db in temporal temporal_visibility; do
  case "$db" in temporal) dir=temporal ;; *) dir=visibility ;; esac
  $tool --db "$db" create || echo "database $db exists"
  $tool --db "$db" setup-schema -v 0.0 || echo "schema of $db already set up"
  $tool --db "$db" update-schema -d "$schema_dir/$dir/versioned"
done
echo "Temporal schema ready"
