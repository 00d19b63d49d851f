// Hostile review of the page on fastify (issue 12): answers the page's own handlers never see (a
// URL the router cannot decode) and input Temporal refuses, through the real server.
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { test } from 'node:test';
import { defineCatalog } from '../../schedules/job.js';
import { salesJob } from '../helpers/jobs.js';
import { realStack } from '../helpers/temporal.js';
import { postLogin, sessionCookie, startWeb } from '../helpers/web.js';

const stack = realStack();

/** A request sent as written: fetch would normalise or refuse a path like `/%`. */
function raw(url: string, method: string, path: string, headers: Record<string, string> = {}, body?: string) {
  const u = new URL(url);
  return new Promise<{ status: number; headers: Record<string, unknown>; body: string }>(
    (resolve, reject) => {
      const r = request({ host: u.hostname, port: u.port, method, path, headers }, (res) => {
        let b = '';
        res.on('data', (c: Buffer) => (b += c.toString()));
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: b }));
      });
      r.on('error', reject);
      if (body !== undefined) r.write(body);
      r.end();
    },
  );
}

test('a URL the router cannot decode is a 400 in the page format, with the CSP, naming no internals', async () => {
  const catalog = defineCatalog([salesJob('bad-url', { start: '2026-06-01T00:00:00Z' })]);
  const token = 'bad-url-token-0123';
  const web = await startWeb(stack, { token, catalog, env: {} });
  try {
    const cookie = sessionCookie(await postLogin(web.url, token));
    for (const [path, headers] of [
      ['/%', {}],
      ['/api/jobs/%E0%A4%A/grid', { cookie }],
    ] as const) {
      const r = await raw(web.url, 'GET', path, headers);
      assert.equal(r.status, 400, path);
      assert.ok(r.headers['content-security-policy'], `${path}: no CSP on the answer`);
      assert.equal(r.headers['x-frame-options'], 'DENY', path);
      assert.doesNotMatch(r.body, /FST_|statusCode/, `${path}: fastify's own error format: ${r.body}`);
      assert.match((JSON.parse(r.body) as { error: string }).error, /^path: .* is not a valid URL/, r.body);
    }
  } finally {
    await web.stop();
  }
});
