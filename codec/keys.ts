// The payload keys from the environment: TIDEMARK_PAYLOAD_KEYS="k2:<base64>,k1:<base64>" and/or a file
// named by TIDEMARK_PAYLOAD_KEYS_FILE with the same list (commas or lines). The first key encrypts,
// every key decrypts (rotation: put the new one first, keep the old ones while histories need them).
// An error names the variable and the key id and says the fix; it never prints a key.
import { readFileSync } from 'node:fs';
import { ConfigError } from '../contract/config-error.js';

export interface PayloadKey {
  readonly id: string;
  readonly key: Buffer;
}

export interface PayloadKeys {
  /** The key new payloads are encrypted with. */
  readonly current: PayloadKey;
  /** Every configured key by id, the current one included. */
  readonly byId: ReadonlyMap<string, PayloadKey>;
}

const KEY_ID = /^[A-Za-z0-9._-]{1,64}$/;
const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;
const MAKE_ONE = 'make one with `openssl rand -base64 32`';

/** The keys configured in `env`, or undefined when neither variable is set. */
export function payloadKeysFrom(env: NodeJS.ProcessEnv = process.env): PayloadKeys | undefined {
  const entries: { variable: string; text: string }[] = [];
  const inline = env.TIDEMARK_PAYLOAD_KEYS?.trim();
  if (inline) entries.push({ variable: 'TIDEMARK_PAYLOAD_KEYS', text: inline });
  const file = env.TIDEMARK_PAYLOAD_KEYS_FILE?.trim();
  if (file) {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch (err) {
      throw new ConfigError(
        'TIDEMARK_PAYLOAD_KEYS_FILE',
        `cannot read ${JSON.stringify(file)} (${(err as NodeJS.ErrnoException).code ?? 'error'}); point it at a readable file of id:base64 keys, one a line`,
      );
    }
    entries.push({ variable: 'TIDEMARK_PAYLOAD_KEYS_FILE', text });
  }
  if (entries.length === 0) return undefined;
  return parseKeyList(entries);
}

/**
 * Key lists ("k2:<base64>,k1:<base64>", commas or lines) from each source in turn: the first key
 * encrypts, every key decrypts. `variable` names the source in errors (an environment variable, or
 * a file with `kind: 'setting'`); a key itself is never printed.
 */
export function parseKeyList(
  entries: readonly { variable: string; text: string; kind?: 'variable' | 'setting' }[],
): PayloadKeys {
  const keys: PayloadKey[] = [];
  for (const { variable, text, kind } of entries)
    for (const [i, item] of text
      .split(/[,\n]/)
      .map((s) => s.trim())
      .filter(Boolean)
      .entries()) {
      const colon = item.indexOf(':');
      const id = colon < 0 ? '' : item.slice(0, colon).trim();
      const material = colon < 0 ? '' : item.slice(colon + 1).trim();
      if (!KEY_ID.test(id))
        throw new ConfigError(
          variable,
          `entry ${i + 1} is not "<id>:<base64 key>" with an id of letters, digits, ".", "_" or "-" (up to 64); write e.g. k2:<base64>,k1:<base64>`,
          kind,
        );
      const key = Buffer.from(material, 'base64');
      if (!BASE64.test(material) || key.toString('base64') !== material)
        throw new ConfigError(variable, `key ${JSON.stringify(id)} is not valid base64; ${MAKE_ONE}`, kind);
      if (key.length !== 32)
        throw new ConfigError(
          variable,
          `key ${JSON.stringify(id)} is ${key.length} bytes; AES-256 needs 32 bytes, ${MAKE_ONE}`,
          kind,
        );
      if (keys.some((k) => k.id === id))
        throw new ConfigError(
          variable,
          `key id ${JSON.stringify(id)} appears twice; give every key its own id (what is encrypted names the id of its key)`,
          kind,
        );
      keys.push({ id, key });
    }
  if (keys.length === 0)
    throw new ConfigError(
      entries[0]!.variable,
      `holds no key; write e.g. k1:<base64>, ${MAKE_ONE}`,
      entries[0]!.kind,
    );
  return { current: keys[0]!, byId: new Map(keys.map((k) => [k.id, k])) };
}
