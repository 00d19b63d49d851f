// node --test-global-setup entry for the system tier. The runner loads this module without tsx's
// resolver, so it loads test/helpers/shared-temporal.ts through tsx's own API.
import { tsImport } from 'tsx/esm/api';

/** Loaded once: the teardown must see the server the set-up started. */
let loaded;
const shared = () => (loaded ??= tsImport('./shared-temporal.ts', import.meta.url));

export async function globalSetup() {
  await (await shared()).globalSetup();
}

export async function globalTeardown() {
  await (await shared()).globalTeardown();
}
