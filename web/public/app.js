// The page's shell: login, the header's navigation, a hash router that loads one module per view
// (views/<name>.js exporting render<Name>(root, ctx)), and the update stream (/api/events) that
// keeps the overview rows current (whole once, then only the rows that changed). A view that is missing or broken shows as such, never a blank page.
import { h } from './dom.js';

const csrf = document.querySelector('meta[name=csrf]').content;
const view = document.getElementById('view');
const msg = document.getElementById('msg');

/** Hash routes: `#/` overview, `#/jobs/<job>`, `#/jobs/<job>/windows/<windowKey>`, `#/jobs/<job>/backups`, `#/effects`, ... */
export function route(hash) {
  const path = hash.replace(/^#\/?/, '').split('?')[0];
  const parts = path.split('/');
  if (!path) return { name: 'overview', params: {} };
  if (parts[0] === 'jobs' && parts[1] && parts[2] === 'windows' && parts.length > 3)
    return {
      name: 'window',
      params: { job: decodeURIComponent(parts[1]), windowKey: decodeURIComponent(parts.slice(3).join('/')) },
    };
  if (parts[0] === 'jobs' && parts[1] && parts[2] === 'backups')
    return { name: 'backups', params: { job: decodeURIComponent(parts[1]) } };
  if (parts[0] === 'jobs' && parts[1]) return { name: 'grid', params: { job: decodeURIComponent(parts[1]) } };
  return { name: parts[0], params: {} };
}

const say = (text, kind = 'info') => {
  msg.textContent = text;
  msg.dataset.kind = kind;
};

async function answer(r) {
  const body = await r.json().catch(() => ({}));
  // Logged out elsewhere or expired: back to the login form.
  if (r.status === 401) location.reload();
  if (!r.ok) throw new Error(body.error || `HTTP ${r.status}`);
  return body;
}
const api = (path) => fetch(path, { headers: { accept: 'application/json' } }).then(answer);
/** One page of a list the server answers in pages: its items, and the next page's path while more follow. */
const apiPage = (path) =>
  fetch(path, { headers: { accept: 'application/json' } }).then(async (r) => ({
    items: await answer(r),
    next: /<([^>]+)>;\s*rel="next"/.exec(r.headers.get('link') ?? '')?.[1],
  }));
const post = (path, body) =>
  fetch(path, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-csrf-token': csrf },
    body: JSON.stringify(body ?? {}),
  }).then(answer);

let state = null;
let listeners = new Set();
let first;
const ready = new Promise((r) => (first = r));

const ctx = {
  api,
  apiPage,
  post,
  go: (hash) => {
    location.hash = hash;
  },
  job: (name) => state?.jobs.find((j) => j.job === name),
  get jobs() {
    return state?.jobs ?? [];
  },
  get webUi() {
    return state?.webUi ?? '';
  },
  params: {},
  /** Called with each new state while this view is shown, and the names of the jobs that changed. */
  onUpdate: (fn) => listeners.add(fn),
  say,
};

/** views/window-detail.js exports renderWindowDetail. */
const capital = (s) => s.replace(/(^|-)(.)/g, (_, _dash, c) => c.toUpperCase());
/** Other file names a view may have been written under. */
const ALIASES = { grid: ['job', 'jobs'], window: ['window-detail'] };

async function show() {
  const { name, params } = route(location.hash);
  listeners = new Set();
  ctx.params = params;
  for (const a of document.querySelectorAll('#nav a'))
    if (a.dataset.view === name) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  const root = h('section', { class: 'view', 'aria-live': 'off', dataset: { view: name } });
  view.replaceChildren(root);
  let module;
  let file = name;
  for (const candidate of [name, ...(ALIASES[name] ?? [])])
    try {
      module = await import(`./views/${candidate}.js`);
      file = candidate;
      break;
    } catch {
      // Not written yet (or not under this name): try the next, then say so.
    }
  if (!module) {
    root.append(
      h('h1', {}, capital(name)),
      h('p', { class: 'empty' }, 'This view is not available yet.'),
      h('p', {}, h('a', { href: '#/' }, 'Back to the overview')),
    );
    return;
  }
  const render = module[`render${capital(file)}`];
  try {
    if (typeof render !== 'function') throw new Error(`views/${file}.js has no render${capital(file)}`);
    await render(root, ctx);
  } catch (err) {
    root.append(h('p', { class: 'error', role: 'alert' }, `This view failed: ${err.message}`));
  }
}

/**
 * Who the page acts as (GET /api/me), shown in the header; the body's can-<role> classes hide what
 * this person may not do (app.css), and the server refuses it anyway (403 naming the role).
 */
async function whoAmI() {
  ctx.me = await api('/api/me');
  const can = (role) => ctx.me.roles.includes(role) || ctx.me.roles.includes('admin');
  ctx.can = can;
  for (const role of ['viewer', 'operator', 'approver', 'admin'])
    document.body.classList.toggle(`can-${role}`, can(role));
  document.getElementById('who').textContent =
    ctx.me.mode === 'oidc'
      ? `${ctx.me.displayName} (${ctx.me.roles.join(', ')})`
      : 'Single-user mode: anyone with the shared token; names are not verified';
}

if (document.body.dataset.auth === 'no') {
  document.getElementById('login').hidden = false;
  // Signed in through the identity provider, or (single-user mode) with the shared token.
  const oidc = document.body.dataset.mode === 'oidc';
  document.getElementById('oidc-login').hidden = !oidc;
  document.getElementById('token-login').hidden = oidc;
} else {
  document.getElementById('login').remove();
  document.getElementById('nav').hidden = false;
  document.getElementById('logout').hidden = false;
  const events = new EventSource('/api/events');
  // The whole state first (and again after a reconnect), then what changed: the changed jobs' rows
  // and any other key. Listeners get the state and the names of the jobs whose rows changed.
  events.onmessage = (e) => {
    state = JSON.parse(e.data);
    first();
    const all = new Set(state.jobs.map((j) => j.job));
    for (const fn of listeners) fn(state, all);
  };
  events.addEventListener('changes', (e) => {
    const { jobs, ...rest } = JSON.parse(e.data);
    const changed = new Map(jobs.map((j) => [j.job, j]));
    state = { ...state, ...rest, jobs: state.jobs.map((j) => changed.get(j.job) ?? j) };
    for (const fn of listeners) fn(state, new Set(changed.keys()));
  });
  // Refused (the session expired or logged out elsewhere): back to the login form.
  events.onerror = () => {
    if (events.readyState === EventSource.CLOSED) location.reload();
  };
  // A view is drawn once the page knows who it acts as and has its first snapshot (the jobs' zones):
  // a hash changed before then waits for both, rather than drawing a view without them.
  const started = Promise.all([ready, whoAmI()]);
  window.addEventListener('hashchange', () => void started.then(() => show()));
  started.then(() => show());
}
