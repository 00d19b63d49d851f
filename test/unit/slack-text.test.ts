import assert from 'node:assert/strict';
import { test } from 'node:test';
import { slackEscape } from '../../contract/slack-text.js';

test('a rerun reason cannot mention a channel or hide a link in the Slack request', () => {
  assert.equal(
    slackEscape('fix <!channel> see <https://evil.example|docs> & more'),
    'fix &lt;!channel&gt; see &lt;https://evil.example|docs&gt; &amp; more',
  );
  assert.equal(slackEscape('plain reason'), 'plain reason');
});
