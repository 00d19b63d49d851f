// Open incidents: failures alerted and not yet cleared, with what failed (a window, an effect, a
// job's lag), since when (in the job's zone and UTC) and how often.
import { h } from '../dom.js';
import { both } from '../time.js';
import { showMore } from './more.js';

/** An instant in the job's zone and in UTC, as the other views show it. */
const inZoneAndUtc = (iso, zone) =>
  both(iso, zone ?? 'UTC')
    .filter(Boolean)
    .join(' / ');

/** The window an incident's subject names (a window key, or an effect key `<window key>:<name>`). */
function windowOf(i) {
  const m = /^([^/]+\/\d{4}-\d\d-\d\dT[\d:]+Z(?:#\d+)?)(?::[^/]*)?$/.exec(i.subject);
  return m && m[1].startsWith(`${i.job}/`) ? m[1] : null;
}

export async function renderIncidents(root, ctx) {
  const first = await ctx.apiPage('/api/incidents');
  const cardOf = (i) => {
    const zone = ctx.job(i.job)?.timezone;
    const win = windowOf(i);
    return h(
      'article',
      { class: 'card incident' },
      h('h2', {}, h('span', { class: 'badge failed' }, i.kind), ' ', i.job),
      h(
        'dl',
        {},
        h('dt', {}, 'Subject'),
        h(
          'dd',
          {},
          win
            ? h(
                'a',
                { href: `#/jobs/${encodeURIComponent(i.job)}/windows/${encodeURIComponent(win)}` },
                i.subject,
              )
            : h('code', {}, i.subject),
        ),
        h('dt', {}, 'Open since'),
        h('dd', {}, inZoneAndUtc(i.opened, zone)),
        h('dt', {}, 'Occurrences'),
        h('dd', {}, String(i.occurrences)),
        h('dt', {}, 'Last error'),
        h('dd', {}, i.lastError),
      ),
      i.kind === 'effect-unknown'
        ? h('p', {}, h('a', { href: '#/effects' }, 'Decide it under Effects in doubt'))
        : null,
    );
  };
  const list = h('div', { class: 'cards' }, first.items.map(cardOf));
  // In pages of 100, oldest first: "Show more" appends the next.
  const more = showMore(ctx, 'Show more', (items) => list.append(...items.map(cardOf)));
  more.offer(first.next);
  root.replaceChildren(
    h('h1', {}, 'Open incidents'),
    first.items.length ? list : h('p', { class: 'empty' }, 'No open incidents.'),
    more.box,
  );
}
