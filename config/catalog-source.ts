// Where the job catalog comes from. In order: `--catalog <path>`, TIDEMARK_CATALOG,
// tidemark.config.js|mjs|ts in the working directory, else the demo catalog (jobs/catalog.ts;
// `demo` names it on purpose).
// The module exports the catalog as its default export or as `catalog`: a Catalog, a list of job
// definitions, or a function of the config returning either. A .ts module is loaded through tsx,
// and tsx is loaded only then. Every entry point (worker, CLI, web, Slack, sync, dev) calls this.
import { existsSync, readdirSync, statSync } from 'node:fs';
import { extname, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { buildCatalog } from '../jobs/catalog.js';
import { withHousekeeping } from '../jobs/housekeeping/index.js';
import { type Catalog, type Job, type JobSpec } from '../schedules/job.js';
import { defineCatalog } from '../schedules/define.js';
import type { Config } from './env.js';

export const CONFIG_FILES = Object.freeze([
  'tidemark.config.js',
  'tidemark.config.mjs',
  'tidemark.config.ts',
]);

export class CatalogSourceError extends Error {
  readonly code = 'CATALOG_SOURCE';
  constructor(
    readonly path: string,
    detail: string,
  ) {
    // The cause's text is in the message, and no cause is kept: what prints the innermost cause
    // of an error (the CLI) must still name the file.
    super(`catalog ${path}: ${detail}`);
    this.name = 'CatalogSourceError';
  }
}

export interface CatalogSourceOptions {
  /** The --catalog option's value. */
  flag?: string | undefined;
  /** TIDEMARK_CATALOG. */
  env?: string | undefined;
  /** Where relative paths and tidemark.config.* are looked up; default the working directory. */
  cwd?: string;
  /** Where falling back to the demo catalog is said; default stderr. */
  warn?: (line: string) => void;
  /** No module named means the demo, on purpose (tidemark dev, npm start): not said, not a fallback. */
  demoByDefault?: boolean;
}

let flagged: string | undefined;

/** What names the demo catalog on purpose: TIDEMARK_CATALOG=demo or --catalog demo. */
export const DEMO = 'demo';

// Demo catalogs loaded because nothing named a catalog: a schedule sync will not delete with one.
const fallbacks = new WeakSet<Catalog>();
// Every demo catalog loaded (named on purpose or fallen back to): tidemark dev runs its extras for them only.
const demos = new WeakSet<Catalog>();

/** Whether the catalog is this repository's demo (named, or fallen back to), not the user's. */
export const isDemoCatalog = (catalog: Catalog): boolean => demos.has(catalog);

const demo = (catalog: Catalog): Catalog => {
  demos.add(catalog);
  return catalog;
};

/** Whether the catalog is the demo that tidemark fell back to because no catalog module was named. */
export const isFallbackDemo = (catalog: Catalog): boolean => fallbacks.has(catalog);

/** The CLI's `--catalog <path>`: from then on it names the catalog for every entry point of the process. */
export function useCatalogFlag(path: string | undefined): void {
  flagged = path;
}

/** The module that names the catalog, or undefined for the demo catalog. */
export function catalogPath(opts: CatalogSourceOptions = {}): string | undefined {
  const cwd = opts.cwd ?? process.cwd();
  const named = opts.flag || opts.env;
  if (named) return resolve(cwd, named);
  return CONFIG_FILES.map((f) => resolve(cwd, f)).find((p) => existsSync(p));
}

const isTypeScript = (path: string) => ['.ts', '.mts', '.cts'].includes(extname(path));

async function importModule(path: string): Promise<Record<string, unknown>> {
  if (!isTypeScript(path)) return (await import(pathToFileURL(path).href)) as Record<string, unknown>;
  const { tsImport } = await import('tsx/esm/api');
  const mod = (await tsImport(pathToFileURL(path).href, import.meta.url)) as Record<string, unknown>;
  // Outside a "type": "module" package tsx loads the file as CommonJS: its exports sit under default.
  const inner = mod.default as Record<string, unknown> | undefined;
  return inner && typeof inner === 'object' && ('default' in inner || 'catalog' in inner) ? inner : mod;
}

const isCatalog = (v: unknown): v is Catalog =>
  typeof v === 'object' && v !== null && Array.isArray((v as Catalog).jobs) && 'get' in v;

const toStderr = (line: string): void => void process.stderr.write(`${line}\n`);

/**
 * No module named: the demo catalog, said out loud, since a worker or a schedule sync started in
 * the wrong directory would otherwise run (and sync) the demo's jobs instead of yours. A
 * tidemark.config file of another extension is refused rather than passed over.
 */
function demoCatalog(
  config: Config,
  cwd: string,
  warn: (line: string) => void = toStderr,
  onPurpose = false,
): Catalog {
  const misnamed = readdirSync(cwd).find((f) => f.startsWith('tidemark.config.'));
  if (misnamed)
    throw new CatalogSourceError(resolve(cwd, misnamed), `is not read: name it ${CONFIG_FILES.join(', ')}`);
  if (onPurpose) return demo(buildCatalog(config));
  warn(
    `tidemark: no catalog module (--catalog, TIDEMARK_CATALOG, or ${CONFIG_FILES.join(', ')} in ${cwd}): running the demo catalog`,
  );
  const catalog = demo(buildCatalog(config));
  fallbacks.add(catalog);
  return catalog;
}

/** Loads the catalog from the module the options (or the environment) name; the demo catalog when none. */
export async function loadCatalog(config: Config, opts: CatalogSourceOptions = {}): Promise<Catalog> {
  const env = 'env' in opts ? opts.env : process.env.TIDEMARK_CATALOG;
  const flag = 'flag' in opts ? opts.flag : flagged;
  if ((flag || env) === DEMO) return demo(buildCatalog(config));
  const path = catalogPath({ ...opts, flag, env });
  if (!path) return demoCatalog(config, opts.cwd ?? process.cwd(), opts.warn, opts.demoByDefault);
  const from = flag ? '--catalog' : env ? 'TIDEMARK_CATALOG' : 'the working directory';
  if (!existsSync(path)) throw new CatalogSourceError(path, `does not exist (named by ${from})`);
  if (statSync(path).isDirectory()) {
    const inside = CONFIG_FILES.map((f) => resolve(path, f)).find((p) => existsSync(p));
    throw new CatalogSourceError(
      path,
      `is a directory (named by ${from}): name the module${inside ? `, ${inside}` : ` in it (${CONFIG_FILES.join(', ')})`}`,
    );
  }
  let mod: Record<string, unknown>;
  try {
    mod = await importModule(path);
  } catch (err) {
    throw new CatalogSourceError(path, `could not be loaded: ${(err as Error).message}`);
  }
  const exported = mod.default ?? mod.catalog;
  if (exported === undefined) {
    const names = Object.keys(mod).join(', ') || 'nothing';
    throw new CatalogSourceError(
      path,
      `exports no catalog: export default (or \`catalog\`); it exports ${names}`,
    );
  }
  try {
    const value: unknown = typeof exported === 'function' ? await exported(config) : exported;
    // The built-in housekeeping job joins every catalog (docs/guides/housekeeping.md; TIDEMARK_HOUSEKEEPING=off).
    if (isCatalog(value)) return withHousekeeping(value, config);
    if (Array.isArray(value)) return withHousekeeping(defineCatalog(value as (JobSpec | Job)[]), config);
    throw new Error(
      `its export is ${value === null ? 'null' : typeof value}: export a catalog (defineCatalog([...])), a list of jobs, or a function (config) => either`,
    );
  } catch (err) {
    throw new CatalogSourceError(path, (err as Error).message);
  }
}
