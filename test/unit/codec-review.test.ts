// Review of issue 13's payload keys: every configured key is a secret the logs redact, however the
// keys were written (one a line in the variable, as the file allows, or in the file).
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { loadConfig, secretsOf } from '../../config/env.js';
import { payloadKeysFrom } from '../../codec/index.js';

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
