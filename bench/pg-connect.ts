// Connections per second through db/pg-connection.ts with sslmode=disable and sslmode=prefer (the
// default) on a server without TLS: what prefer's TLS request costs each new connection. Rounds
// alternate the modes; the median counts. Only connects, runs `select 1` and disconnects.
//   node --import tsx bench/pg-connect.ts [connections per round=300] [concurrency=8] [rounds=5]
// The server: TEST_DATABASE_URL, else postgres://postgres@127.0.0.1:5432/postgres.
import { pgClient } from '../db/pg-connection.js';

const server = process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const [n = 300, concurrency = 8, rounds = 5] = process.argv.slice(2).map(Number);

async function round(mode: string): Promise<number> {
  const u = new URL(server);
  u.searchParams.set('sslmode', mode);
  u.searchParams.set('application_name', 'tidemark-bench-pg-connect');
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next++ < n) {
        const c = pgClient(u.toString());
        await c.connect();
        await c.query('select 1');
        await c.end();
      }
    }),
  );
  return n / ((performance.now() - started) / 1000);
}

const rates: Record<string, number[]> = { disable: [], prefer: [] };
for (let r = 0; r < rounds; r++) for (const mode of Object.keys(rates)) rates[mode]!.push(await round(mode));
for (const [mode, v] of Object.entries(rates)) {
  const median = [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)]!;
  console.log(
    `sslmode=${mode.padEnd(8)} ${median.toFixed(0)} connections/s (median of ${rounds} x ${n}, concurrency ${concurrency}; rounds ${v.map((x) => x.toFixed(0)).join(' ')})`,
  );
}
