// A stored backup read back through its checks: every path (verify, restore, a plain file, the
// drill) streams the object once, its size and SHA-256 checked against the record, then the GCM
// tag (an encrypted backup, with the key its header names). A check fails at the stream's end and
// fails the stream's reader.
import { PassThrough, type Readable, type Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { describeKeySource } from './keys.js';
import type { BackupRecord } from './listing.js';
import type { BackupJob } from './registry.js';
import { BackupCheckError, decryptor, expectDigest, type KeyLookup } from './streams.js';

export type Progress = (done: number, total: number) => void;

/** The stored object as it is checked on its way: size and SHA-256, then decrypted with its key. */
export async function checkedStream(
  bj: BackupJob,
  rec: BackupRecord,
  onBytes?: (n: number) => void,
  signal?: AbortSignal,
) {
  if (rec.destination !== bj.destination.describe)
    throw new Error(
      `backup ${rec.windowKey} is in ${rec.destination}, but job ${bj.name} is configured with ${bj.destination.describe} now: point the job at the old destination to read it`,
    );
  const raw: Readable = await bj.destination.read(rec.objectKey, signal);
  const stages: (Readable | Transform)[] = [raw, expectDigest(rec, onBytes)];
  if (rec.encrypted) {
    const source = bj.encryption ? describeKeySource(bj.encryption) : undefined;
    const keyFor: KeyLookup = (id) => {
      // Read here, in the decryptor: a variable or file that fails is the key check's failure,
      // reported after size and SHA-256 like a key that is missing from the list.
      let keys: ReturnType<BackupJob['keys']>;
      try {
        keys = bj.keys();
      } catch (err) {
        throw new BackupCheckError('key', (err as Error).message);
      }
      if (!keys)
        throw new BackupCheckError(
          'key',
          `the backup is encrypted, and job ${bj.name} names no keys now: configure its encryption (${source ?? 'encryption: { env } or { file }'})`,
        );
      const wanted = id ?? rec.keyId ?? undefined;
      // Written before key ids (no header, none recorded): any key of the list, the current one first.
      if (wanted === undefined) return [keys.current.key, ...[...keys.byId.values()].map((k) => k.key)];
      const k = keys.byId.get(wanted);
      if (!k)
        throw new BackupCheckError(
          'key',
          `the backup was encrypted with key id "${wanted}", which ${source} does not hold (it holds ${[...keys.byId.keys()].join(', ')}): add that key back to the list, after the current one`,
        );
      return k.key;
    };
    stages.push(decryptor(keyFor));
  }
  return stages;
}

/** The stages piped into one stream to read; any stage's failure (a read, a check at the end) fails its reader. */
export function chain(stages: (Readable | Transform)[], signal?: AbortSignal): AsyncIterable<Buffer> {
  const out = new PassThrough();
  // pipeline() destroys every stage with the first failure, `out` included: its reader sees it.
  // An interruption (Ctrl-C) is such a failure.
  pipeline([...stages, out], ...(signal ? [{ signal }] : [])).catch(() => undefined);
  return out;
}

/** What an interruption says (Ctrl-C, SIGTERM), instead of the AbortError's "This operation was aborted". */
export const interrupted = (err: Error, signal?: AbortSignal) =>
  signal?.aborted ? new Error('interrupted (Ctrl-C or SIGTERM) before the restore finished') : err;
