// Connect errors explained by the TLS setting at fault.
import { redactUrl, type PgTarget } from './pg-target.js';

const CERT_CODES = /CERT|SELF_SIGNED|UNABLE_TO_(GET|VERIFY)|ALTNAME|HOSTNAME|ISSUER/;

/** A connect error with the TLS setting that explains it, or the error itself. */
export function explainConnectError(err: unknown, target: PgTarget, usedTls: boolean): unknown {
  const e = err as Error & { code?: string };
  if (!e || typeof e !== 'object' || typeof e.message !== 'string') return err;
  const t = target.tls;
  const where = redactUrl(target.url);
  const mode = `sslmode=${t.mode} (${t.modeFrom})`;
  let message: string | undefined;
  if (e.code === '28000' && /no encryption/i.test(e.message)) {
    message = `PostgreSQL at ${where} refuses connections without TLS (${e.message}), and ${mode} did not use TLS: set sslmode=verify-full&sslrootcert=<CA file> in the database URL (or PGSSLMODE/PGSSLROOTCERT)`;
  } else if (e.code === '28000' && /certificate/i.test(e.message)) {
    message = `PostgreSQL at ${where} requires a client certificate (${e.message}): set sslcert=<certificate>&sslkey=<key> in the database URL (or PGSSLCERT/PGSSLKEY)${t.cert ? `; the one given (${t.cert.path}, ${t.cert.from}) was not accepted for this user` : ''}`;
  } else if (/does not support SSL/i.test(e.message)) {
    message = `PostgreSQL at ${where} does not offer TLS, but ${mode} requires it: turn ssl on at the server, or (only on a trusted network) set sslmode=prefer or disable`;
  } else if (
    usedTls &&
    ((e.code && CERT_CODES.test(e.code)) || /Hostname\/IP does not match/i.test(e.message))
  ) {
    message =
      `the server certificate of PostgreSQL at ${where} failed verification under ${mode}` +
      `${t.rootCert ? ` with sslrootcert=${t.rootCert.path} (${t.rootCert.from})` : ' with no sslrootcert'}: ${e.message}. ` +
      (t.mode === 'verify-full'
        ? "Give the CA that signed the server's certificate in sslrootcert, and connect by a host name the certificate lists"
        : "Give the CA that signed the server's certificate in sslrootcert");
  }
  if (!message) return err;
  const out = new Error(message, { cause: err }) as Error & { code?: string; setting?: string };
  out.name = 'PgTlsError';
  if (e.code) out.code = e.code;
  return out;
}
