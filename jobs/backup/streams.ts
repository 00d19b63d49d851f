// Stream pieces of a backup: SHA-256 and size while streaming, and optional AES-256-GCM
// encryption at rest (12-byte IV first, 16-byte tag last).
import { createCipheriv, createDecipheriv, createHash, randomBytes, type DecipherGCM } from 'node:crypto';
import { Transform, type TransformCallback } from 'node:stream';

export class Digest extends Transform {
  private readonly hash = createHash('sha256');
  bytes = 0;
  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    this.hash.update(chunk);
    this.bytes += chunk.length;
    cb(null, chunk);
  }
  hex(): string {
    return this.hash.copy().digest('hex');
  }
}

export function encryptor(key: Buffer): Transform {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  let started = false;
  return new Transform({
    transform(chunk: Buffer, _enc, cb) {
      const out = cipher.update(chunk);
      cb(null, started ? out : ((started = true), Buffer.concat([iv, out])));
    },
    flush(cb) {
      const tail = cipher.final();
      cb(null, Buffer.concat([started ? Buffer.alloc(0) : iv, tail, cipher.getAuthTag()]));
    },
  });
}

/** Decrypts what `encryptor` wrote; fails at the end if a single byte was changed. */
export function decryptor(key: Buffer): Transform {
  let head = Buffer.alloc(0);
  let decipher: DecipherGCM | undefined;
  let held = Buffer.alloc(0);
  return new Transform({
    transform(chunk: Buffer, _enc, cb) {
      let data = chunk;
      if (!decipher) {
        head = Buffer.concat([head, data]);
        if (head.length < 12) return cb();
        decipher = createDecipheriv('aes-256-gcm', key, head.subarray(0, 12));
        data = head.subarray(12);
      }
      const all = Buffer.concat([held, data]);
      held = all.subarray(Math.max(0, all.length - 16));
      cb(null, decipher.update(all.subarray(0, Math.max(0, all.length - 16))));
    },
    flush(cb) {
      try {
        if (!decipher || held.length < 16) throw new Error('encrypted backup is truncated');
        decipher.setAuthTag(held);
        cb(null, decipher.final());
      } catch (err) {
        cb(err as Error);
      }
    },
  });
}
