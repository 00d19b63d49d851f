// Backfills: choose a job and a range (read in the job's zone or in UTC), see a dry-run preview
// (how many windows, the first and last, how many are done already and skipped), then start it;
// below, the progress of running and recent backfills as stacked bars with counts. A failed
// window makes the whole backfill show as failed: never hidden in a percentage.
import { h } from '../dom.js';
import { ago, both } from '../time.js';

const SEGMENTS = [
  ['done', 'done'],
  ['failed', 'failed'],
  ['running', 'running'],
  ['pending', 'pending'],
];

function times(w) {
  if (!w) return '-';
  return `${w.startLocal} (${w.start})`;
}

function previewPanel(p) {
  const items = [
    h(
      'li',
      {},
      h('b', {}, String(p.capped ? `more than ${p.windows}` : p.windows)),
      ` windows of ${p.job} start in [${p.from}, ${p.to}) UTC`,
    ),
    h('li', {}, 'First window: ', times(p.first)),
    h('li', {}, 'Last window: ', times(p.last)),
    h(
      'li',
      {},
      h('b', {}, String(p.alreadyDone)),
      ' already done: skipped, not re-applied (the backfill runs only windows without a done marker; a rerun is the way to redo one)',
    ),
    p.notClosed
      ? h(
          'li',
          {},
          h('b', {}, String(p.notClosed)),
          " not closed yet: left out; the job's ticks process them once they close",
        )
      : null,
    h('li', {}, h('b', {}, String(p.toProcess)), ' to process'),
  ];
  return h('ul', { class: 'preview-facts' }, items);
}

function bar(row) {
  const c = row.counts;
  if (!c) return h('p', { class: 'note' }, row.note ?? 'no progress known');
  const total = c.done + c.failed + c.running + c.pending;
  const barEl = h('div', {
    class: 'bar',
    role: 'img',
    'aria-label': SEGMENTS.map(([k, label]) => `${c[k]} ${label}`).join(', ') + ` of ${total} windows`,
  });
  for (const [k] of SEGMENTS) {
    if (!c[k]) continue;
    const seg = h('span', { class: `seg ${k}` });
    // CSSOM, not a style attribute: the CSP allows no inline style.
    seg.style.flexGrow = String(c[k]);
    barEl.append(seg);
  }
  const legend = h(
    'ul',
    { class: 'legend' },
    SEGMENTS.map(([k, label]) =>
      h(
        'li',
        { class: `key ${k}${c[k] ? '' : ' zero'}` },
        h('b', {}, String(c[k])),
        ` ${label}`,
        k === 'done' && c.alreadyDone ? ` (${c.alreadyDone} were done already)` : '',
      ),
    ),
  );
  return [barEl, legend];
}

function progressRow(row, ctx) {
  const zone = ctx.job(row.job)?.timezone ?? 'UTC';
  const [fromLocal] = both(row.from, zone);
  const [toLocal] = both(row.to, zone);
  return h(
    'li',
    { class: `backfill ${row.outcome}`, dataset: { workflow: row.workflowId } },
    h(
      'div',
      { class: 'backfill-head' },
      h('b', {}, row.job),
      h(
        'span',
        { class: `badge ${row.outcome}` },
        row.outcome === 'failed' ? `failed (${row.status})` : row.status,
      ),
      h('span', {}, `${row.from} to ${row.to} UTC`),
      h('span', { class: 'utc' }, `started ${ago(row.startedAt)}`),
      zone !== 'UTC' ? h('span', { class: 'utc' }, `${fromLocal} to ${toLocal}`) : null,
      ctx.webUi
        ? h(
            'a',
            { href: `${ctx.webUi}/${encodeURIComponent(row.workflowId)}`, rel: 'noopener' },
            'open in the Temporal Web UI',
          )
        : null,
    ),
    bar(row),
    row.failedWindows.length
      ? h(
          'p',
          { class: 'error' },
          `Failed windows: ${row.failedWindows.slice(0, 10).join(', ')}${row.failedWindows.length > 10 ? ` and ${row.failedWindows.length - 10} more` : ''}`,
        )
      : null,
    row.counts && row.note ? h('p', { class: 'note' }, row.note) : null,
  );
}

export async function renderBackfills(root, ctx) {
  const jobs = ctx.jobs;
  const params = new URLSearchParams(location.hash.split('?')[1] ?? '');
  const job = h(
    'select',
    { id: 'bf-job', name: 'job' },
    jobs.map((j) => h('option', { value: j.job, selected: j.job === params.get('job') }, j.job)),
  );
  const zoneJob = h('input', { type: 'radio', name: 'zone', value: 'job', id: 'bf-zone-job', checked: true });
  const zoneUtc = h('input', { type: 'radio', name: 'zone', value: 'utc', id: 'bf-zone-utc' });
  const zoneJobLabel = h('label', { for: 'bf-zone-job' });
  const from = h('input', { id: 'bf-from', name: 'from', type: 'datetime-local', required: true });
  const to = h('input', { id: 'bf-to', name: 'to', type: 'datetime-local', required: true });
  const batch = h('input', {
    id: 'bf-batch',
    name: 'batch',
    type: 'number',
    min: 1,
    max: 1000,
    inputmode: 'numeric',
  });
  const preview = h('div', { id: 'bf-preview', class: 'preview', 'aria-live': 'polite' });
  const confirmBox = h('input', { type: 'checkbox', id: 'bf-confirm' });
  const start = h('button', { type: 'button', id: 'bf-start', disabled: true }, 'Start backfill');
  let current = null;

  const zoneNote = () => {
    const z = ctx.job(job.value)?.timezone ?? 'UTC';
    zoneJobLabel.replaceChildren(`the job's zone (${z})`);
  };
  const invalidate = () => {
    current = null;
    start.disabled = true;
    preview.replaceChildren();
  };
  zoneNote();
  job.addEventListener('change', () => {
    zoneNote();
    invalidate();
  });
  for (const el of [zoneJob, zoneUtc, from, to, batch]) el.addEventListener('input', invalidate);

  const form = h(
    'form',
    {
      class: 'backfill-form',
      onsubmit: async (e) => {
        e.preventDefault();
        invalidate();
        try {
          const p = await ctx.post(`/api/jobs/${encodeURIComponent(job.value)}/backfill/preview`, {
            from: from.value,
            to: to.value,
            zone: zoneUtc.checked ? 'utc' : 'job',
          });
          current = p;
          preview.replaceChildren(h('h2', {}, 'Preview (dry run: nothing started)'), previewPanel(p));
          if (p.overLimit) {
            confirmBox.checked = false;
            preview.append(
              h(
                'p',
                { class: 'warn' },
                `This is more than the limit of ${p.limit} windows (TIDEMARK_WEB_MAX_BACKFILL_WINDOWS). `,
                confirmBox,
                h(
                  'label',
                  { for: 'bf-confirm' },
                  ` I mean it: start ${p.capped ? 'more than ' : ''}${p.windows} windows`,
                ),
              ),
            );
          }
          if (p.toProcess === 0)
            preview.append(h('p', { class: 'note' }, 'Nothing to process in this range.'));
          start.disabled = p.toProcess === 0;
          preview.append(start);
        } catch (err) {
          preview.replaceChildren(h('p', { class: 'error', role: 'alert' }, err.message));
        }
      },
    },
    h('div', { class: 'field' }, h('label', { for: 'bf-job' }, 'Job'), job),
    h(
      'fieldset',
      { class: 'field' },
      h('legend', {}, 'From and to are in'),
      h('span', { class: 'radio' }, zoneJob, zoneJobLabel),
      h('span', { class: 'radio' }, zoneUtc, h('label', { for: 'bf-zone-utc' }, 'UTC')),
    ),
    h(
      'div',
      { class: 'field' },
      h('label', { for: 'bf-from' }, 'From (first window starting at or after)'),
      from,
    ),
    h('div', { class: 'field' }, h('label', { for: 'bf-to' }, 'To (windows starting before)'), to),
    h('div', { class: 'field' }, h('label', { for: 'bf-batch' }, 'Windows per batch (optional)'), batch),
    h('div', { class: 'field' }, h('button', { type: 'submit', id: 'bf-preview-button' }, 'Preview')),
  );

  start.addEventListener('click', async () => {
    if (!current) return;
    if (current.overLimit && !confirmBox.checked) {
      ctx.say(`Tick "I mean it" to start more than ${current.limit} windows`, 'error');
      confirmBox.focus();
      return;
    }
    try {
      const r = await ctx.post(`/api/jobs/${encodeURIComponent(current.job)}/backfill`, {
        from: current.from,
        to: current.to,
        batch: batch.value,
        allowLarge: current.overLimit,
      });
      ctx.say(`Backfill ${r.workflowId} started`);
      invalidate();
      await refresh();
    } catch (err) {
      ctx.say(err.message, 'error');
    }
  });

  const list = h('ul', { class: 'backfills', id: 'bf-list' });
  form.dataset.needs = 'operator';
  preview.dataset.needs = 'operator';
  root.append(h('h1', {}, 'Backfills'), form, preview, h('h2', {}, 'Running and recent'), list);

  async function refresh() {
    try {
      const { backfills } = await ctx.api('/api/backfills');
      list.replaceChildren(
        ...(backfills.length
          ? backfills.map((b) => progressRow(b, ctx))
          : [h('li', { class: 'empty' }, 'No backfills yet.')]),
      );
    } catch (err) {
      list.replaceChildren(h('li', { class: 'error' }, err.message));
    }
  }
  await refresh();
  // Polled while the view is shown; a view that was left stops.
  const timer = setInterval(() => {
    if (!root.isConnected) clearInterval(timer);
    else void refresh();
  }, 2000);
}
