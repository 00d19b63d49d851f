// A real S3-compatible server on loopback (moto's standalone server, from PyPI), and a TCP proxy
// in front of it that can cut an upload off or flip a byte of it on the way.
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer, connect, type Server } from 'node:net';
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';
import { ensureVenvProgram, MOTO_SPEC } from '../../bin/temporal-cli.js';
import { freePort } from './net.js';

export interface TestS3 {
  endpoint: string;
  process: ChildProcess;
  createBucket(name: string): Promise<void>;
  close(): Promise<void>;
}

export async function startS3(): Promise<TestS3> {
  const program = ensureVenvProgram(MOTO_SPEC, 'moto_server');
  const port = await freePort();
  const child = spawn(program, ['-H', '127.0.0.1', '-p', String(port)], { stdio: 'ignore' });
  const endpoint = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 30_000;
  for (;;) {
    try {
      if ((await fetch(endpoint)).ok) break;
    } catch {
      if (Date.now() > deadline) throw new Error('moto_server did not start');
      await new Promise((r) => setTimeout(r, 200));
    }
  }
  const client = new S3Client({
    region: 'us-east-1',
    endpoint,
    forcePathStyle: true,
    credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
  });
  return {
    endpoint,
    process: child,
    createBucket: async (name) => {
      await client.send(new CreateBucketCommand({ Bucket: name }));
    },
    close: async () => {
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
    },
  };
}

export type ProxyMode =
  { kind: 'pass' } | { kind: 'cut-after'; bytes: number } | { kind: 'flip-byte'; at: number };

/**
 * Forwards to `target`. In `cut-after` mode it closes a connection once that many request bytes
 * went through; in `flip-byte` it changes one byte of the first request body larger than `at`.
 */
export async function startProxy(
  target: string,
): Promise<{ url: string; mode: ProxyMode; close(): Promise<void> }> {
  const { hostname, port } = new URL(target);
  const state: { mode: ProxyMode } = { mode: { kind: 'pass' } };
  let flipped = false;
  const server: Server = createServer((client) => {
    const upstream = connect(Number(port), hostname);
    let sent = 0;
    let bodyAt = -1;
    client.on('data', (chunk: Buffer) => {
      const mode = state.mode;
      if (mode.kind === 'cut-after' && sent + chunk.length > mode.bytes) {
        upstream.write(chunk.subarray(0, Math.max(0, mode.bytes - sent)));
        client.destroy();
        upstream.destroy();
        return;
      }
      if (mode.kind === 'flip-byte' && !flipped) {
        if (bodyAt < 0) {
          const headerEnd = chunk.indexOf('\r\n\r\n');
          const head = chunk.subarray(0, Math.max(0, headerEnd)).toString('latin1');
          if (
            headerEnd >= 0 &&
            /^PUT /.test(head) &&
            !/partNumber|uploadId/i.test(head.split('\r\n')[0] ?? '')
          )
            bodyAt = sent + headerEnd + 4;
        }
        const offset = bodyAt >= 0 ? bodyAt + mode.at - sent : -1;
        if (offset >= 0 && offset < chunk.length) {
          chunk = Buffer.from(chunk);
          chunk[offset] = chunk[offset]! ^ 0xff;
          flipped = true;
        }
      }
      sent += chunk.length;
      upstream.write(chunk);
    });
    upstream.on('data', (d) => client.write(d));
    client.on('end', () => upstream.end());
    upstream.on('end', () => client.end());
    client.on('error', () => upstream.destroy());
    upstream.on('error', () => client.destroy());
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  return {
    url,
    get mode() {
      return state.mode;
    },
    set mode(m: ProxyMode) {
      state.mode = m;
      flipped = false;
    },
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}
