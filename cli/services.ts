// The long-running processes `tidemark <name>` starts: each one runs until SIGINT/SIGTERM.
// Imported only when named, so the short commands do not load a worker or the Slack app.
export interface Service {
  name: string;
  summary: string;
  start(): Promise<void>;
}

export const SERVICES: readonly Service[] = [
  {
    name: 'worker',
    summary: 'a worker on the task queue (run any number, on any hosts)',
    start: async () => (await import('../workers/worker.js')).runWorker(),
  },
  {
    name: 'web',
    summary: 'the management page (TIDEMARK_WEB_TOKEN, TIDEMARK_WEB_PORT, TIDEMARK_WEB_HOST)',
    start: async () => (await import('../web/main.js')).runWeb(),
  },
  {
    name: 'slack',
    summary: 'the Slack app (SLACK_SIGNING_SECRET, SLACK_BOT_TOKEN)',
    start: async () => (await import('../slack/main.js')).runSlack(),
  },
  {
    name: 'dev',
    summary: 'everything on one machine: a Temporal dev server (or TEMPORAL_ADDRESS), worker, page',
    start: async () => (await import('../bin/dev.js')).runDev(),
  },
];
