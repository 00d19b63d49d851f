// Backups (#/backups for every backup job, #/jobs/<job>/backups for one): each backup with its
// window, when it was dumped, size, digest, key, location and row counts, its last verification and
// a Verify button that answers inline. Restore is a CLI operation: the page shows the exact command
// with a Copy button, and the person fills in the server to restore into.
import { h } from '../dom.js';
import { both } from '../time.js';
import { showMore } from './more.js';

/** 1536 -> "1.5 KiB": sizes for people (the exact bytes are in the cell's title). */
export function humanBytes(n) {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  let v = n;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return i === 0 ? `${n} B` : `${v.toFixed(1)} ${units[i]}`;
}

/** An instant in the job's zone and in UTC, as the other views show it. */
const when = (iso, zone) =>
  both(iso, zone ?? 'UTC')
    .filter(Boolean)
    .join(' / ');

/** Copies `text`; says so in the page's status line, or how to copy it by hand. */
async function copy(ctx, text, what) {
  try {
    await navigator.clipboard.writeText(text);
    ctx.say(`${what} copied`);
  } catch {
    ctx.say(`${what}: the browser refused the clipboard; select the text and copy it`, 'error');
  }
}

/** A check's detail with each SHA-256 cut to its first 12 digits (the cell's title has them whole). */
const shortDigests = (text) => text.replace(/\b([0-9a-f]{12})[0-9a-f]{52}\b/g, '$1…');
const detail = (tag, attrs, text) => h(tag, { ...attrs, title: text }, shortDigests(text));

function verification(v, zone) {
  if (!v) return h('div', { class: 'bk-muted' }, 'never');
  return h(
    'div',
    {},
    h('span', { class: v.ok ? 'bk-ok' : 'bk-failed' }, v.ok ? 'ok' : 'failed'),
    ' ',
    h('span', { class: 'bk-muted' }, `${when(v.at, zone)} (${v.trigger})`),
    v.detail ? detail('div', { class: 'bk-detail' }, v.detail) : null,
  );
}

const COLUMNS = [
  'Window',
  'Verify',
  'Dumped at',
  'Size',
  'SHA-256',
  'Encryption',
  'Location',
  'Tables (rows)',
  'Last verification',
];

function backupRow(ctx, b, zone) {
  const short = b.sha256.slice(0, 12);
  const lastCell = h('td', { class: 'bk-last' }, verification(b.lastVerification, zone));
  const result = h('div', { class: 'bk-result', role: 'status', 'aria-live': 'polite' });
  const verify = h(
    'button',
    {
      type: 'button',
      class: 'bk-button',
      dataset: { needs: 'operator' },
      'aria-label': `Verify the backup of ${b.windowKey}`,
      onclick: async () => {
        verify.disabled = true;
        result.textContent = 'verifying…';
        try {
          const r = await ctx.post(
            `/api/jobs/${encodeURIComponent(b.job)}/backups/${encodeURIComponent(b.windowKey)}/verify`,
          );
          const bad = r.checks.filter((c) => !c.ok);
          result.replaceChildren(
            h('span', { class: r.ok ? 'bk-ok' : 'bk-failed' }, r.ok ? 'verified: ok' : 'verified: FAILED'),
            ` in ${Math.round(r.durationMs)} ms`,
            h(
              'div',
              {},
              bad.length
                ? h(
                    'ul',
                    { class: 'bk-detail' },
                    bad.map((c) => detail('li', {}, `${c.name}: ${c.detail}`)),
                  )
                : null,
            ),
          );
          // What was just recorded (the report's backup is the one read before verifying).
          lastCell.replaceChildren(
            verification(
              {
                at: new Date().toISOString(),
                ok: r.ok,
                trigger: 'page',
                detail: bad.map((c) => `${c.name}: ${c.detail}`).join('; '),
              },
              zone,
            ),
          );
        } catch (err) {
          result.replaceChildren(h('span', { class: 'bk-failed' }, `could not verify: ${err.message}`));
        } finally {
          verify.disabled = false;
        }
      },
    },
    'Verify',
  );
  const tables = Object.entries(b.tableCounts ?? {});
  // One tbody per backup: its facts, then the command that restores it on a row of its own.
  return h(
    'tbody',
    { dataset: { key: b.windowKey } },
    h(
      'tr',
      {},
      h('th', { scope: 'row' }, when(b.windowStart, zone)),
      // Second: the action stays in view when the wide table scrolls in its box.
      h('td', {}, verify, result),
      h('td', {}, when(b.dumpedAt, zone)),
      h('td', { class: 'bk-num', title: `${b.bytes} bytes` }, humanBytes(b.bytes)),
      h(
        'td',
        { class: 'bk-nowrap' },
        h('code', { class: 'bk-sha', title: b.sha256 }, short),
        ' ',
        h(
          'button',
          {
            type: 'button',
            class: 'bk-button bk-small',
            'aria-label': `Copy the sha256 of ${b.windowKey}`,
            onclick: () => copy(ctx, b.sha256, `sha256 of ${b.windowKey}`),
          },
          'Copy',
        ),
      ),
      h('td', {}, b.encrypted ? `key ${b.keyId ?? '(no id recorded)'}` : 'not encrypted'),
      h('td', { class: 'bk-wrap' }, h('code', {}, b.location)),
      h(
        'td',
        {},
        tables.length
          ? h(
              'ul',
              { class: 'bk-counts' },
              tables.map(([t, n]) => h('li', {}, h('code', {}, t), ' ', Number(n).toLocaleString('en'))),
            )
          : h('span', { class: 'bk-muted' }, 'none recorded'),
      ),
      lastCell,
    ),
    h(
      'tr',
      { class: 'bk-restore-row' },
      h(
        'td',
        { class: 'bk-restore', colspan: String(COLUMNS.length) },
        h('span', { class: 'bk-muted' }, 'Restore (run it from the command line): '),
        h('code', { class: 'bk-cmd' }, b.restoreCommand),
        ' ',
        h(
          'button',
          {
            type: 'button',
            class: 'bk-button bk-small',
            'aria-label': `Copy the restore command of ${b.windowKey}`,
            onclick: () => copy(ctx, b.restoreCommand, `restore command of ${b.windowKey}`),
          },
          'Copy',
        ),
      ),
    ),
  );
}

async function jobSection(ctx, job, withHeading) {
  const zone = ctx.job(job)?.timezone;
  let data;
  let next;
  try {
    ({ items: data, next } = await ctx.apiPage(`/api/jobs/${encodeURIComponent(job)}/backups`));
  } catch (err) {
    return h('section', {}, h('p', { class: 'error', role: 'alert' }, `${job}: ${err.message}`));
  }
  // In pages of 100, newest first: "Show older backups" appends the next page's rows.
  let table;
  const more = showMore(ctx, 'Show older backups', (items) =>
    table.append(...items.backups.map((b) => backupRow(ctx, b, zone))),
  );
  more.offer(next);
  const d = data.lastDrill;
  const drill = d
    ? [
        'Last restore drill: ',
        h('span', { class: d.ok ? 'bk-ok' : 'bk-failed' }, d.ok ? 'ok' : 'failed'),
        ` ${when(d.at, zone)}, of ${d.windowKey}${d.detail ? `: ${d.detail}` : ''}`,
      ]
    : 'No restore drill has run yet.';
  return h(
    'section',
    { class: 'bk-job', 'aria-label': `Backups of ${job}` },
    // Under "Backups" each job is a linked h2; a job's own page has its name in the h1 already.
    withHeading ? h('h2', {}, h('a', { href: `#/jobs/${encodeURIComponent(job)}/backups` }, job)) : null,
    h('p', { class: 'meta' }, drill),
    data.backups.length
      ? h(
          'div',
          {
            class: 'bk-scroll',
            tabindex: '0',
            role: 'region',
            'aria-label': `Backups of ${job}, scrollable`,
          },
          (table = h(
            'table',
            { class: 'bk-table', dataset: { job } },
            h('caption', {}, `Backups of ${job}, newest first`),
            h(
              'thead',
              {},
              h(
                'tr',
                {},
                COLUMNS.map((c) => h('th', { scope: 'col' }, c)),
              ),
            ),
            data.backups.map((b) => backupRow(ctx, b, zone)),
          )),
        )
      : h('p', { class: 'empty' }, 'No backups yet.'),
    more.box,
  );
}

export async function renderBackups(root, ctx) {
  const one = ctx.params?.job;
  root.replaceChildren(h('p', { class: 'loading', role: 'status' }, 'Loading backups…'));
  const jobs = one ? [one] : (await ctx.api('/api/backups')).jobs;
  const sections = await Promise.all(jobs.map((j) => jobSection(ctx, j, !one)));
  root.replaceChildren(
    h(
      'div',
      { class: 'wv bk' },
      h(
        'p',
        { class: 'crumbs' },
        h('a', { href: '#/' }, 'Jobs'),
        ' / ',
        one ? [h('a', { href: `#/jobs/${encodeURIComponent(one)}` }, one), ' / ', 'Backups'] : 'Backups',
      ),
      h('h1', {}, one ? `${one}: backups` : 'Backups'),
      h(
        'p',
        { class: 'bk-note' },
        'Restore runs from the command line, not from this page. Copy a backup’s command and replace postgres://… with the server and user to restore into (the database ends in _restored; restoring over the source needs --overwrite-source).',
      ),
      jobs.length ? sections : h('p', { class: 'empty' }, 'No job in the catalog makes backups.'),
    ),
  );
}
