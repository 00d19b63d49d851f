// Overview: the jobs as a compact list (name, state, windows, lag, last run, next fire, health)
// with search, filters and sorting kept in the link; Details opens a job's card (schedule in words
// and as the Temporal Schedule has it, watermark, a sparkline of recent durations; Pause with a
// reason, Resume, Trigger, Backfill), and the cards a person opened stay open. Only the jobs whose
// rows changed are redrawn, in place, so focus stays where it was.
import { h } from '../dom.js';
import { ago, both, duration } from '../time.js';

const when = (iso, zone) => {
  const [local, utc] = both(iso, zone);
  return [h('span', { class: 'local' }, local), utc ? h('span', { class: 'utc' }, utc) : null];
};

function fact(term, ...value) {
  return h('div', { class: 'fact' }, h('dt', {}, term), h('dd', {}, ...value));
}

function stateBadge(j) {
  if (!j.scheduled) return h('span', { class: 'badge none' }, 'no schedule');
  if (j.paused)
    return h(
      'span',
      { class: 'badge paused' },
      'paused',
      j.pauseNote ? h('span', { class: 'note' }, `: ${j.pauseNote}`) : null,
    );
  return h('span', { class: 'badge active' }, 'active');
}

function health(x) {
  const chip = (cls, n, label) =>
    h('li', { class: `chip ${cls}${n ? '' : ' zero'}` }, h('b', {}, String(n)), ` ${label}`);
  return h(
    'ul',
    { class: 'health', 'aria-label': 'windows by status' },
    chip('done', x.done, 'done'),
    chip('failed', x.failed, 'failed'),
    chip('running', x.running, 'running'),
    chip('missing', x.missingCapped ? `${x.missing}+` : x.missing, 'missing'),
  );
}

function facts(j) {
  const last = j.lastRun;
  return [
    fact('Schedule', h('span', {}, j.tick.words), h('code', { class: 'spec' }, j.tick.spec)),
    fact('Windows', `${j.grid} in ${j.timezone}`),
    fact('Next fire', ...(j.nextFires[0] ? when(j.nextFires[0], j.timezone) : ['-'])),
    fact('Watermark', ...(j.watermark ? when(j.watermark, j.timezone) : ['none yet'])),
    fact(
      'Lag',
      j.lagWindows === null
        ? 'no watermark yet'
        : j.lagWindows === 0
          ? 'up to date'
          : `${j.lagWindows} ${j.lagWindows === 1 ? 'window' : 'windows'} behind`,
    ),
    fact(
      'Last run',
      last
        ? [
            h(
              'span',
              {},
              h('span', { class: `outcome ${last.outcome}` }, last.outcome),
              ` in ${duration(last.durationMs)}, ${ago(last.finishedAt)}`,
            ),
            h('span', { class: 'utc' }, both(last.finishedAt, j.timezone).filter(Boolean).join(' / ')),
          ]
        : 'never',
    ),
    fact('Health', health(j.health)),
  ];
}

function card(j, ctx) {
  const name = j.job;
  const factList = h('dl', { class: 'facts' }, facts(j));
  const badge = h('span', { class: 'state' }, stateBadge(j));
  const act = async (action, body, done) => {
    try {
      await ctx.post(`/api/jobs/${encodeURIComponent(name)}/${action}`, body);
      ctx.say(done);
    } catch (err) {
      ctx.say(`${name}: ${err.message}`, 'error');
    }
  };
  const reason = h('input', { id: `reason-${name}`, name: 'reason', required: true, autocomplete: 'off' });
  const pauseForm = h(
    'form',
    {
      class: 'pause-form',
      hidden: true,
      dataset: { needs: 'operator' },
      onsubmit: async (e) => {
        e.preventDefault();
        await act('pause', { reason: reason.value.trim() }, `${name}: paused`);
        pauseForm.hidden = true;
        resume.focus();
      },
    },
    h('label', { for: `reason-${name}` }, 'Why pause?'),
    reason,
    h('button', { type: 'submit' }, 'Pause schedule'),
    h(
      'button',
      {
        type: 'button',
        class: 'quiet',
        onclick: () => {
          pauseForm.hidden = true;
          pause.focus();
        },
      },
      'Cancel',
    ),
  );
  const trigger = h(
    'button',
    {
      type: 'button',
      dataset: { action: 'trigger', needs: 'operator' },
      onclick: () => act('trigger', {}, `${name}: triggered`),
    },
    'Trigger',
  );
  const pause = h(
    'button',
    {
      type: 'button',
      dataset: { action: 'pause', needs: 'operator' },
      onclick: () => {
        pauseForm.hidden = false;
        reason.focus();
      },
    },
    'Pause…',
  );
  const resume = h(
    'button',
    {
      type: 'button',
      dataset: { action: 'resume', needs: 'operator' },
      onclick: async () => {
        await act('resume', {}, `${name}: resumed`);
        pause.focus();
      },
    },
    'Resume',
  );
  const spark = h('img', {
    class: 'spark',
    src: j.sparkline,
    alt: `Recent run durations of ${name} (chart not available)`,
  });
  const el = h(
    'article',
    { class: 'job', dataset: { job: name }, 'aria-labelledby': `job-${name}` },
    h(
      'header',
      {},
      h('h2', { id: `job-${name}` }, h('a', { href: `#/jobs/${encodeURIComponent(name)}` }, name)),
      badge,
      j.description ? h('p', { class: 'desc' }, j.description) : null,
    ),
    factList,
    h('figure', { class: 'sparkline' }, spark, h('figcaption', {}, 'recent durations')),
    h(
      'div',
      { class: 'actions' },
      trigger,
      pause,
      resume,
      h('a', { class: 'action-link', href: `#/backfills?job=${encodeURIComponent(name)}` }, 'Backfill…'),
    ),
    pauseForm,
  );
  const update = (row) => {
    factList.replaceChildren(...facts(row));
    badge.replaceChildren(stateBadge(row));
    pause.hidden = !row.scheduled || row.paused;
    resume.hidden = !row.scheduled || !row.paused;
    trigger.disabled = !row.scheduled;
  };
  update(j);
  return { el, update };
}

const STATES = [
  ['', 'any state'],
  ['active', 'active'],
  ['paused', 'paused'],
  ['none', 'no schedule'],
];
const LAGS = [
  ['', 'any lag'],
  ['behind', 'behind'],
  ['current', 'up to date'],
  ['never', 'no watermark yet'],
];
const FAILURES = [
  ['', 'any'],
  ['failing', 'with failures'],
  ['clean', 'without failures'],
];
const SORTS = [
  ['name', 'name'],
  ['lag', 'most behind first'],
  ['failures', 'most failures first'],
  ['last', 'last run, newest first'],
  ['next', 'next fire, soonest first'],
];

const stateOf = (j) => (!j.scheduled ? 'none' : j.paused ? 'paused' : 'active');
const failing = (j) => j.health.failed > 0 || j.lastRun?.outcome === 'failed';
const lagWords = (j) =>
  j.lagWindows === null ? 'no watermark yet' : j.lagWindows === 0 ? 'up to date' : `${j.lagWindows} behind`;
const time = (iso) => (iso ? new Date(iso).getTime() : null);
/** Nulls last, whatever the direction. */
const byNumber = (a, b, desc) => (a === b ? 0 : a === null ? 1 : b === null ? -1 : desc ? b - a : a - b);
const COMPARE = {
  name: () => 0,
  lag: (a, b) => byNumber(a.lagWindows, b.lagWindows, true),
  failures: (a, b) => b.health.failed - a.health.failed || Number(failing(b)) - Number(failing(a)),
  last: (a, b) => byNumber(time(a.lastRun?.finishedAt), time(b.lastRun?.finishedAt), true),
  next: (a, b) => byNumber(time(a.nextFires[0]), time(b.nextFires[0]), false),
};

function select(id, label, options, value) {
  return [
    h('label', { for: id }, label),
    h(
      'select',
      { id, name: id },
      ...options.map(([v, text]) => h('option', { value: v, selected: v === value }, text)),
    ),
  ];
}

/** The filters, read from and written to the hash's query: a filtered list is a link to share. */
function readFilters() {
  const q = new URLSearchParams(location.hash.split('?')[1] ?? '');
  return {
    q: q.get('q') ?? '',
    state: q.get('state') ?? '',
    grid: q.get('grid') ?? '',
    lag: q.get('lag') ?? '',
    failures: q.get('failures') ?? '',
    sort: SORTS.some(([v]) => v === q.get('sort')) ? q.get('sort') : 'name',
  };
}

const OPENED = 'tidemark.overview.opened';
const opened = () => new Set(JSON.parse(sessionStorage.getItem(OPENED) ?? '[]'));

/** One line of the job list: its name, state, lag, last run, next fire and health; Details opens its card. */
function row(j, ctx, onToggle) {
  const name = j.job;
  const cells = {
    state: h('td', { class: 'jl-state' }),
    grid: h('td', { class: 'jl-grid' }),
    lag: h('td', { class: 'jl-lag' }),
    last: h('td', { class: 'jl-last' }),
    next: h('td', { class: 'jl-next' }),
    health: h('td', { class: 'jl-health' }),
  };
  const toggle = h(
    'button',
    { type: 'button', class: 'quiet jl-open', 'aria-expanded': 'false', 'aria-controls': `card-${name}` },
    'Details',
  );
  toggle.setAttribute('aria-label', `Details of ${name}`);
  toggle.addEventListener('click', () => onToggle(name));
  const tr = h(
    'tr',
    { dataset: { job: name } },
    h(
      'th',
      { scope: 'row', class: 'jl-name' },
      h('a', { href: `#/jobs/${encodeURIComponent(name)}` }, name),
      j.description ? h('span', { class: 'jl-desc' }, j.description) : null,
    ),
    Object.values(cells),
    h('td', { class: 'jl-actions' }, toggle),
  );
  const cardRow = h('tr', { class: 'jl-card', hidden: true, dataset: { cardOf: name } });
  let opened = null;
  const update = (r) => {
    cells.state.replaceChildren(stateBadge(r));
    cells.grid.textContent = r.grid;
    cells.lag.textContent = lagWords(r);
    cells.lag.classList.toggle('behind', r.lagWindows > 0);
    cells.last.replaceChildren(
      ...(r.lastRun
        ? [
            h('span', { class: `outcome ${r.lastRun.outcome}` }, r.lastRun.outcome),
            ` ${ago(r.lastRun.finishedAt)}`,
          ]
        : ['never']),
    );
    cells.next.textContent = r.nextFires[0] ? both(r.nextFires[0], r.timezone)[0] : '-';
    cells.health.replaceChildren(health(r.health));
    opened?.update(r);
  };
  const setOpen = (open, r) => {
    toggle.setAttribute('aria-expanded', String(open));
    cardRow.hidden = !open;
    if (open && !opened) {
      opened = card(r, ctx);
      opened.el.id = `card-${name}`;
      cardRow.append(h('td', { colspan: 8 }, opened.el));
    }
  };
  update(j);
  return { els: [tr, cardRow], update, setOpen, toggle };
}

export function renderOverview(root, ctx) {
  const f = readFilters();
  const grids = [...new Set(ctx.jobs.map((j) => j.grid))].sort();
  const search = h('input', {
    id: 'jl-q',
    type: 'search',
    name: 'q',
    value: f.q,
    placeholder: 'name or description',
    autocomplete: 'off',
  });
  const form = h(
    'form',
    {
      class: 'jl-filters',
      role: 'search',
      'aria-label': 'Filter the jobs',
      onsubmit: (e) => e.preventDefault(),
    },
    h('label', { for: 'jl-q' }, 'Search'),
    search,
    select('jl-state', 'State', STATES, f.state),
    select('jl-grid', 'Windows', [['', 'any size'], ...grids.map((g) => [g, g])], f.grid),
    select('jl-lag', 'Lag', LAGS, f.lag),
    select('jl-failures', 'Failures', FAILURES, f.failures),
    select('jl-sort', 'Sort by', SORTS, f.sort),
  );
  const count = h('p', { class: 'jl-count', role: 'status' });
  const body = h('tbody');
  const table = h(
    'table',
    { class: 'job-list' },
    h('caption', { class: 'visually-hidden' }, 'Jobs'),
    h(
      'thead',
      {},
      h(
        'tr',
        {},
        ['Job', 'State', 'Windows', 'Lag', 'Last run', 'Next fire', 'Health', ''].map((t) =>
          h('th', { scope: 'col' }, t),
        ),
      ),
    ),
    body,
  );
  root.append(h('h1', {}, 'Jobs'), form, count, table);
  if (!ctx.jobs.length) {
    table.hidden = true;
    root.append(h('p', { class: 'empty' }, 'No jobs in the catalog.'));
  }

  const open = opened();
  const rows = new Map();
  const toggle = (name) => {
    const now = opened();
    if (now.has(name)) now.delete(name);
    else now.add(name);
    sessionStorage.setItem(OPENED, JSON.stringify([...now]));
    rows.get(name).setOpen(now.has(name), ctx.job(name));
  };
  for (const j of ctx.jobs) {
    const r = row(j, ctx, toggle);
    rows.set(j.job, r);
    body.append(...r.els);
    if (open.has(j.job)) r.setOpen(true, j);
  }

  const value = (id) => form.querySelector(`#${id}`).value;
  const apply = () => {
    const want = {
      q: search.value.trim().toLowerCase(),
      state: value('jl-state'),
      grid: value('jl-grid'),
      lag: value('jl-lag'),
      failures: value('jl-failures'),
      sort: value('jl-sort'),
    };
    const shown = ctx.jobs.filter(
      (j) =>
        (!want.q ||
          j.job.toLowerCase().includes(want.q) ||
          (j.description ?? '').toLowerCase().includes(want.q)) &&
        (!want.state || stateOf(j) === want.state) &&
        (!want.grid || j.grid === want.grid) &&
        (!want.lag ||
          (want.lag === 'behind'
            ? j.lagWindows > 0
            : want.lag === 'current'
              ? j.lagWindows === 0
              : j.lagWindows === null)) &&
        (!want.failures || (want.failures === 'failing') === failing(j)),
    );
    const cmp = COMPARE[want.sort] ?? COMPARE.name;
    shown.sort((a, b) => cmp(a, b) || a.job.localeCompare(b.job, 'en', { numeric: true }));
    const visible = new Set(shown.map((j) => j.job));
    for (const [name, r] of rows) for (const el of r.els) el.classList.toggle('filtered', !visible.has(name));
    // In the chosen order: each job's line, then its card's (the hidden ones after). Moved only when
    // the order changed, and the focus (a pause reason being typed) put back where it was.
    const order = [...shown, ...ctx.jobs.filter((j) => !visible.has(j.job))].flatMap(
      (j) => rows.get(j.job).els,
    );
    const now = body.children;
    if (order.length !== now.length || order.some((el, i) => el !== now[i])) {
      const focused = body.contains(document.activeElement) ? document.activeElement : null;
      const selection = focused?.selectionStart ?? null;
      body.append(...order);
      if (focused && document.activeElement !== focused) {
        focused.focus();
        if (selection !== null) focused.setSelectionRange(selection, focused.selectionEnd);
      }
    }
    count.textContent =
      shown.length === ctx.jobs.length
        ? `${ctx.jobs.length} jobs`
        : `${shown.length} of ${ctx.jobs.length} jobs`;
    const query = new URLSearchParams(
      Object.entries(want).filter(([k, v]) => v && !(k === 'sort' && v === 'name')),
    );
    const hash = `#/${query.size ? `?${query}` : ''}`;
    if (location.hash !== hash && !(hash === '#/' && !location.hash)) history.replaceState(null, '', hash);
  };
  form.addEventListener('input', apply);
  form.addEventListener('change', apply);
  apply();

  // Each update redraws the jobs whose rows changed; the list's order and filters follow only when
  // they could have moved a row (a sort or filter on what changed).
  let replaced = false;
  ctx.onUpdate((s, changed) => {
    if (replaced) return;
    // Another catalog (the server restarted with jobs added or gone): the view drawn again.
    if (s.jobs.length !== rows.size || s.jobs.some((j) => !rows.has(j.job))) {
      replaced = true;
      clearInterval(ageing);
      root.replaceChildren();
      renderOverview(root, ctx);
      return;
    }
    const byName = new Map(s.jobs.map((j) => [j.job, j]));
    for (const name of changed) if (byName.has(name)) rows.get(name)?.update(byName.get(name));
    if (changed.size) apply();
  });
  // "5 min ago" ages without an update: redrawn every half minute while the list is shown.
  const ageing = setInterval(() => {
    if (!root.isConnected || replaced) return clearInterval(ageing);
    for (const j of ctx.jobs) rows.get(j.job)?.update(j);
  }, 30_000);
}
