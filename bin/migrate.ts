// `npm run migrate`: applies the pending migrations to DATABASE_URL and says what it applied, so an
// upgrade can migrate once before its workers roll (each worker also migrates at start).
import { loadConfig } from '../config/env.js';
import { createDb, ensureDatabase, migrate } from '../db/database.js';

async function main(): Promise<void> {
  const { DATABASE_URL, TIDEMARK_SCHEMA } = loadConfig();
  await ensureDatabase(DATABASE_URL);
  const db = createDb(DATABASE_URL, { max: 1, schema: TIDEMARK_SCHEMA });
  try {
    const applied = await migrate(db);
    console.log(
      applied.length === 0
        ? 'no pending migrations'
        : `applied ${applied.length} migrations, last ${applied[applied.length - 1]}`,
    );
  } finally {
    await db.destroy();
  }
}

main().catch((err: Error) => {
  console.error(err.message);
  process.exitCode = 1;
});
