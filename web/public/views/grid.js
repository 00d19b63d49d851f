// A job's window grid (#/jobs/<job>): rows and columns in the job's zone as the server lays them
// out, each cell coloured by state, a legend whose buttons filter by state, details of the cell
// under the pointer or focus, and cells that link to the window's detail (or, for an hour of a
// sub-hourly job, drill into its windows).
import { h } from '../dom.js';

export const STATES = [
  { id: 'done', label: 'done', glyph: '' },
  { id: 'failed', label: 'failed', glyph: '✕' },
  { id: 'running', label: 'running', glyph: '▸' },
  { id: 'waiting', label: 'waiting for allowed hours', glyph: '‖' },
  { id: 'not-closed', label: 'not closed', glyph: '' },
  { id: 'missing', label: 'missing', glyph: '?' },
  { id: 'unscheduled', label: 'before the job’s first window', glyph: '' },
];
const label = (state) => STATES.find((s) => s.id === state)?.label ?? state;

/** Loads the view's style sheet once (a link, not a style attribute: the CSP allows only 'self'). */
export function viewStyles() {
  if (!document.querySelector('link[data-view-styles]'))
    document.head.append(
      h('link', { rel: 'stylesheet', href: '/views/windows.css', 'data-view-styles': '' }),
    );
}

/** The job named by the hash #/jobs/<job>[/...]. */
export const jobOfHash = () => decodeURIComponent((/^#\/jobs\/([^/?]+)/.exec(location.hash) ?? [])[1] ?? '');

export const windowHref = (job, key) =>
  `#/jobs/${encodeURIComponent(job)}/windows/${encodeURIComponent(key)}`;

export function duration(ms) {
  if (ms === null || ms === undefined) return '–';
  if (ms < 1000) return `${ms} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  return `${Math.floor(ms / 60_000)} min ${Math.round((ms % 60_000) / 1000)} s`;
}

function cellSummary(c) {
  const state =
    c.kind === 'hour'
      ? Object.entries(c.states)
          .map(([s, n]) => `${n} ${label(s)}`)
          .join(', ')
      : `${label(c.state)}${c.generation ? `, generation ${c.generation}` : ''}`;
  return `${c.local}: ${state}`;
}

function details(c) {
  const rows = [
    ['Window', c.local],
    ['UTC', c.utc],
    [
      'State',
      c.kind === 'hour'
        ? `${c.windows} windows: ${Object.entries(c.states)
            .map(([s, n]) => `${n} ${label(s)}`)
            .join(', ')}`
        : label(c.state),
    ],
  ];
  if (c.kind === 'window' && c.generation) rows.push(['Generation', `${c.generation} (rerun)`]);
  if (c.kind === 'hour' && c.reruns) rows.push(['Reruns', String(c.reruns)]);
  if (c.records && c.records.in !== null)
    rows.push([
      'Records',
      `${c.records.in ?? 0} in, ${c.records.applied ?? 0} applied, ${c.records.quarantined ?? 0} quarantined`,
    ]);
  rows.push([c.kind === 'hour' ? 'Attempts (all windows)' : 'Attempts', String(c.attempts)]);
  rows.push([c.kind === 'hour' ? 'Duration (all windows)' : 'Duration', duration(c.durationMs)]);
  if (c.reason) rows.push(['Reason', c.reason]);
  return h(
    'dl',
    { class: 'wv-facts' },
    rows.map(([k, v]) => [h('dt', {}, k), h('dd', {}, v)]),
  );
}

export async function renderGrid(root, ctx, range = {}) {
  viewStyles();
  const job = ctx.params?.job || jobOfHash();
  const q = new URLSearchParams();
  if (range.from) q.set('from', range.from);
  if (range.to) q.set('to', range.to);
  root.replaceChildren(h('p', { class: 'loading', role: 'status' }, `Loading the windows of ${job}…`));
  let g;
  try {
    g = await ctx.api(`/api/jobs/${encodeURIComponent(job)}/grid${q.size ? `?${q}` : ''}`);
  } catch (err) {
    root.replaceChildren(h('p', { class: 'error', role: 'alert' }, String(err.message ?? err)));
    return;
  }
  // A backup job's page links to its backups (the list is the catalog's, no database read).
  const backups = await ctx
    .api('/api/backups')
    .then((b) => b.jobs.includes(g.job))
    .catch(() => false);
  const shown = new Set(STATES.map((s) => s.id));
  const panel = h(
    'div',
    { class: 'wg-details', 'aria-live': 'polite' },
    h('p', {}, 'Point at or focus a cell to see its window.'),
  );
  const show = (c) => panel.replaceChildren(details(c));

  const cellNode = (c) => {
    const cls = `wg-cell s-${c.state}${c.kind === 'window' && c.generation ? ' wg-rerun' : ''}${c.kind === 'hour' && c.reruns ? ' wg-rerun' : ''}`;
    const glyph = STATES.find((s) => s.id === c.state)?.glyph ?? '';
    const events = { onmouseenter: () => show(c), onfocus: () => show(c) };
    const node =
      c.kind === 'window'
        ? h(
            'a',
            { class: cls, href: windowHref(g.job, c.key), 'aria-label': cellSummary(c), ...events },
            glyph,
          )
        : h(
            'button',
            {
              type: 'button',
              class: cls,
              'aria-label': `${cellSummary(c)}; show its windows`,
              onclick: () => renderGrid(root, ctx, { from: c.start, to: c.end, back: range }),
              ...events,
            },
            glyph,
          );
    node.dataset.state = c.state;
    return node;
  };

  const table = h(
    'table',
    { class: g.columns.length > 31 ? 'wg-grid wg-dense' : 'wg-grid' },
    h('caption', {}, `Windows of ${g.job} by ${g.layout.rows} and ${g.layout.columns} (${g.timezone})`),
    h(
      'thead',
      {},
      h(
        'tr',
        {},
        h('th', { scope: 'col' }, g.layout.rows),
        g.columns.map((c) => h('th', { scope: 'col' }, c.label)),
      ),
    ),
    h(
      'tbody',
      {},
      g.rows.map((r) =>
        h(
          'tr',
          {},
          h('th', { scope: 'row' }, r.label),
          g.columns.map((col) => {
            const here = r.cells.filter((c) => c.col === col.col);
            return h('td', { class: here.length > 1 ? 'wg-split' : undefined }, here.map(cellNode));
          }),
        ),
      ),
    ),
  );

  const applyFilter = () => {
    for (const a of table.querySelectorAll('.wg-cell'))
      a.classList.toggle('off', !shown.has(a.dataset.state));
  };
  const legend = h(
    'div',
    { class: 'wg-legend', role: 'group', 'aria-label': 'Show windows by state' },
    STATES.map((s) => {
      const b = h(
        'button',
        {
          type: 'button',
          class: 'wg-filter',
          'aria-pressed': 'true',
          onclick: () => {
            if (shown.has(s.id)) shown.delete(s.id);
            else shown.add(s.id);
            b.setAttribute('aria-pressed', String(shown.has(s.id)));
            applyFilter();
          },
        },
        h('span', { class: `wg-swatch s-${s.id}`, 'aria-hidden': 'true' }, s.glyph),
        ` ${s.label} `,
        h('span', { class: 'wg-count' }, String(g.totals[s.id] ?? 0)),
      );
      return b;
    }),
    h(
      'span',
      { class: 'wg-filter-note' },
      h('span', { class: 'wg-swatch s-done wg-rerun', 'aria-hidden': 'true' }),
      ` rerun (generation > 0): ${g.totals.reruns}`,
    ),
  );

  const span = new Date(g.to).getTime() - new Date(g.from).getTime();
  const shift = (k) => ({
    from: new Date(new Date(g.from).getTime() + k * span).toISOString(),
    to: new Date(new Date(g.to).getTime() + k * span).toISOString(),
  });
  const nav = h(
    'nav',
    { class: 'wg-range', 'aria-label': 'Range' },
    range.back
      ? h(
          'button',
          { type: 'button', onclick: () => renderGrid(root, ctx, range.back) },
          '← Back to the whole range',
        )
      : null,
    h('button', { type: 'button', onclick: () => renderGrid(root, ctx, shift(-1)) }, 'Earlier'),
    h('button', { type: 'button', onclick: () => renderGrid(root, ctx, shift(1)) }, 'Later'),
    h('button', { type: 'button', onclick: () => renderGrid(root, ctx, {}) }, 'Latest'),
  );

  root.replaceChildren(
    h(
      'div',
      { class: 'wv' },
      h(
        'p',
        { class: 'crumbs' },
        h('a', { href: '#/' }, 'Jobs'),
        ' / ',
        g.job,
        backups
          ? [
              ' · ',
              h('a', { href: `#/jobs/${encodeURIComponent(g.job)}/backups`, class: 'wg-backups' }, 'Backups'),
            ]
          : null,
      ),
      h('h1', {}, `${g.job}: windows`),
      h(
        'p',
        { class: 'meta' },
        `Grid ${g.grid} in ${g.timezone}`,
        g.allowedHours ? `, runs ${g.allowedHours.from}–${g.allowedHours.to} local` : '',
        `. ${g.windows} windows from ${g.from} to ${g.to} (UTC).`,
        g.layout.cell === 'hour' ? ' Each cell is one hour of windows: choose one to see its windows.' : '',
      ),
      g.notes.map((n) => h('p', { class: 'note', role: 'status' }, n)),
      nav,
      legend,
      h(
        'div',
        { class: 'wg-scroll', tabindex: '0', role: 'region', 'aria-label': `Window grid of ${g.job}` },
        table,
      ),
      panel,
    ),
  );
}
