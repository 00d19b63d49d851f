// Failure types (contract/failures.ts): each name an activity or a workflow fails with is typed
// once, and the product's code refers to it there, never by a string literal of its own.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import {
  BAD_INPUT,
  DECISION_FAILURE,
  EFFECT_FAILURE,
  EFFECT_REFUSALS,
  FAILURE,
} from '../../contract/failures.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const names = [
  ...Object.values(FAILURE),
  ...Object.values(EFFECT_FAILURE),
  ...Object.values(DECISION_FAILURE),
];

test('every failure type has one name, used by no other type', () => {
  assert.equal(new Set(names).size, names.length, names.join(', '));
  for (const name of names) assert.match(name, /^[A-Z][A-Za-z]+$/);
});

test('the product names a failure type only through the contract, never as a string literal', () => {
  const files = execFileSync('git', ['ls-files', '*.ts'], { cwd: root, encoding: 'utf8' })
    .split('\n')
    .filter((f) => f && !f.startsWith('test/') && f !== 'contract/failures.ts');
  const literal = new RegExp(`['"\`](${names.join('|')})['"\`]`, 'g');
  const found = files.flatMap((file) =>
    [...readFileSync(join(root, file), 'utf8').matchAll(literal)].map((m) => `${file}: ${m[1]}`),
  );
  assert.deepEqual(found, []);
});

test('bad input and refused effects are listed from the same names', () => {
  assert.deepEqual(
    [...BAD_INPUT].sort(),
    [
      FAILURE.unknownJob,
      FAILURE.badWindow,
      FAILURE.windowNotClosed,
      FAILURE.countMismatch,
      FAILURE.badRange,
    ].sort(),
  );
  assert.deepEqual(
    [...EFFECT_REFUSALS].sort(),
    [EFFECT_FAILURE.rejected, EFFECT_FAILURE.notConfigured, EFFECT_FAILURE.unknownEffect].sort(),
  );
  assert.ok(!BAD_INPUT.includes(FAILURE.windowNotClosedYet), 'not closed yet is a wait, retried');
});
