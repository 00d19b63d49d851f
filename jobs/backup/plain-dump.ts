// A backup written out as a plain pg_dump archive (decrypted), to restore by hand: written only
// when every check passed, under a name that did not exist, or not at all.
import { createWriteStream } from 'node:fs';
import { link, open, rm, stat } from 'node:fs/promises';
import { dirname } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { chain, checkedStream, interrupted, type Progress } from './checked-stream.js';
import type { BackupRecord } from './listing.js';
import type { BackupJob } from './registry.js';
import { RestoreRefusedError } from './target.js';

/** Writes the plain (decrypted) pg_dump archive to `file` (mode 0600), all checks passed, or nothing. */
export async function writePlainDump(
  bj: BackupJob,
  rec: BackupRecord,
  file: string,
  onProgress?: Progress,
  signal?: AbortSignal,
): Promise<{ file: string; bytes: number }> {
  if (
    await stat(file).then(
      () => true,
      () => false,
    )
  )
    throw new RestoreRefusedError(`--to-file: ${file} exists; name a new file (nothing is overwritten)`);
  const part = `${file}.part-${process.pid}`;
  const stages = await checkedStream(bj, rec, (n) => onProgress?.(n, rec.bytes));
  let bytes = 0;
  try {
    await pipeline(
      chain(stages, signal),
      async function* (src: AsyncIterable<Buffer>) {
        for await (const chunk of src) {
          bytes += chunk.length;
          yield chunk;
        }
      },
      createWriteStream(part, { flags: 'wx', mode: 0o600 }),
    );
    const fh = await open(part, 'r');
    await fh.sync();
    await fh.close();
    // link(), not rename(): it fails if `file` appeared meanwhile (another restore, another program),
    // where rename() would replace it. The stat above only makes the usual case fail early.
    await link(part, file).catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'EEXIST')
        throw new RestoreRefusedError(
          `--to-file: ${file} exists (it appeared while the backup was written); name a new file (nothing is overwritten)`,
        );
      throw err;
    });
    await rm(part, { force: true });
    const dir = await open(dirname(file), 'r');
    await dir.sync().catch(() => undefined);
    await dir.close();
  } catch (err) {
    await rm(part, { force: true });
    throw interrupted(err as Error, signal);
  }
  return { file, bytes };
}
