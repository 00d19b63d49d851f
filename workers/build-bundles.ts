// `npm run build`, after the TypeScript: the workflow bundles of the installed package
// (dist/workflow-bundles/), with and without the encrypting failure converter, without tracing.
// A worker loads one (createWorker) instead of running webpack at start.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { bundleWorkflows, PREBUILT_DIR, prebuiltName } from './create-worker.js';

mkdirSync(PREBUILT_DIR, { recursive: true });
for (const encryptFailures of [false, true]) {
  const bundle = await bundleWorkflows({ encryptFailures, interceptors: [] });
  writeFileSync(join(PREBUILT_DIR, prebuiltName(encryptFailures)), bundle.code);
}
