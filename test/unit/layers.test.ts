// The layer rule (LAYERS in eslint.config.js): an import up the layers or sideways fails lint, one
// down the layers passes, and the repository itself has none.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { ESLint } from 'eslint';

const root = fileURLToPath(new URL('../..', import.meta.url));
const eslint = new ESLint({ cwd: root });

/** The layer rule's messages for `code` linted as if it were the file at `path`. */
async function layerErrors(path: string, code: string): Promise<string[]> {
  const [result] = await eslint.lintText(code, { filePath: join(root, path) });
  return result!.messages.filter((m) => m.ruleId === 'tidemark/layers').map((m) => m.message);
}

test('an import up the layers fails lint, naming both folders', async () => {
  const errors = await layerErrors(
    'db/probe.ts',
    "import { runWorker } from '../workers/worker.js';\nrunWorker();\n",
  );
  assert.equal(errors.length, 1, errors.join('\n'));
  assert.match(errors[0]!, /db\/ may not import workers\/ \(in a higher layer/);
});

test('type-only imports, re-exports and dynamic imports up the layers fail too', async () => {
  const code = [
    "import type { Config } from '../../config/env.js';",
    "export { runWeb } from '../../web/main.js';",
    "export const load = () => import('../../cli/main.js');",
    'export type C = Config;',
    '',
  ].join('\n');
  const errors = await layerErrors('jobs/backup/probe.ts', code);
  assert.equal(errors.length, 3, errors.join('\n'));
});

test('an import of a folder beside it in the same layer fails', async () => {
  const errors = await layerErrors(
    'jobs/probe.ts',
    "import { createActivities } from '../activities/index.js';\nvoid createActivities;\n",
  );
  assert.match(errors.join('\n'), /jobs\/ may not import activities\/ \(beside it in the same layer/);
});

test('imports down the layers and within a folder pass', async () => {
  const code = [
    "import { windowKey } from '../contract/window-key.js';",
    "import { createDb } from '../db/database.js';",
    "import { alerting } from './alerts.js';",
    'void windowKey; void createDb; void alerting;',
    '',
  ].join('\n');
  assert.deepEqual(await layerErrors('activities/probe.ts', code), []);
});

test("the fault suite may use the tests' servers; product code may not", async () => {
  const code = "import { startSmtp } from '../test/helpers/smtp.js';\nvoid startSmtp;\n";
  assert.deepEqual(await layerErrors('chaos/probe.ts', code), []);
  assert.equal((await layerErrors('workers/probe.ts', code)).length, 1);
});

test('the repository has no import against the layers', async () => {
  const results = await eslint.lintFiles(['.']);
  const wrong = results.flatMap((r) =>
    r.messages
      .filter((m) => m.ruleId === 'tidemark/layers')
      .map((m) => `${r.filePath}:${m.line} ${m.message}`),
  );
  assert.deepEqual(wrong, []);
});
