// The worker's workflowsPath: every workflow type, by name.
export { tick } from './tick.js';
export { window } from './window.js';
export { backfill, progressQuery } from './backfill.js';
export { watch } from './watch.js';
export { rerun, decideRerun, rerunState, rerunPreview } from './rerun.js';
