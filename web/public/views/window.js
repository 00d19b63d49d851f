// One window's detail (#/jobs/<job>/windows/<window key>): where it stands, its ledger record of
// every generation, every run record, each effect with its attempts and the provider's replies,
// incidents, the rerun history, the link to its run in the Temporal Web UI, and a rerun request
// for a done window.
import { h } from '../dom.js';
import { inZone } from '../time.js';
import { duration, STATES, viewStyles } from './grid.js';

/** The job and window key named by the hash #/jobs/<job>/windows/<key>. */
function ofHash() {
  const m = /^#\/jobs\/([^/]+)\/windows\/(.+)$/.exec(location.hash) ?? [];
  return { job: decodeURIComponent(m[1] ?? ''), key: decodeURIComponent(m[2] ?? '') };
}

const label = (state) => STATES.find((s) => s.id === state)?.label ?? state;

/** An instant in the job's zone and in UTC. */
function when(iso, zone) {
  if (!iso) return '–';
  return h(
    'span',
    { class: 'when' },
    inZone(iso, zone, true),
    h('br'),
    h('span', { class: 'utc' }, `${iso.replace('T', ' ')} UTC`),
  );
}

function table(caption, head, rows, empty) {
  if (rows.length === 0) return h('p', { class: 'empty' }, empty);
  return h(
    'div',
    { class: 'table-scroll', tabindex: '0', role: 'region', 'aria-label': caption },
    h(
      'table',
      { class: 'records' },
      h('caption', { class: 'visually-hidden' }, caption),
      h(
        'thead',
        {},
        h(
          'tr',
          {},
          head.map((x) => h('th', { scope: 'col' }, x)),
        ),
      ),
      h(
        'tbody',
        {},
        rows.map((r) =>
          h(
            'tr',
            {},
            r.map((c) => h('td', {}, c ?? '–')),
          ),
        ),
      ),
    ),
  );
}

/** "(Alice Operator, subject u1001, session:0a1b…)": who a person was, as verified, and through what. */
const whoVerified = (x) =>
  x.subject
    ? `(${x.displayName}, subject ${x.subject}, ${x.credential})`
    : `(${x.displayName}, not verified, ${x.credential})`;

const section = (id, title, ...body) =>
  h('section', { 'aria-labelledby': id }, h('h2', { id }, title), ...body);

const json = (v) => h('pre', { class: 'reply' }, JSON.stringify(v, null, 2));

function rerunForm(ctx, d, root) {
  const status = h('p', { role: 'status', class: 'form-status' });
  const form = h(
    'form',
    { class: 'wd-rerun-form', dataset: { needs: 'operator' } },
    h(
      'p',
      {},
      `A rerun runs this window again as a new generation, replacing what generation ${d.generation} wrote, once someone else approves it.`,
    ),
    h('label', { for: 'rerun-reason' }, 'Reason'),
    h('input', { id: 'rerun-reason', name: 'reason', required: true, autocomplete: 'off' }),
    // Signed in, one asks as oneself; in single-user mode the page knows nobody: a name is given.
    ctx.me.verified ? null : h('label', { for: 'rerun-by' }, 'Your name'),
    ctx.me.verified
      ? null
      : h('input', { id: 'rerun-by', name: 'by', required: true, autocomplete: 'username' }),
    h('button', { type: 'submit' }, 'Request a rerun'),
    status,
  );
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const f = Object.fromEntries(new FormData(form));
    status.textContent = 'Asking…';
    try {
      const r = await ctx.post(`/api/jobs/${encodeURIComponent(d.job)}/rerun`, {
        window: d.start,
        reason: f.reason,
        ...(f.by ? { by: f.by } : {}),
      });
      status.textContent =
        r.note ??
        `Requested: ${r.request}${r.generation ? ` (generation ${r.generation})` : ''}; it waits for approval.`;
      await renderWindow(root, ctx);
    } catch (err) {
      status.textContent = `Not requested: ${err.message ?? err}`;
    }
  });
  return form;
}

export async function renderWindow(root, ctx) {
  viewStyles();
  const fromHash = ofHash();
  const job = ctx.params?.job || fromHash.job;
  const key = ctx.params?.windowKey || fromHash.key;
  root.replaceChildren(h('p', { class: 'loading', role: 'status' }, `Loading ${key}…`));
  let d;
  try {
    d = await ctx.api(`/api/jobs/${encodeURIComponent(job)}/windows/${encodeURIComponent(key)}`);
  } catch (err) {
    root.replaceChildren(
      h(
        'p',
        { class: 'crumbs' },
        h('a', { href: '#/' }, 'Jobs'),
        ' / ',
        h('a', { href: `#/jobs/${encodeURIComponent(job)}` }, job),
      ),
      h('p', { class: 'error', role: 'alert' }, String(err.message ?? err)),
    );
    return;
  }
  const zone = d.timezone;
  const last = d.ledger.find((l) => l.generation === d.generation);

  root.replaceChildren(
    h(
      'div',
      { class: 'wv' },
      h(
        'p',
        { class: 'crumbs' },
        h('a', { href: '#/' }, 'Jobs'),
        ' / ',
        h('a', { href: `#/jobs/${encodeURIComponent(job)}` }, job),
        ' / window',
      ),
      h('h1', {}, d.local),
      h(
        'div',
        { class: 'summary' },
        h('span', { class: `wv-badge s-${d.state}` }, label(d.state)),
        d.generation ? h('span', { class: 'wv-badge' }, `generation ${d.generation}`) : null,
        h(
          'dl',
          { class: 'wv-facts' },
          h('dt', {}, 'Window key'),
          h('dd', {}, h('code', {}, d.key)),
          h('dt', {}, `In ${zone}`),
          h('dd', {}, d.local),
          h('dt', {}, 'In UTC'),
          h('dd', {}, d.utc),
          last
            ? [
                h('dt', {}, 'Records'),
                h(
                  'dd',
                  {},
                  `${last.records.in ?? 0} in, ${last.records.applied ?? 0} applied, ${last.records.quarantined ?? 0} quarantined`,
                ),
              ]
            : null,
          last ? [h('dt', {}, 'Attempts'), h('dd', {}, String(last.attempts))] : null,
          last ? [h('dt', {}, 'Duration'), h('dd', {}, duration(last.durationMs))] : null,
        ),
        h(
          'p',
          {},
          h(
            'a',
            { href: d.temporal, target: '_blank', rel: 'noopener noreferrer', class: 'external' },
            'This window’s run in the Temporal Web UI',
          ),
        ),
      ),
      d.notes.map((n) => h('p', { class: 'note', role: 'status' }, n)),

      section(
        'ledger',
        'Ledger',
        table(
          'Ledger record of every generation',
          [
            'Generation',
            'Status',
            'Trigger',
            'Attempts',
            'Started',
            'Finished',
            'Duration',
            'Records in / applied / quarantined',
            'Reason',
            'Run',
          ],
          d.ledger.map((l) => [
            String(l.generation),
            label(l.status),
            l.trigger,
            String(l.attempts),
            when(l.startedAt, zone),
            when(l.finishedAt, zone),
            duration(l.durationMs),
            `${l.records.in ?? '–'} / ${l.records.applied ?? '–'} / ${l.records.quarantined ?? '–'}`,
            l.reason,
            l.temporal
              ? h('a', { href: l.temporal, target: '_blank', rel: 'noopener noreferrer' }, 'Temporal')
              : null,
          ]),
          'Nothing recorded: this window has not been processed.',
        ),
        Object.keys(d.quarantined).length
          ? h(
              'p',
              {},
              `Records set aside: ${Object.entries(d.quarantined)
                .map(([g, n]) => `${n} in generation ${g}`)
                .join(', ')}.`,
            )
          : null,
      ),

      section(
        'runs',
        'Runs',
        table(
          'Run records',
          ['Kind', 'Generation', 'Attempt', 'Started', 'Duration', 'Outcome', 'Reason'],
          d.runs.map((r) => [
            r.kind,
            r.generation === null ? '–' : String(r.generation),
            r.attempt === null ? '–' : String(r.attempt),
            when(r.startedAt, zone),
            duration(r.durationMs),
            r.outcome,
            r.reason,
          ]),
          'No run recorded.',
        ),
      ),

      section(
        'effects',
        'Effects',
        d.effects.length === 0
          ? h('p', { class: 'empty' }, 'This window has no external effects.')
          : d.effects.map((e) =>
              h(
                'article',
                { class: 'effect' },
                h(
                  'h3',
                  {},
                  `${e.name} (${e.channel})`,
                  ' ',
                  h('span', { class: `wv-badge e-${e.status}` }, e.status),
                ),
                h(
                  'dl',
                  { class: 'wv-facts' },
                  h('dt', {}, 'Effect key'),
                  h('dd', {}, h('code', {}, e.key)),
                  h('dt', {}, 'Request'),
                  h(
                    'dd',
                    {},
                    Object.entries(e.request)
                      .filter(([, v]) => v !== undefined && !(Array.isArray(v) && v.length === 0))
                      .map(([k, v]) =>
                        h('span', { class: 'kv' }, `${k}: ${Array.isArray(v) ? v.join(', ') : v}`),
                      ),
                  ),
                  h('dt', {}, 'Policy when unknown'),
                  h('dd', {}, e.policy),
                  h('dt', {}, 'Provider id'),
                  h('dd', {}, e.providerId ?? '–'),
                  e.lastError ? [h('dt', {}, 'Last error'), h('dd', {}, e.lastError)] : null,
                  e.decision
                    ? [h('dt', {}, 'Decision'), h('dd', {}, `${e.decision.decision} by ${e.decision.by}`)]
                    : null,
                ),
                e.reply ? [h('h4', {}, 'Provider reply'), json(e.reply)] : null,
                h('h4', {}, 'Attempts'),
                table(
                  `Attempts of ${e.name}`,
                  ['Fence', 'Started', 'Duration', 'Outcome', 'Provider id', 'Error'],
                  e.tries.map((t) => [
                    String(t.fence),
                    when(t.startedAt, zone),
                    duration(t.durationMs),
                    t.outcome,
                    t.providerId,
                    t.error,
                  ]),
                  'Not attempted yet.',
                ),
              ),
            ),
      ),

      section(
        'incidents',
        'Incidents',
        table(
          'Incidents about this window',
          ['Kind', 'Subject', 'State', 'Opened', 'Closed', 'Occurrences', 'Last error'],
          d.incidents.map((i) => [
            i.kind,
            i.subject,
            i.open ? 'open' : 'closed',
            when(i.openedAt, zone),
            when(i.closedAt, zone),
            String(i.occurrences),
            i.lastError,
          ]),
          'No incident about this window.',
        ),
      ),

      section(
        'reruns',
        'Rerun history',
        d.reruns.length === 0
          ? h('p', { class: 'empty' }, 'No rerun was asked for.')
          : h(
              'ol',
              { class: 'reruns' },
              d.reruns.map((r) =>
                h(
                  'li',
                  {},
                  h(
                    'p',
                    {},
                    h('strong', {}, `Generation ${r.generation}: ${r.status}`),
                    ` — asked by ${r.requestedBy}: “${r.reason}”`,
                    ' ',
                    h(
                      'a',
                      { href: r.temporal, target: '_blank', rel: 'noopener noreferrer' },
                      'request in Temporal',
                    ),
                  ),
                  h(
                    'p',
                    { class: 'muted' },
                    'Asked ',
                    when(r.requestedAt, zone),
                    r.askedThrough ? ` ${whoVerified(r.askedThrough)}` : '',
                  ),
                  r.decisions.length
                    ? h(
                        'ul',
                        {},
                        r.decisions.map((x) =>
                          h(
                            'li',
                            {},
                            `${x.decision} by ${x.actor} via ${x.source}${x.subject ? ` ${whoVerified(x)}` : ' (not verified)'}: ${x.accepted ? 'accepted' : `refused (${x.reason})`}`,
                          ),
                        ),
                      )
                    : null,
                ),
              ),
            ),
        d.rerunnable ? rerunForm(ctx, d, root) : null,
      ),
    ),
  );
}
