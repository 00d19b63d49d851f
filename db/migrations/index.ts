// Append-only list of migrations, in order. Never edit one that has shipped; add a new file.
import type { Migration } from 'kysely/migration';
import * as ledger from './20261129T1000_ledger.js';
import * as salesDemo from './20261129T1001_sales_demo.js';
import * as effects from './20261129T1100_effects.js';
import * as rollupDemo from './20261129T1200_rollup_demo.js';
import * as marketplace from './20261129T1300_marketplace.js';
import * as backups from './20261129T1400_backups.js';
import * as reruns from './20261129T1500_reruns.js';
import * as oneOpenRerun from './20261130T1200_fix-reruns_one_open_request.js';
import * as windowNotices from './20261130T1210_fix_alerts_window_notices.js';
import * as finishFunction from './20261130T1800_ledger_finish_function.js';
import * as flatWatermark from './20261130T2200_ledger_flat_watermark.js';
import * as claimFunction from './20261130T2230_ledger_claim_function.js';
import * as localAttempts from './20261130T2300_local_window_attempts.js';
import * as runsByWindow from './20261201T0400_job_runs_window_idx.js';
import * as doneSpans from './20261201T1000_done_spans.js';
import * as housekeeping from './20261201T1000_housekeeping_progress.js';
import * as scaleIndexes from './20261201T1000_scale_indexes.js';
import * as flatCounts from './20261201T2000_flat_counts.js';
import * as spanLockHorizon from './20261201T2100_span_lock_horizon.js';
import * as housekeepingIndexes from './20261201T2200_housekeeping_indexes.js';
import * as housekeepingIndexesValid from './20261201T2230_housekeeping_indexes_valid.js';
import * as spanCountBacklog from './20261201T2300_span_count_backlog.js';
import * as backupChecks from './20261202T1600_backup_checks.js';
import * as functionsSearchPath from './20261204T0900_ledger_functions_search_path.js';
import * as effectRetry from './20261204T1400_effect_retry.js';
import * as people from './20261205T0900_people.js';
import * as countsSkipUnchanged from './20261205T1200_counts_skip_unchanged.js';
import * as groupFunctions from './20261205T1500_ledger_group_functions.js';
import * as withoutDemo from './without-demo.js';

/** Every migration file as it shipped, in order: what a database of an earlier release ran. */
export const shipped: Readonly<Record<string, Migration>> = Object.freeze({
  '20261129T1000_ledger': ledger,
  '20261129T1001_sales_demo': salesDemo,
  '20261129T1100_effects': effects,
  '20261129T1200_rollup_demo': rollupDemo,
  '20261129T1300_marketplace': marketplace,
  '20261129T1400_backups': backups,
  '20261129T1500_reruns': reruns,
  '20261130T1200_fix-reruns_one_open_request': oneOpenRerun,
  '20261130T1210_fix_alerts_window_notices': windowNotices,
  '20261130T1800_ledger_finish_function': finishFunction,
  '20261130T2200_ledger_flat_watermark': flatWatermark,
  '20261130T2230_ledger_claim_function': claimFunction,
  '20261130T2300_local_window_attempts': localAttempts,
  '20261201T0400_job_runs_window_idx': runsByWindow,
  '20261201T1000_done_spans': doneSpans,
  '20261201T1000_housekeeping_progress': housekeeping,
  '20261201T1000_scale_indexes': scaleIndexes,
  '20261201T2000_flat_counts': flatCounts,
  '20261201T2100_span_lock_horizon': spanLockHorizon,
  '20261201T2200_housekeeping_indexes': housekeepingIndexes,
  '20261201T2230_housekeeping_indexes_valid': housekeepingIndexesValid,
  '20261201T2300_span_count_backlog': spanCountBacklog,
  '20261202T1600_backup_checks': backupChecks,
  '20261204T0900_ledger_functions_search_path': functionsSearchPath,
  '20261204T1400_effect_retry': effectRetry,
  '20261205T0900_people': people,
  '20261205T1200_counts_skip_unchanged': countsSkipUnchanged,
  '20261205T1500_ledger_group_functions': groupFunctions,
});

/**
 * What `migrate` runs: the shipped list, with release 0.1.0's four steps that made the demo's tables
 * run without them (db/migrations/without-demo.ts): the demo catalog makes its own.
 */
export const migrations: Readonly<Record<string, Migration>> = Object.freeze({
  ...shipped,
  '20261129T1001_sales_demo': withoutDemo.salesDemo,
  '20261129T1200_rollup_demo': withoutDemo.rollupDemo,
  '20261129T1300_marketplace': withoutDemo.marketplace,
  '20261129T1500_reruns': withoutDemo.reruns,
});
