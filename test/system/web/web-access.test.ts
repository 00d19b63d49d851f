// Who reaches what on the page's server, and what a stranger learns from its answers: guessing the
// bearer token on /api is throttled as guessing it at /login is; behind a TLS proxy the throttle
// keys on the client (TIDEMARK_WEB_TRUST_PROXY), not on the proxy; an unknown path answers the same
// whatever the token; a 500 says nothing of its cause but a reference that finds it in the log.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { memoryLogger } from '../../../activities/logger.js';
import { createDb } from '../../../db/database.js';
import { defineCatalog } from '../../../schedules/define.js';
import { salesJob } from '../../helpers/jobs.js';
import { realStack } from '../../helpers/temporal.js';
import { postLogin, startWeb } from '../../helpers/web.js';

const stack = realStack();
const catalog = defineCatalog([salesJob('access', { start: '2026-06-01T00:00:00Z' })]);
const token = 'access-token-0123456';

const api = (url: string, bearer: string, headers: Record<string, string> = {}) =>
  fetch(`${url}/api/state`, { headers: { authorization: `Bearer ${bearer}`, ...headers } });

test('guessing the bearer token on /api is throttled: past 20 wrong tokens a minute from one address, 429 (the right one too)', async () => {
  const web = await startWeb(stack, { token, catalog, env: {} });
  try {
    const answers: number[] = [];
    for (let i = 0; i < 20; i++) answers.push((await api(web.url, `wrong-guess-${i}`)).status);
    assert.deepEqual(new Set(answers), new Set([401]));
    const throttled = await api(web.url, token);
    assert.equal(throttled.status, 429);
    assert.match(await throttled.text(), /too many failed logins from this address/);
  } finally {
    await web.stop();
  }
});

test('behind a trusted proxy the throttle keys on the client it names, so one guesser does not lock everyone out', async () => {
  const web = await startWeb(stack, { token, catalog, env: { TIDEMARK_WEB_TRUST_PROXY: '127.0.0.1' } });
  try {
    const from = (client: string) => ({ 'x-forwarded-for': client });
    for (let i = 0; i < 20; i++) await api(web.url, `wrong-${i}`, from('203.0.113.7'));
    assert.equal((await api(web.url, token, from('203.0.113.7'))).status, 429);
    assert.equal(
      (await api(web.url, token, from('198.51.100.4'))).status,
      200,
      'another client is not locked out',
    );
    for (let i = 0; i < 20; i++)
      await fetch(`${web.url}/login`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', ...from('203.0.113.8') },
        body: new URLSearchParams({ token: `wrong-${i}` }),
        redirect: 'manual',
      });
    const login = await fetch(`${web.url}/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', ...from('198.51.100.4') },
      body: new URLSearchParams({ token }),
      redirect: 'manual',
    });
    assert.equal(login.status, 303, 'a login from another client goes through');
  } finally {
    await web.stop();
  }
  // Without the setting, a forwarded-for header is not believed: the guesser cannot pick its address.
  const plain = await startWeb(stack, { token, catalog, env: {} });
  try {
    for (let i = 0; i < 20; i++) await api(plain.url, `wrong-${i}`, { 'x-forwarded-for': `192.0.2.${i}` });
    assert.equal((await api(plain.url, token, { 'x-forwarded-for': '192.0.2.200' })).status, 429);
  } finally {
    await plain.stop();
  }
});

test('an unknown path answers 404 whatever the token: it tells a guesser nothing', async () => {
  const web = await startWeb(stack, { token, catalog, env: {} });
  try {
    for (const path of ['/nope', '/api-nope', '/.env'])
      for (const auth of [undefined, `Bearer ${token}`, 'Bearer wrong-token-999'])
        assert.equal(
          (await fetch(`${web.url}${path}`, { headers: auth ? { authorization: auth } : {} })).status,
          404,
          `${path} with ${auth ?? 'no token'}`,
        );
    assert.equal((await postLogin(web.url, token)).status, 303, 'unknown paths count as no failed login');
  } finally {
    await web.stop();
  }
});

test('a 500 carries a reference, never its cause; the log has the cause under that reference, its secrets redacted', async () => {
  const logger = memoryLogger();
  // A database the page cannot reach: reading the state fails as a real one would.
  const unreachable = createDb('postgres://app:hunter2-db@db-primary.corp.invalid:5432/shop', { max: 1 });
  const web = await startWeb(stack, { token, catalog, env: {}, logger, db: unreachable });
  try {
    const r = await api(web.url, token);
    assert.equal(r.status, 500);
    const body = (await r.json()) as { error: string };
    const ref = /reference ([0-9a-f-]{36})/.exec(body.error)?.[1];
    assert.ok(ref, body.error);
    assert.doesNotMatch(body.error, /ENOTFOUND|corp\.invalid|hunter2/);
    const logged = logger.lines.find((l) => l.includes(ref));
    assert.ok(logged, logger.lines.join('\n'));
    assert.match(logged, /ENOTFOUND db-primary\.corp\.invalid/);
    assert.doesNotMatch(logger.lines.join('\n'), /hunter2/);
  } finally {
    await web.stop();
    await unreachable.destroy();
  }
});

test('the page itself and the codec server tell a guesser nothing: / ignores a bearer, the codec counts wrong tokens', async () => {
  const web = await startWeb(stack, {
    token,
    catalog,
    env: { TIDEMARK_CODEC_TOKEN: 'codec-token-0123456789' },
  });
  try {
    const page = async (bearer: string) =>
      /data-auth="(yes|no)"/.exec(
        await (await fetch(`${web.url}/`, { headers: { authorization: `Bearer ${bearer}` } })).text(),
      )?.[1];
    assert.equal(await page('wrong-token-1234'), 'no');
    assert.equal(await page(token), 'no', 'the same answer for the right token: log in with the form');
    const decode = (bearer: string) =>
      fetch(`${web.url}/codec/decode`, {
        method: 'POST',
        headers: { authorization: `Bearer ${bearer}`, 'content-type': 'application/json' },
        body: '{"payloads":[]}',
      });
    for (let i = 0; i < 20; i++) assert.equal((await decode(`wrong-codec-${i}`)).status, 401);
    assert.equal((await decode('codec-token-0123456789')).status, 429, 'the right one too, past the limit');
  } finally {
    await web.stop();
  }
});
