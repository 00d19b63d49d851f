// Release points of the schema: each release names its last migration and the SHA-256 of every
// migration file it shipped. Workers of the previous release keep running while a new one migrates
// (workers migrate at start), so a release may only add (expand); a drop or a narrowing (contract)
// ships only once no running code uses the object, and is listed in `contractions` below.
// test/integration/db/migrations-*.test.ts and test/system/db/migrations-data.test.ts check all three against the files and the catalog.

/** A shipped schema: its last migration, and the files' SHA-256 (a shipped file is never edited). */
export interface Release {
  readonly name: string;
  readonly last: string;
  readonly sha256: Readonly<Record<string, string>>;
}

/**
 * A change the previous release's code would notice (a drop, a narrowing, a new CHECK or UNIQUE
 * its writers could violate), allowed because no code still running uses what it changes.
 * `change` is the finding exactly as the additive-schema test words it; `unusedAfter` names the
 * release after which no running code uses the object (workers of that release are all gone).
 */
export interface Contraction {
  readonly change: string;
  readonly unusedAfter: string;
  readonly why: string;
}

/** Oldest first; the last one is the release that workers of the previous version run. */
export const releases: readonly Release[] = Object.freeze([
  {
    name: '0.1.0',
    last: '20261201T0400_job_runs_window_idx',
    sha256: {
      '20261129T1000_ledger': 'fc6b519d48917c724f3fb1e8ca00ada88c878afbead066b3908cc35b3c2c8f40',
      '20261129T1001_sales_demo': '5da227cc6a0d05775d7b8b3c77db5edb536d9b2a21cc857e78eda69dfa9e0585',
      '20261129T1100_effects': '93d0a473d0dcb3611cfdca4851aba71b2225464a8d55e860544782da4ba1f699',
      '20261129T1200_rollup_demo': '675b10854f4ad40596d3d4c292426e14bb7c016a3a43a563da73c9d7a063a0bb',
      '20261129T1300_marketplace': '604832b54bf37d5035d18fcb03cf213a384f3d1ce01b4fc75c04af6e95fe0968',
      '20261129T1400_backups': '20edf850a486fb62bc1865c8571db71e9579714490aee7436060bc949d89363d',
      '20261129T1500_reruns': '63719117cdfb5f1cc2d90e55a729fd285be04e5ef8e808b0cc0ba4cbe7f9ffa0',
      '20261130T1200_fix-reruns_one_open_request':
        'dd4945b0f0ee647cfd2d7d959fadca162a4c78b87575e37a534666339eea0282',
      '20261130T1210_fix_alerts_window_notices':
        'bcf6253a2d7c2d834a80187232695ec7bb5c1f3079620de0171ddda484b60c04',
      '20261130T1800_ledger_finish_function':
        '3e161a559077ee02eae54183ffc5d46c09a3d99146d46196aaafcedb0848b764',
      '20261130T2200_ledger_flat_watermark':
        '8634564cec80690942836793d43f940dd1d7ef44543983d5c1dfafeef99c997f',
      '20261130T2230_ledger_claim_function':
        '4db3f4e633298affaf00e89c9bda9461a657b6df82ce6a4691589d179fe460b1',
      '20261130T2300_local_window_attempts':
        'bbfcf29572c05ade5b0adafcd40160c19a2fc6166c2331999883f07017bb8077',
      '20261201T0400_job_runs_window_idx': '14e07ccb4ae3137507abd4a155fbf5051e85313ce18b1ce09e7a86a9ac70f6e3',
    },
  },
]);

/** The release the previous version's workers run: migrations after its `last` must be additive. */
export const previousRelease = (): Release => releases[releases.length - 1]!;

/** Contract steps allowed since the previous release (none yet). */
export const contractions: readonly Contraction[] = Object.freeze([]);
