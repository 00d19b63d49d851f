// pg_dump and pg_restore as child processes. The password goes through the environment, never
// the command line; a dump's output ends only after pg_dump exited 0, so a failed or killed dump
// can never look like a short, complete one. TLS settings (sslmode, sslrootcert, sslcert, sslkey from
// the URL or PG*) reach libpq as PGSSL* variables resolved exactly as for node-postgres.
import { spawn, type ChildProcess } from 'node:child_process';
import { PassThrough, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';

import { libpqConnection as connection } from '../../db/pg-connection.js';

export interface Dump {
  stream: Readable;
  child: ChildProcess;
  done: Promise<void>;
}

export function startDump(url: string, opts: { snapshot?: string } = {}): Dump {
  const c = connection(url);
  const child = spawn(
    'pg_dump',
    [
      '--format=custom',
      '--compress=6',
      '--no-password',
      ...(opts.snapshot ? [`--snapshot=${opts.snapshot}`] : []),
      ...c.args,
    ],
    { env: c.env, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const out = new PassThrough();
  let stderr = '';
  child.stderr!.on('data', (d) => (stderr = (stderr + d).slice(-2000)));
  child.stdout!.pipe(out, { end: false });
  const done = new Promise<void>((resolve, reject) => {
    child.once('error', (err) => {
      out.destroy(err);
      reject(err);
    });
    child.once('close', (code, signal) => {
      if (code === 0) {
        out.end();
        resolve();
      } else {
        const err = new Error(
          `pg_dump ${signal ? `was killed (${signal})` : `exited with ${code}`}: ${stderr.trim() || 'no output'}`,
        );
        out.destroy(err);
        reject(err);
      }
    });
  });
  done.catch(() => undefined);
  return { stream: out, child, done };
}

/** Runs pg_restore with the backup on stdin; resolves with its stdout. */
export async function pgRestore(input: Readable, args: string[], url?: string): Promise<string> {
  const c = url ? connection(url) : { args: [], env: process.env };
  const child = spawn('pg_restore', [...args, ...c.args], { env: c.env, stdio: ['pipe', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (d) => (stdout += d));
  child.stderr!.on('data', (d) => (stderr = (stderr + d).slice(-2000)));
  const exited = new Promise<number | null>((r) => child.once('close', (code) => r(code)));
  // pg_restore --list stops reading after the table of contents and exits: a closed stdin is no
  // error then, whether a write saw it (EPIPE) or node destroyed stdin on the exit while the input
  // was still being read (a premature close: a slow source or a busy host).
  const fed = await pipeline(input, child.stdin!).then(
    () => null,
    (err: unknown) => err as NodeJS.ErrnoException,
  );
  const code = await exited;
  const stdinClosed = fed?.code === 'EPIPE' || fed?.code === 'ERR_STREAM_PREMATURE_CLOSE';
  // The input's own failure (a read, a decryption) comes first; a pipe pg_restore closed is its doing.
  if (fed && !stdinClosed) throw fed;
  if (code !== 0) throw new Error(`pg_restore ${args.join(' ')} exited with ${code}: ${stderr.trim()}`);
  return stdout;
}

export interface Fed {
  stdout: string;
  stderr: string;
  code: number | null;
  /** The input's own failure (a read, a checksum, a GCM tag): pg_restore was killed before its input ended. */
  inputError?: Error;
}

/**
 * Runs pg_restore and streams `input` into it to the input's end, also after pg_restore stopped
 * reading (`--list` stops after the table of contents), so every check along the input runs. An
 * input that fails kills pg_restore before its stdin is closed: it never sees the end of an
 * archive that failed a check, and a restore in one transaction (--single-transaction) is rolled
 * back by the server.
 */
export async function feedRestore(input: AsyncIterable<Buffer>, args: string[], url?: string): Promise<Fed> {
  const c = url ? connection(url) : { args: [], env: process.env };
  const child = spawn('pg_restore', [...args, ...c.args], { env: c.env, stdio: ['pipe', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (d) => (stdout += d));
  child.stderr!.on('data', (d) => (stderr = (stderr + d).slice(-4000)));
  const exited = new Promise<number | null>((r) => child.once('close', (code) => r(code)));
  const stdin = child.stdin!;
  let open = true;
  stdin.on('error', () => (open = false));
  stdin.on('close', () => (open = false));
  let inputError: Error | undefined;
  const write = async (chunk: Buffer) => {
    if (!open || stdin.write(chunk)) return;
    await new Promise<void>((resolve) => {
      const done = () => {
        stdin.off('drain', done);
        stdin.off('close', done);
        resolve();
      };
      stdin.on('drain', done);
      stdin.on('close', done);
    });
  };
  // The last chunk waits for the input's end: pg_restore needs no end of input to finish (it stops
  // after the archive's last block) and would commit an archive whose checks fail at the end if
  // that end came late. Without its last bytes it cannot finish, so killing it rolls back.
  let held: Buffer | undefined;
  try {
    for await (const chunk of input) {
      if (held) await write(held);
      held = chunk;
    }
  } catch (err) {
    inputError = err as Error;
    child.kill('SIGKILL');
  }
  if (!inputError && held) await write(held);
  if (open && !inputError) stdin.end();
  const code = await exited;
  return { stdout, stderr: stderr.trim(), code, ...(inputError ? { inputError } : {}) };
}
