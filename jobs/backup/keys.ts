// A backup job's encryption keys: from an environment variable or a file named in the catalog,
// never from code. The list is "k2:<base64>,k1:<base64>" (commas or lines): the first key
// encrypts, every key decrypts. Each encrypted backup carries its key's id, so after a rotation
// (new key first, old ones kept) old backups still verify and restore. Read at every use: a
// rotated list is picked up without a restart.
import { readFileSync } from 'node:fs';
import { parseKeyList, type PayloadKeys } from '../../codec/keys.js';
import { ConfigError } from '../../contract/config-error.js';

export type BackupKeySource = { readonly env: string } | { readonly file: string };
export type BackupKeys = PayloadKeys;

const MAKE_ONE = 'k1:<base64 of 32 bytes> (make one with `openssl rand -base64 32`)';

export function describeKeySource(source: BackupKeySource): string {
  return 'env' in source ? `environment variable ${source.env}` : `key file ${source.file}`;
}

export function backupKeys(job: string, source: BackupKeySource, env = process.env): BackupKeys {
  if ('env' in source) {
    const text = env[source.env]?.trim();
    if (!text)
      throw new ConfigError(
        source.env,
        `is not set, and job ${job} encrypts its backups with the keys it holds: set it to ${MAKE_ONE}`,
      );
    return parseKeyList([{ variable: source.env, text }]);
  }
  const label = `key file ${source.file} of job ${job}`;
  let text: string;
  try {
    text = readFileSync(source.file, 'utf8');
  } catch (err) {
    throw new ConfigError(
      label,
      `cannot be read (${(err as NodeJS.ErrnoException).code ?? 'error'}): write ${MAKE_ONE} into it, one key a line, readable by tidemark only`,
      'setting',
    );
  }
  return parseKeyList([{ variable: label, text, kind: 'setting' }]);
}
