// A peer's worker in its own OS process, for the kill test: PEER_WORKER (JSON) says which peer,
// its database, its settings, its handler (careful or naive) and how long each job holds its
// transaction. Says READY once it
// takes jobs; it is stopped by SIGKILL (or SIGTERM at the end).
import { startGraphileWorker, type GraphileSettings, type PeerRun } from './graphile-worker.js';
import { startPgBossWorker, type PgBossSettings } from './pg-boss.js';

export interface PeerWorkerConfig {
  system: 'graphile-worker' | 'pg-boss';
  url: string;
  run: PeerRun;
  graphile: GraphileSettings;
  pgBoss: PgBossSettings;
}

const config = JSON.parse(process.env.PEER_WORKER ?? '{}') as PeerWorkerConfig;
const worker =
  config.system === 'graphile-worker'
    ? await startGraphileWorker(config.url, config.graphile, config.run)
    : await startPgBossWorker(config.url, config.pgBoss, config.run);
process.on('SIGTERM', () => {
  void worker.stop().then(() => process.exit(0));
});
console.log(`READY pid=${process.pid}`);
