// The page's route modules, registered by web/server.ts inside the authenticated scope. A view's
// routes plug in with two lines here: its import, and one `routeModules.push(xRoutes);`.
import type { FastifyInstance } from 'fastify';
import type { WebDeps } from '../deps.js';
import { approvalsRoutes } from './approvals.js';
import { backfillsRoutes } from './backfills.js';
import { backupsRoutes } from './backups.js';
import { chartsRoutes } from './charts.js';
import { effectsRoutes } from './effects.js';
import { jobsRoutes } from './jobs.js';
import { windowsRoutes } from './windows.js';

export type RouteModule = (app: FastifyInstance, deps: WebDeps) => Promise<void>;

export const routeModules: RouteModule[] = [];
routeModules.push(jobsRoutes);
routeModules.push(backfillsRoutes);
routeModules.push(windowsRoutes);
routeModules.push(chartsRoutes);
routeModules.push(effectsRoutes);
routeModules.push(approvalsRoutes);
routeModules.push(backupsRoutes);
