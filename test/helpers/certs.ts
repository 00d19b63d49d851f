// Throwaway keys and certificates for TLS tests, made with the openssl CLI in a test's own directory.
import { execFileSync } from 'node:child_process';
import { chmodSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** Absolute paths of a private key and its certificate. */
export interface KeyAndCert {
  key: string;
  cert: string;
}

export interface CertSpec {
  /** The subject, e.g. `/CN=localhost` (for PostgreSQL `cert` auth the CN is the database user). */
  subject: string;
  /** `ec` (P-256, the default) or `rsa` (2048 bits). */
  keyType?: 'ec' | 'rsa';
  /** Validity in days (default 2). */
  days?: number;
  /** subjectAltName, e.g. `DNS:localhost,IP:127.0.0.1,IP:::1`. */
  san?: string;
  /** extendedKeyUsage. */
  usage?: 'serverAuth' | 'clientAuth';
  /** The certificate file's suffix (default `.crt`); the key is always `<name>.key`. */
  certSuffix?: '.crt' | '.pem';
}

const openssl = (dir: string, args: string[]) =>
  execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });

const newKey = (spec: CertSpec) => [
  ...(spec.keyType === 'rsa'
    ? ['-newkey', 'rsa:2048']
    : ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1']),
  '-nodes',
];

const extensions = (spec: CertSpec) =>
  [spec.san && `subjectAltName=${spec.san}`, spec.usage && `extendedKeyUsage=${spec.usage}`].filter(
    (x): x is string => !!x,
  );

/** Key mode 0600: libpq refuses a client key others can read. */
function files(dir: string, name: string, spec: CertSpec): KeyAndCert {
  const made = { key: join(dir, `${name}.key`), cert: join(dir, `${name}${spec.certSuffix ?? '.crt'}`) };
  chmodSync(made.key, 0o600);
  return made;
}

/** A self-signed certificate: a CA (`/CN=... CA`), or a server certificate that is its own root. */
export function selfSigned(dir: string, name: string, spec: CertSpec): KeyAndCert {
  openssl(dir, [
    'req',
    '-x509',
    ...newKey(spec),
    '-days',
    String(spec.days ?? 2),
    '-keyout',
    `${name}.key`,
    '-out',
    `${name}${spec.certSuffix ?? '.crt'}`,
    '-subj',
    spec.subject,
    ...extensions(spec).flatMap((e) => ['-addext', e]),
  ]);
  return files(dir, name, spec);
}

/** A certificate for `name` signed by `ca` (the key and a certificate signing request are made first). */
export function signCert(dir: string, ca: KeyAndCert, name: string, spec: CertSpec): KeyAndCert {
  openssl(dir, [
    'req',
    ...newKey(spec),
    '-keyout',
    `${name}.key`,
    '-out',
    `${name}.csr`,
    '-subj',
    spec.subject,
  ]);
  const ext = extensions(spec);
  if (ext.length > 0) writeFileSync(join(dir, `${name}.ext`), ext.join('\n') + '\n');
  openssl(dir, [
    'x509',
    '-req',
    '-in',
    `${name}.csr`,
    '-CA',
    ca.cert,
    '-CAkey',
    ca.key,
    '-CAcreateserial',
    '-days',
    String(spec.days ?? 2),
    '-out',
    `${name}${spec.certSuffix ?? '.crt'}`,
    ...(ext.length > 0 ? ['-extfile', `${name}.ext`] : []),
  ]);
  return files(dir, name, spec);
}
