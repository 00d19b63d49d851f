// Effects in doubt: each with its job, window (in the job's zone and UTC), channel, attempts, last
// error and provider reply, and Resend / Skip. A decision is made under the operator's tidemark
// name and goes through the same code as `tidemark effects decide` and the Slack buttons.
import { h } from '../dom.js';
import { both } from '../time.js';
import { showMore } from './more.js';

/** An instant in the job's zone and in UTC, as the other views show it. */
const inZoneAndUtc = (iso, zone) =>
  both(iso, zone ?? 'UTC')
    .filter(Boolean)
    .join(' / ');

const NAME_KEY = 'tidemark.name';

function field(label, value) {
  return [h('dt', {}, label), h('dd', {}, value ?? '-')];
}

/** What the provider said: its id for the message, and any fuller answer; nothing when it never answered. */
function reply(e) {
  const parts = [];
  if (e.providerId) parts.push(`id ${e.providerId}`);
  if (e.providerReply !== null && e.providerReply !== undefined) parts.push(JSON.stringify(e.providerReply));
  return parts.length ? parts.join('; ') : 'none (no answer recorded)';
}

function lastAttempt(e, zone) {
  const a = e.lastAttempt;
  if (!a) return '-';
  return `${a.outcome}, ${inZoneAndUtc(a.at, zone)}${a.error && a.error !== e.lastError ? `: ${a.error}` : ''}`;
}

export async function renderEffects(root, ctx) {
  const status = h('p', { class: 'view-status', role: 'status', 'aria-live': 'polite', tabindex: '-1' });
  const name = h('input', {
    id: 'decider',
    name: 'by',
    autocomplete: 'username',
    value: localStorage.getItem(NAME_KEY) ?? '',
    onchange: () => localStorage.setItem(NAME_KEY, name.value.trim()),
  });
  const list = h('div', { class: 'cards' });
  root.replaceChildren(
    h('h1', {}, 'Effects in doubt'),
    h(
      'p',
      { class: 'hint' },
      'Effects whose outcome is unknown (a lost reply, an attempt that died) or that failed. Resend sends it once more; Skip records it as not to be sent.',
    ),
    ctx.me.verified
      ? h('p', { class: 'decider' }, `Deciding as ${ctx.me.displayName} (${ctx.me.name})`)
      : h(
          'p',
          { class: 'decider' },
          h('label', { for: 'decider' }, 'Deciding as (your tidemark name)'),
          name,
        ),
    status,
    list,
  );

  async function decide(e, decision, button) {
    const by = ctx.me.verified ? ctx.me.name : name.value.trim();
    if (!by) {
      status.textContent = 'Enter your name first: a decision is recorded under it.';
      name.focus();
      return;
    }
    localStorage.setItem(NAME_KEY, by);
    for (const b of list.querySelectorAll('button')) b.disabled = true;
    status.textContent = `${decision === 'resend' ? 'Resending' : 'Skipping'} ${e.key}…`;
    try {
      const r = await ctx.post(
        `/api/effects/${encodeURIComponent(e.key)}/${decision}`,
        ctx.me.verified ? {} : { by },
      );
      if (r && r.error) throw new Error(r.error);
      status.textContent = `${e.key}: ${r.outcome}${r.providerId ? ` (provider id ${r.providerId})` : ''}`;
      await load();
      // The card and its button are gone: keyboard focus goes to what happened, not to the page's top.
      status.focus();
    } catch (err) {
      status.textContent = `Not done: ${err.message}`;
      for (const b of list.querySelectorAll('button')) b.disabled = false;
      button.focus();
    }
  }

  // In pages of 100, oldest first: "Show more" appends the next.
  const more = showMore(ctx, 'Show more', (items) => list.append(...items.map(cardOf)));
  root.append(more.box);

  async function load() {
    const first = await ctx.apiPage('/api/effects');
    more.offer(first.next);
    if (!first.items.length) {
      list.replaceChildren(h('p', { class: 'empty' }, 'No effects in doubt.'));
      return;
    }
    list.replaceChildren(...first.items.map(cardOf));
  }

  function cardOf(e) {
    const zone = ctx.job(e.job)?.timezone;
    const state = e.leasePassed ? 'unknown (its attempt died)' : e.status;
    const buttons = e.actions.map((a) => {
      const b = h(
        'button',
        {
          type: 'button',
          class: a === 'resend' ? 'primary' : '',
          dataset: { needs: 'approver' },
          'aria-label': `${a === 'resend' ? 'Resend' : 'Skip'} ${e.name} of ${e.window ?? e.job}`,
          onclick: () => decide(e, a, b),
        },
        a === 'resend' ? 'Resend' : 'Skip',
      );
      return b;
    });
    return h(
      'article',
      { class: `card effect ${e.status}` },
      h('h2', {}, h('span', { class: `badge ${e.status}` }, state), ' ', e.name, ' via ', e.channel),
      h(
        'dl',
        {},
        field('Job', e.job),
        field(
          'Window',
          e.windowStart
            ? h(
                'a',
                { href: `#/jobs/${encodeURIComponent(e.job)}/windows/${encodeURIComponent(e.window)}` },
                `${inZoneAndUtc(e.windowStart, zone)}${e.generation ? ` (generation ${e.generation})` : ''}`,
              )
            : e.window,
        ),
        field('Effect', h('code', {}, e.key)),
        field('Policy', e.policy),
        field('Attempts', String(e.attempts)),
        field('Last attempt', lastAttempt(e, zone)),
        field('Last error', e.lastError),
        field('Provider reply', reply(e)),
        e.decidedBy ? field('Decided by', e.decidedBy) : [],
      ),
      h('div', { class: 'actions' }, buttons),
    );
  }
  await load();
}
