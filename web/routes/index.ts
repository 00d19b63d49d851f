// The page's route modules, registered by web/server.ts inside the authenticated scope. A new view's
// routes plug in with one line here: `import { xRoutes } from './x.js';` and `xRoutes` in the list.
import type { FastifyInstance } from 'fastify';
import type { WebDeps } from '../deps.js';
import { chartsRoutes } from './charts.js';
import { effectsRoutes } from './effects.js';
import { jobsRoutes } from './jobs.js';

export const routeModules: ((app: FastifyInstance, deps: WebDeps) => Promise<void>)[] = [
  jobsRoutes,
  chartsRoutes,
  effectsRoutes,
];
