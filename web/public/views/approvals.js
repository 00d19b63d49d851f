// Pending approvals: each rerun request with what approving it would change (the preview a worker
// computed by running the job's handler and rolling it back), next to Approve / Reject. An
// approval carries the digest of the preview shown: if the data moved since, it is refused and
// the new preview is shown instead.
import { h } from '../dom.js';
import { inZone, utc } from '../time.js';

/** The window's start in the job's zone and in UTC (once for a UTC job). */
const when = (iso, zone) => (!zone || zone === 'UTC' ? utc(iso) : `${inZone(iso, zone)} (${utc(iso)})`);

const show = (v) => (v === null || v === undefined ? '' : String(v));
const keyText = (r) =>
  Object.entries(r.key)
    .map(([k, v]) => `${k}=${show(v)}`)
    .join(' ');
const MARK = { changed: 'changed', added: 'added', removed: 'removed' };

/** One declared table's change: a table of row, column, before, after. */
function tableChange(t) {
  if (t.tooLarge !== undefined)
    return h('p', { class: 'pv-note' }, `${t.table}: not compared (${t.tooLarge} rows of this job)`);
  const counts = [
    t.changed ? `${t.changed} changed` : '',
    t.added ? `${t.added} added` : '',
    t.removed ? `${t.removed} removed` : '',
  ].filter(Boolean);
  if (!counts.length) return h('p', { class: 'pv-note' }, `${t.table}: no change`);
  const body = [];
  for (const r of t.rows) {
    const cols = Object.keys({ ...r.before, ...r.after }).filter(
      (k) => !(k in r.key) && (r.change !== 'changed' || r.before[k] !== r.after[k]),
    );
    cols.forEach((c, i) =>
      body.push(
        h(
          'tr',
          { class: `pv-${r.change}` },
          i === 0
            ? h('th', { scope: 'row', rowspan: cols.length }, `${MARK[r.change]}: ${keyText(r)}`)
            : null,
          h('td', {}, c),
          h('td', { class: 'pv-before' }, r.before ? show(r.before[c]) : ''),
          h('td', { class: 'pv-after' }, r.after ? show(r.after[c]) : ''),
        ),
      ),
    );
  }
  const listed = t.rows.length;
  const total = t.added + t.removed + t.changed;
  return h(
    'div',
    { class: 'pv-table' },
    h(
      'table',
      {},
      h('caption', {}, `${t.table}: ${counts.join(', ')}`),
      h(
        'thead',
        {},
        h(
          'tr',
          {},
          h('th', { scope: 'col' }, 'row'),
          h('th', { scope: 'col' }, 'column'),
          h('th', { scope: 'col' }, 'before'),
          h('th', { scope: 'col' }, 'after'),
        ),
      ),
      h('tbody', {}, body),
    ),
    total > listed ? h('p', { class: 'pv-note' }, `... and ${total - listed} more rows`) : null,
  );
}

/** What approving would change, or why that is not known. */
function previewPanel(a) {
  const p = a.preview;
  if (!p)
    return h(
      'p',
      { class: 'pv-note' },
      a.previewing
        ? 'The preview is being computed...'
        : `No preview: ${a.previewNote ?? 'none was computed'}`,
    );
  const head = h(
    'p',
    { class: 'pv-head' },
    `Generation ${p.generation} replaces generation ${p.previous}; computed ${utc(p.computedAt)}.`,
  );
  if (p.outcome === 'refused') return h('div', {}, head, h('p', { class: 'pv-note' }, p.note));
  if (p.outcome === 'failed')
    return h(
      'div',
      {},
      head,
      h('p', { class: 'pv-warn' }, `The handler failed, so would the rerun: ${p.note}`),
    );
  const tables = p.tables ?? [];
  const unchanged =
    p.tables !== null &&
    tables.every((t) => t.tooLarge === undefined && t.added + t.removed + t.changed === 0) &&
    !p.effects.repeat.length &&
    !p.effects.added.length &&
    !p.effects.dropped.length;
  if (unchanged) return h('div', {}, head, h('p', { class: 'pv-none' }, 'No change.'));
  const e = p.effects;
  return h(
    'div',
    {},
    head,
    p.tables === null ? h('p', { class: 'pv-note' }, 'Tables not declared by the job: effects only.') : null,
    tables.map(tableChange),
    h(
      'ul',
      { class: 'pv-effects' },
      h(
        'li',
        {},
        e.repeat.length || e.added.length
          ? `Would send again: ${e.repeat.join(', ') || '(none)'}${e.added.length ? `; new: ${e.added.join(', ')}` : ''}`
          : 'Would send no external effect.',
      ),
      e.dropped.length ? h('li', {}, `Sent before, not again: ${e.dropped.join(', ')}`) : null,
      p.findings.map((f) => h('li', { class: 'pv-warn' }, `Finding: ${f}`)),
    ),
  );
}

export async function renderApprovals(root, ctx) {
  const status = h('p', { class: 'pv-status', role: 'status', 'aria-live': 'polite' });
  const name = h('input', {
    id: 'approver-name',
    name: 'by',
    autocomplete: 'username',
    value: sessionStorage.getItem('tidemark-name') ?? '',
  });
  name.addEventListener('change', () => sessionStorage.setItem('tidemark-name', name.value.trim()));
  const list = h('div', { class: 'pv-list' });
  // Signed in, one decides as oneself; in single-user mode the page knows nobody: a name is given.
  const who = () => (ctx.me.verified ? ctx.me.name : name.value.trim());
  root.replaceChildren(
    h('h1', {}, 'Pending approvals'),
    ctx.me.verified
      ? h('p', { class: 'pv-who' }, `Deciding as ${ctx.me.displayName} (${ctx.me.name})`)
      : h(
          'p',
          { class: 'pv-who' },
          h('label', { for: 'approver-name' }, 'Your name (as tidemark knows you) '),
          name,
        ),
    status,
    list,
  );

  async function decideOn(a, decision, note) {
    status.textContent = `${decision === 'approve' ? 'Approving' : 'Rejecting'} ${a.request}...`;
    try {
      await ctx.post(`/api/approvals/${decision}`, {
        request: a.request,
        ...(ctx.me.verified ? {} : { by: who() }),
        note: note.value,
        ...(a.preview ? { previewDigest: a.preview.digest } : {}),
      });
      status.textContent = `${a.request}: ${decision === 'approve' ? 'approved' : 'rejected'} by ${who()}.`;
    } catch (err) {
      status.textContent = `Not accepted: ${err.message}`;
    }
    await load();
  }

  function card(a) {
    const zone = ctx.job?.(a.job)?.timezone ?? 'UTC';
    const id = `req-${a.request.replace(/[^A-Za-z0-9]+/g, '-')}`;
    const note = h('input', { id: `${id}-note`, name: 'note' });
    const approve = h(
      'button',
      { type: 'button', class: 'pv-approve', dataset: { needs: 'approver' } },
      'Approve',
    );
    const reject = h(
      'button',
      { type: 'button', class: 'pv-reject', dataset: { needs: 'approver' } },
      'Reject',
    );
    approve.addEventListener('click', () => decideOn(a, 'approve', note));
    reject.addEventListener('click', () => decideOn(a, 'reject', note));
    return h(
      'article',
      { class: 'pv-card', 'aria-labelledby': `${id}-title` },
      h('h2', { id: `${id}-title` }, `${a.job}: window ${when(a.windowStart, zone)}`),
      h(
        'dl',
        { class: 'pv-facts' },
        h('dt', {}, 'Asked by'),
        h('dd', {}, `${a.requestedBy}, ${utc(a.requestedAt)}`),
        h('dt', {}, 'Reason'),
        h('dd', {}, a.reason),
        h('dt', {}, 'Request'),
        h('dd', {}, h('code', {}, a.request)),
      ),
      h('h3', {}, 'What approving would change'),
      previewPanel(a),
      h(
        'div',
        { class: 'pv-actions' },
        h('label', { for: `${id}-note` }, 'Note (optional) '),
        note,
        approve,
        reject,
      ),
    );
  }

  async function load() {
    const { approvals } = await ctx.api('/api/approvals');
    list.replaceChildren(
      ...(approvals.length
        ? approvals.map(card)
        : [h('p', { class: 'pv-note' }, 'No rerun waits for a decision.')]),
    );
  }
  await load();
}
