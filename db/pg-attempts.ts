// The attempts libpq makes for an sslmode, with the node TLS options of each TLS attempt.
import { readFileSync } from 'node:fs';
import type { ConnectionOptions } from 'node:tls';
import { serverIdentity } from './pg-identity.js';
import { PgSettingError, type Origin, type PgTarget } from './pg-target.js';

/** node TLS options for one attempt with TLS; `false` for a plain attempt. */
function tlsOptions(target: PgTarget): ConnectionOptions {
  const t = target.tls;
  const read = (f: { path: string; from: Origin }, param: string): string => {
    try {
      return readFileSync(f.path, 'utf8');
    } catch (err) {
      throw new PgSettingError(
        param,
        `${f.from} names ${f.path}, which cannot be read (${(err as NodeJS.ErrnoException).code ?? (err as Error).message}): make it readable by this process`,
      );
    }
  };
  const opts: ConnectionOptions = {};
  if (t.cert && t.key) {
    opts.cert = read(t.cert, 'sslcert');
    opts.key = read(t.key, 'sslkey');
  }
  if (t.rootCert) {
    opts.ca = read(t.rootCert, 'sslrootcert');
    opts.rejectUnauthorized = true;
    // verify-ca, and require/prefer/allow with a root certificate: the chain, not the name.
    opts.checkServerIdentity = t.mode === 'verify-full' ? serverIdentity : () => undefined;
  } else {
    opts.rejectUnauthorized = false;
  }
  // verify-full: the host is checked (pg sets servername for names; an IP against the IP SANs).
  return opts;
}

/** The attempts libpq makes, in order: TLS options or false (plain). */
export function attempts(target: PgTarget): (ConnectionOptions | false)[] {
  const t = target.tls;
  if (t.mode === 'disable' || t.socket) return [false];
  const secure = tlsOptions(target);
  if (t.mode === 'allow') return [false, secure];
  if (t.mode === 'prefer') return [secure, false];
  return [secure];
}
