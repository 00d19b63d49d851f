// The package's `tidemark/temporal` entry: connecting to Temporal as tidemark's own processes do
// (settings, TLS, API keys, errors that say what to fix). Apart from the main entry, so that type
// checking a catalog does not load the Temporal worker SDK's declarations (which need
// skipLibCheck under @types/node 24 and later).
export {
  connectTemporalClient,
  connectTemporalWorker,
  TemporalConnectError,
} from './workers/temporal-connection.js';
