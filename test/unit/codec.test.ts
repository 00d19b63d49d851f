// The AES-256-GCM payload codec and its keys from the environment: round trip, the samples' wire
// format, tampering, unknown key ids, pass-through of plain payloads, configuration errors that
// name the variable and never print a key, and every key among the secrets the logs redact.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { defaultPayloadConverter, type Payload } from '@temporalio/common';
import { loadConfig, secretsOf } from '../../config/env.js';
import { KeylessCodec, payloadCodecOf, payloadKeysFrom, temporalDataConverter } from '../../codec/index.js';

const k1 = randomBytes(32).toString('base64');
const k2 = randomBytes(32).toString('base64');
const text = (b: Uint8Array | null | undefined) => Buffer.from(b!).toString('utf8');
const plain = (v: unknown): Payload => defaultPayloadConverter.toPayload(v);

test('encode/decode round trip; the wire format is the samples: metadata and nonce|ciphertext|tag', async () => {
  const codec = payloadCodecOf({ TIDEMARK_PAYLOAD_KEYS: `k2:${k2},k1:${k1}` })!;
  const value = { customer: 'ACME-ZEBRA-7731', total: 98765.43 };
  const [enc] = await codec.encode([plain(value)]);
  assert.equal(text(enc!.metadata!.encoding), 'binary/encrypted');
  assert.equal(text(enc!.metadata!['encryption-key-id']), 'k2');
  assert.ok(!Buffer.from(enc!.data!).includes('ACME-ZEBRA-7731'));
  // 12-byte nonce + protobuf Payload + 16-byte tag
  assert.ok(enc!.data!.length > 28);
  const [dec] = await codec.decode([enc!]);
  assert.deepEqual(defaultPayloadConverter.fromPayload(dec!), value);
  // Two encodings of one value differ (random nonce).
  const [again] = await codec.encode([plain(value)]);
  assert.notDeepEqual(Buffer.from(again!.data!), Buffer.from(enc!.data!));
});

test('a tampered payload is refused, naming the key id and not the key', async () => {
  const codec = payloadCodecOf({ TIDEMARK_PAYLOAD_KEYS: `k1:${k1}` })!;
  const [enc] = await codec.encode([plain('secret order 42')]);
  const data = Buffer.from(enc!.data!);
  data[20] = data[20]! ^ 1;
  await assert.rejects(
    codec.decode([{ ...enc!, data: new Uint8Array(data) }]),
    (err: Error) => /key id "k1" failed authentication/.test(err.message) && !err.message.includes(k1),
  );
  // The same key id configured with other key material: refused the same way.
  const other = payloadCodecOf({ TIDEMARK_PAYLOAD_KEYS: `k1:${k2}` })!;
  await assert.rejects(other.decode([enc!]), /key id "k1" failed authentication/);
});

test('a payload whose key id is not configured fails with a message naming that id', async () => {
  const old = payloadCodecOf({ TIDEMARK_PAYLOAD_KEYS: `k1:${k1}` })!;
  const [enc] = await old.encode([plain('x')]);
  const only2 = payloadCodecOf({ TIDEMARK_PAYLOAD_KEYS: `k2:${k2}` })!;
  await assert.rejects(
    only2.decode([enc!]),
    (err: Error) =>
      /key id "k1", which is not configured/.test(err.message) &&
      /TIDEMARK_PAYLOAD_KEYS/.test(err.message) &&
      !err.message.includes(k1) &&
      !err.message.includes(k2),
  );
  // Rotation: k2 first, k1 kept: old payloads decode, new ones carry k2.
  const rotated = payloadCodecOf({ TIDEMARK_PAYLOAD_KEYS: `k2:${k2},k1:${k1}` })!;
  assert.equal(defaultPayloadConverter.fromPayload((await rotated.decode([enc!]))[0]!), 'x');
  assert.equal(text((await rotated.encode([plain('y')]))[0]!.metadata!['encryption-key-id']), 'k2');
});

test('plain payloads (written before encryption was on) pass through decode unchanged', async () => {
  const codec = payloadCodecOf({ TIDEMARK_PAYLOAD_KEYS: `k1:${k1}` })!;
  const p = plain({ a: 1 });
  const [dec] = await codec.decode([p]);
  assert.deepEqual(defaultPayloadConverter.fromPayload(dec!), { a: 1 });
  const empty = defaultPayloadConverter.toPayload(undefined);
  assert.deepEqual(await codec.decode([empty]), [empty]);
});

test('no keys: only the keyless codec (plain payloads); keys: a codec and the encrypting failure converter', () => {
  const none = temporalDataConverter({});
  assert.equal(none.payloadCodecs?.length, 1);
  assert.ok(none.payloadCodecs![0] instanceof KeylessCodec);
  assert.equal(none.failureConverterPath, undefined);
  const dc = temporalDataConverter({ TIDEMARK_PAYLOAD_KEYS: `k1:${k1}` })!;
  assert.equal(dc.payloadCodecs?.length, 1);
  assert.match(dc.failureConverterPath!, /failure-converter\.cts$/);
});

test('bad keys are refused naming the variable and the fix, never printing the key', () => {
  const short = randomBytes(16).toString('base64');
  const cases: [NodeJS.ProcessEnv, RegExp, string?][] = [
    [
      { TIDEMARK_PAYLOAD_KEYS: `k1:${short}` },
      /TIDEMARK_PAYLOAD_KEYS: key "k1" is 16 bytes.*openssl rand -base64 32/,
      short,
    ],
    [
      { TIDEMARK_PAYLOAD_KEYS: 'k1:not*base64!' },
      /TIDEMARK_PAYLOAD_KEYS: key "k1" is not valid base64/,
      'not*base64!',
    ],
    [{ TIDEMARK_PAYLOAD_KEYS: `k1:${k1},k1:${k2}` }, /TIDEMARK_PAYLOAD_KEYS: key id "k1" appears twice/, k1],
    [{ TIDEMARK_PAYLOAD_KEYS: k1 }, /TIDEMARK_PAYLOAD_KEYS: entry 1 is not "<id>:<base64 key>"/, k1],
    [{ TIDEMARK_PAYLOAD_KEYS: ' , ' }, /TIDEMARK_PAYLOAD_KEYS: holds no key/],
    [{ TIDEMARK_PAYLOAD_KEYS_FILE: '/nonexistent/keys' }, /TIDEMARK_PAYLOAD_KEYS_FILE: cannot read/],
  ];
  for (const [env, message, secret] of cases)
    assert.throws(
      () => payloadKeysFrom(env),
      (err: Error) => message.test(err.message) && (!secret || !err.message.includes(secret)),
      JSON.stringify(Object.keys(env)),
    );
});

test('keys from a file (one a line) and the variable together; the first listed encrypts', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'tidemark-keys-'));
  try {
    const file = join(dir, 'keys');
    writeFileSync(file, `k1:${k1}\n`);
    const keys = payloadKeysFrom({ TIDEMARK_PAYLOAD_KEYS: `k2:${k2}`, TIDEMARK_PAYLOAD_KEYS_FILE: file })!;
    assert.equal(keys.current.id, 'k2');
    assert.deepEqual([...keys.byId.keys()], ['k2', 'k1']);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('the payload keys and the codec token are secrets; a bad codec origin names the variable', () => {
  const config = loadConfig({
    TIDEMARK_PAYLOAD_KEYS: `k2:${k2},k1:${k1}`,
    TIDEMARK_CODEC_TOKEN: 'codec-token-0123456789',
  });
  const secrets = secretsOf(config);
  for (const s of [k1, k2, 'codec-token-0123456789']) assert.ok(secrets.includes(s));
  assert.throws(
    () => loadConfig({ TIDEMARK_CODEC_ORIGINS: 'http://127.0.0.1:8233/path' }),
    /TIDEMARK_CODEC_ORIGINS: .* is not an origin/,
  );
  assert.deepEqual(
    loadConfig({ TIDEMARK_CODEC_ORIGINS: 'http://a.example:8233, https://b.example' }).TIDEMARK_CODEC_ORIGINS,
    ['http://a.example:8233', 'https://b.example'],
  );
});

// Every configured key is a secret the logs redact, however the keys were written (one a line in the
// variable, as the file allows, or in the file).
test("every payload key is among the secrets: keys one a line in the variable, and the file's keys", () => {
  const [a, b, c] = [0, 1, 2].map(() => randomBytes(32).toString('base64'));
  const dir = mkdtempSync(join(tmpdir(), 'codec-review-'));
  try {
    const file = join(dir, 'keys');
    writeFileSync(file, `k3:${c}\r\n`);
    const env = { TIDEMARK_PAYLOAD_KEYS: `k1:${a}\nk2:${b}`, TIDEMARK_PAYLOAD_KEYS_FILE: file };
    // The codec takes all three keys...
    assert.deepEqual([...payloadKeysFrom(env)!.byId.keys()], ['k1', 'k2', 'k3']);
    // ...and each one alone is redacted wherever it would be printed.
    const secrets = secretsOf(loadConfig(env));
    for (const [id, key] of [
      ['k1', a],
      ['k2', b],
      ['k3', c],
    ] as const)
      assert.ok(secrets.includes(key!), `key ${id} is not among the secrets`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
