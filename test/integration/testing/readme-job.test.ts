// The job the README shows, as written: its catalog saved as tidemark.config.js (importing the
// package's entry), run for a window on a database that already has the user's own `orders`, and
// run again: the second time finds the window done and writes nothing.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { sql } from 'kysely';
import { runWindowOnce } from '../../../index.js';
import type { Catalog } from '../../../schedules/job.js';
import { createTestDb, type TestDb } from '../../helpers/db.js';

const readme = readFileSync(fileURLToPath(new URL('../../../README.md', import.meta.url)), 'utf8');
const blocks = [...readme.matchAll(/^```js\n([\s\S]*?)^```$/gm)].map((m) => m[1]!);
const folder = mkdtempSync(join(tmpdir(), 'tidemark-readme-job-'));

let t: TestDb;
before(async () => {
  t = await createTestDb({ migrated: false });
  // The user's database has its business tables already.
  await sql`create table public.orders (id int primary key, placed_at timestamptz not null, amount numeric not null)`.execute(
    t.db,
  );
  await sql`insert into public.orders values (1, '2026-12-01T10:05:00Z', 12.5), (2, '2026-12-01T10:59:59Z', 7.5),
    (3, '2026-12-01T11:00:00Z', 100)`.execute(t.db);
});
after(async () => {
  await t?.drop();
  rmSync(folder, { recursive: true, force: true });
});

test("the README's job, as written, sums a window once and changes nothing when run again", async () => {
  assert.equal(blocks.length, 1, 'the README shows one js block: the job of your own');
  const entry = pathToFileURL(fileURLToPath(new URL('../../../index.ts', import.meta.url))).href;
  // The README's folder: `npm init -y && npm pkg set type=module`, so the .js file is an ES module.
  assert.match(readme, /npm init -y && npm pkg set type=module/);
  writeFileSync(join(folder, 'package.json'), JSON.stringify({ name: 'my-jobs', type: 'module' }));
  const file = join(folder, 'tidemark.config.js');
  writeFileSync(file, blocks[0]!.replace(/from 'tidemark'/, `from ${JSON.stringify(entry)}`));
  const { default: catalog } = (await import(pathToFileURL(file).href)) as { default: Catalog };

  const run = () =>
    runWindowOnce({ databaseUrl: t.url, catalog, job: 'hourly-sales', start: '2026-12-01T10:00:00Z' });
  const first = await run();
  assert.equal(first.outcome, 'processed');
  assert.deepEqual(first.counts, { input: 1, applied: 1, quarantined: 0 });
  const second = await run();
  assert.equal(second.outcome, 'already-done');
  const rows = await sql<{
    window_key: string;
    total: string;
  }>`select window_key, total::text from public.hourly_sales`.execute(t.db);
  assert.deepEqual(rows.rows, [{ window_key: 'hourly-sales/2026-12-01T10:00:00Z', total: '20.0' }]);
});
