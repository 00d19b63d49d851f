// `npm run schema:dump`: migrates a fresh scratch database (on TEST_DATABASE_URL's server, else
// postgres://postgres@127.0.0.1:5432) to the latest and writes its schema to db/schema.sql, the file
// test/integration/db/schema-dump.test.ts compares. Run it after adding a migration; needs pg_dump 15.
import { writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { migratedSchema, SCHEMA_FILE } from '../test/helpers/schema-dump.js';

async function main(): Promise<void> {
  await writeFile(SCHEMA_FILE, await migratedSchema());
  console.log(`wrote ${fileURLToPath(SCHEMA_FILE)}`);
}

main().catch((err: Error) => {
  console.error(err.message);
  process.exitCode = 1;
});
