// node --test-global-setup entry for the system tier. The runner loads this module without tsx's
// resolver, so it loads test/helpers/shared-temporal.ts through tsx's own API.
import { randomUUID } from 'node:crypto';
import { tsImport } from 'tsx/esm/api';

/** Loaded once: the teardown must see the server the set-up started. */
let loaded;
const shared = () => (loaded ??= tsImport('./shared-temporal.ts', import.meta.url));

export async function globalSetup() {
  // One id for the run: files that install the packed package share one tarball (test/helpers/pack.ts).
  process.env.TIDEMARK_TEST_RUN ??= randomUUID();
  await (await shared()).globalSetup();
}

export async function globalTeardown() {
  await (await shared()).globalTeardown();
}
