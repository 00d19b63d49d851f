// Where backups go: a local (or mounted on-premises) directory, or S3-compatible storage
// (AWS S3, Backblaze B2's S3 API, ...). A backup is written to a staging name, verified, and
// only then published under its final name; staging is removed whatever happens.
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, open, readdir, rename, rm, stat } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createRequire } from 'node:module';
import type * as S3 from '@aws-sdk/client-s3';
import type * as S3Storage from '@aws-sdk/lib-storage';

// The S3 client is loaded when an S3 destination is made, not with this module: the demo catalog's
// backup job imports it in every worker, most of which never write to S3 (~4 MiB resident). Both
// packages are CommonJS, so required here as `import` would give them.
const load = createRequire(import.meta.url);

export interface Destination {
  readonly describe: string;
  /** Streams to a staging object; rejects (and leaves nothing) if the stream fails. */
  putStaging(key: string, body: Readable): Promise<void>;
  readStaging(key: string): Promise<Readable>;
  /** Makes the staging object visible under its final key. */
  publish(key: string): Promise<void>;
  discardStaging(key: string): Promise<void>;
  /** The object; `signal` stops the reading, waiting for the first byte too. */
  read(key: string, signal?: AbortSignal): Promise<Readable>;
  list(prefix: string): Promise<string[]>;
  remove(key: string): Promise<void>;
}

const STAGING = '.staging/';

export function localDestination(root: string): Destination {
  const path = (key: string) => join(root, key);
  return {
    describe: `directory ${root}`,
    async putStaging(key, body) {
      const file = path(STAGING + key);
      await mkdir(dirname(file), { recursive: true });
      try {
        await pipeline(body, createWriteStream(file));
        const fh = await open(file, 'r+');
        await fh.sync();
        await fh.close();
      } catch (err) {
        await rm(file, { force: true });
        throw err;
      }
    },
    readStaging: async (key) => createReadStream(path(STAGING + key)),
    async publish(key) {
      await mkdir(dirname(path(key)), { recursive: true });
      await rename(path(STAGING + key), path(key));
    },
    discardStaging: (key) => rm(path(STAGING + key), { force: true }),
    read: async (key) => createReadStream(path(key)),
    async list(prefix) {
      const dir = path(prefix);
      const names = await readdir(dir).catch(() => [] as string[]);
      const files: string[] = [];
      for (const n of names) if ((await stat(join(dir, n))).isFile()) files.push(`${prefix}${n}`);
      return files.sort();
    },
    remove: (key) => rm(path(key), { force: true }),
  };
}

export interface S3Settings {
  bucket: string;
  region?: string;
  endpoint?: string;
  accessKeyId: string;
  secretAccessKey: string;
  forcePathStyle?: boolean;
  /** Multipart part size; default 8 MiB. */
  partSize?: number;
  /** Objects larger than this are published by a multipart copy (one CopyObject stops at 5 GB); default 1 GiB. */
  copyThreshold?: number;
  /** Part size of that multipart copy (at least 5 MiB; raised to stay within 10,000 parts); default 512 MiB. */
  copyPartSize?: number;
}

const MiB = 1024 * 1024;
const MAX_PARTS = 10_000;

export function s3Destination(s: S3Settings): Destination {
  const {
    AbortMultipartUploadCommand,
    CompleteMultipartUploadCommand,
    CopyObjectCommand,
    CreateMultipartUploadCommand,
    DeleteObjectCommand,
    GetObjectCommand,
    HeadObjectCommand,
    ListObjectsV2Command,
    S3Client,
    UploadPartCopyCommand,
  } = load('@aws-sdk/client-s3') as typeof S3;
  const { Upload } = load('@aws-sdk/lib-storage') as typeof S3Storage;
  const client = new S3Client({
    region: s.region ?? 'us-east-1',
    ...(s.endpoint ? { endpoint: s.endpoint } : {}),
    forcePathStyle: s.forcePathStyle ?? !!s.endpoint,
    credentials: { accessKeyId: s.accessKeyId, secretAccessKey: s.secretAccessKey },
    // Checksums only where the API requires them: the SDK's default streaming checksum framing
    // is stored verbatim by some S3-compatible servers, and B2 rejects some of its headers.
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
    maxAttempts: 3,
    // Storage that takes a connection and stops answering fails the call rather than holding it
    // (and whatever waits on it, a page's verification slot) for ever: no byte for two minutes.
    requestHandler: { connectionTimeout: 30_000, requestTimeout: 120_000 },
  });
  const get = async (key: string, signal?: AbortSignal) =>
    (
      await client.send(
        new GetObjectCommand({ Bucket: s.bucket, Key: key }),
        signal ? { abortSignal: signal } : {},
      )
    ).Body as Readable;
  const del = async (key: string) => {
    await client.send(new DeleteObjectCommand({ Bucket: s.bucket, Key: key }));
  };
  // UploadPartCopy over byte ranges, then one CompleteMultipartUpload: the object appears whole
  // or not at all; a failure aborts the upload so no parts are left behind (or billed).
  async function multipartCopy(
    key: string,
    size: number,
    source: { CopySource: string; CopySourceIfMatch?: string },
  ): Promise<void> {
    const partSize = Math.max(s.copyPartSize ?? 512 * MiB, 5 * MiB, Math.ceil(size / MAX_PARTS));
    const { UploadId } = await client.send(new CreateMultipartUploadCommand({ Bucket: s.bucket, Key: key }));
    try {
      const parts: { ETag: string; PartNumber: number }[] = [];
      for (let first = 0, n = 1; first < size; first += partSize, n++) {
        const last = Math.min(first + partSize, size) - 1;
        const r = await client.send(
          new UploadPartCopyCommand({
            Bucket: s.bucket,
            Key: key,
            UploadId,
            PartNumber: n,
            CopySourceRange: `bytes=${first}-${last}`,
            ...source,
          }),
        );
        if (!r.CopyPartResult?.ETag) throw new Error(`multipart copy of ${key}: part ${n} returned no ETag`);
        parts.push({ ETag: r.CopyPartResult.ETag, PartNumber: n });
      }
      await client.send(
        new CompleteMultipartUploadCommand({
          Bucket: s.bucket,
          Key: key,
          UploadId,
          MultipartUpload: { Parts: parts },
        }),
      );
    } catch (err) {
      await client
        .send(new AbortMultipartUploadCommand({ Bucket: s.bucket, Key: key, UploadId }))
        .catch(() => undefined);
      throw err;
    }
    const published = await client.send(new HeadObjectCommand({ Bucket: s.bucket, Key: key }));
    if (published.ContentLength !== size)
      throw new Error(`multipart copy of ${key}: ${published.ContentLength} bytes published, ${size} staged`);
  }

  return {
    describe: `s3://${s.bucket}${s.endpoint ? ` at ${new URL(s.endpoint).host}` : ''}`,
    async putStaging(key, body) {
      // Multipart for large dumps; an upload that fails is aborted, so no object appears.
      const upload = new Upload({
        client,
        params: { Bucket: s.bucket, Key: STAGING + key, Body: body },
        partSize: s.partSize ?? 8 * 1024 * 1024,
        leavePartsOnError: false,
      });
      await upload.done();
    },
    readStaging: (key) => get(STAGING + key),
    async publish(key) {
      const staged = await client.send(new HeadObjectCommand({ Bucket: s.bucket, Key: STAGING + key }));
      const size = staged.ContentLength ?? 0;
      const source = {
        CopySource: `${s.bucket}/${encodeURIComponent(STAGING + key).replace(/%2F/g, '/')}`,
        // Exactly the staging object that was verified, not one that replaced it since.
        ...(staged.ETag ? { CopySourceIfMatch: staged.ETag } : {}),
      };
      if (size > (s.copyThreshold ?? 1024 * MiB)) await multipartCopy(key, size, source);
      else await client.send(new CopyObjectCommand({ Bucket: s.bucket, Key: key, ...source }));
      await del(STAGING + key);
    },
    discardStaging: (key) => del(STAGING + key).catch(() => undefined),
    read: get,
    async list(prefix) {
      const keys: string[] = [];
      let token: string | undefined;
      do {
        const r = await client.send(
          new ListObjectsV2Command({ Bucket: s.bucket, Prefix: prefix, ContinuationToken: token }),
        );
        keys.push(...(r.Contents ?? []).map((c) => c.Key!).filter((k) => !k.startsWith(STAGING)));
        token = r.NextContinuationToken;
      } while (token);
      return keys.sort();
    },
    remove: del,
  };
}
