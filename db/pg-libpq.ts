// The libpq side (pg_dump, pg_restore) of the one reading of a database URL (db/pg-target.ts).
import { ENV_OF, LIBPQ_ONLY, removeParams, resolvePg } from './pg-target.js';

/** libpq's environment for pg_dump/pg_restore: the password (the URL's, else PGPASSWORD) and the resolved TLS settings. */
export function libpqConnection(
  url: string,
  env: NodeJS.ProcessEnv = process.env,
): { args: string[]; env: NodeJS.ProcessEnv } {
  const target = resolvePg(url, env);
  const u = new URL(target.url);
  // A password=... query parameter wins over the user info's, as in libpq and node-postgres; both
  // go through the environment: a command line is visible to every user of the host.
  const password = u.searchParams.get('password') ?? decodeURIComponent(u.password);
  u.password = '';
  removeParams(u, ['password']);
  const child: NodeJS.ProcessEnv = { ...env };
  // A service (PGSERVICE, pg_service.conf) outranks the PG* variables in libpq: its sslmode=disable
  // would beat the PGSSLMODE=verify-full set here. node-postgres has no services: neither side uses one.
  for (const name of [
    ...Object.values(ENV_OF),
    'PGPASSWORD',
    'PGSSLCRL',
    'PGSSLCRLDIR',
    'PGSERVICE',
    'PGSERVICEFILE',
    ...Object.values(LIBPQ_ONLY),
  ])
    delete child[name];
  const t = target.tls;
  child.PGSSLMODE = t.mode;
  // Explicit paths, so libpq uses exactly the files node-postgres reads.
  if (t.rootCert) child.PGSSLROOTCERT = t.rootCert.path;
  if (t.cert) child.PGSSLCERT = t.cert.path;
  if (t.key) child.PGSSLKEY = t.key.path;
  // The URL's password, else PGPASSWORD as node-postgres reads it (pg's defaults take PGPASSWORD too).
  if (password) child.PGPASSWORD = password;
  else if (env.PGPASSWORD) child.PGPASSWORD = env.PGPASSWORD;
  return { args: [`--dbname=${u.toString()}`], env: child };
}
