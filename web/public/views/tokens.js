// Personal API tokens: one's own (an admin sees everyone's), each with its roles, expiry and last
// use, revocable at once; and a form to make one for a role one has. The secret is shown once.
import { h } from '../dom.js';
import { utc } from '../time.js';

const EXPIRIES = [
  ['7d', '7 days'],
  ['30d', '30 days'],
  ['90d', '90 days'],
  ['366d', 'a year'],
];

export async function renderTokens(root, ctx) {
  const status = h('p', { class: 'view-status', role: 'status', 'aria-live': 'polite', tabindex: '-1' });
  if (ctx.me.mode !== 'oidc') {
    root.replaceChildren(
      h('h1', {}, 'API tokens'),
      h(
        'p',
        { class: 'empty' },
        'Single-user mode has one shared token (TIDEMARK_WEB_TOKEN). Personal tokens come with sign-in through your identity provider.',
      ),
    );
    return;
  }
  const list = h('div', { class: 'cards' });
  const label = h('input', {
    id: 'tk-label',
    name: 'label',
    required: true,
    maxlength: 100,
    autocomplete: 'off',
  });
  const role = h(
    'select',
    { id: 'tk-role', name: 'role' },
    ctx.me.roles.map((r) => h('option', { value: r }, r)),
  );
  const expiry = h(
    'select',
    { id: 'tk-expiry', name: 'expiresIn' },
    EXPIRIES.map(([v, text]) => h('option', { value: v, selected: v === '30d' }, text)),
  );
  const shown = h('div', { class: 'tk-new', 'aria-live': 'polite' });
  const form = h(
    'form',
    {
      class: 'tk-form',
      onsubmit: async (e) => {
        e.preventDefault();
        status.textContent = 'Making the token…';
        try {
          const made = await ctx.post('/api/tokens', {
            label: label.value.trim(),
            role: role.value,
            expiresIn: expiry.value,
          });
          const secret = h('input', { id: 'tk-secret', readonly: true, value: made.token, size: 70 });
          shown.replaceChildren(
            h(
              'label',
              { for: 'tk-secret' },
              `Your token "${made.label}" (shown once: keep it in your secret store)`,
            ),
            secret,
          );
          secret.select();
          status.textContent = `Made ${made.id}, ${made.roles.join(', ')}, until ${utc(made.expiresAt)}.`;
          label.value = '';
          await load();
        } catch (err) {
          status.textContent = `Not made: ${err.message}`;
        }
      },
    },
    h('label', { for: 'tk-label' }, 'What it is for'),
    label,
    h('label', { for: 'tk-role' }, 'Role'),
    role,
    h('label', { for: 'tk-expiry' }, 'Expires in'),
    expiry,
    h('button', { type: 'submit' }, 'Make a token'),
  );
  root.replaceChildren(
    h('h1', {}, 'API tokens'),
    h(
      'p',
      { class: 'hint' },
      'For scripts and automation: a token acts as you, with the role you give it. Send it as Authorization: Bearer <token>.',
    ),
    form,
    shown,
    status,
    list,
  );

  async function revoke(t, button) {
    button.disabled = true;
    try {
      await ctx.post(`/api/tokens/${encodeURIComponent(t.id)}/revoke`, {});
      status.textContent = `Revoked ${t.label} (${t.id}).`;
      await load();
      status.focus();
    } catch (err) {
      status.textContent = `Not revoked: ${err.message}`;
      button.disabled = false;
    }
  }

  async function load() {
    const { tokens } = await ctx.api('/api/tokens');
    if (!tokens.length) {
      list.replaceChildren(h('p', { class: 'empty' }, 'No tokens yet.'));
      return;
    }
    list.replaceChildren(
      h(
        'table',
        { class: 'tk-table' },
        h('caption', {}, 'Your tokens'),
        h(
          'thead',
          {},
          h(
            'tr',
            {},
            ['Label', 'Id', 'Roles', 'Owner', 'Made', 'Expires', 'Last used', ''].map((c) =>
              h('th', { scope: 'col' }, c),
            ),
          ),
        ),
        h(
          'tbody',
          {},
          tokens.map((t) => {
            const b = h(
              'button',
              { type: 'button', 'aria-label': `Revoke ${t.label}`, onclick: () => revoke(t, b) },
              'Revoke',
            );
            return h(
              'tr',
              { dataset: { token: t.id } },
              h('td', {}, t.label),
              h('td', {}, t.id),
              h('td', {}, t.roles.join(', ')),
              h('td', {}, t.name),
              h('td', {}, utc(t.createdAt)),
              h('td', {}, utc(t.expiresAt)),
              h('td', {}, t.lastUsedAt ? utc(t.lastUsedAt) : 'never'),
              h('td', {}, t.revokedAt ? `revoked ${utc(t.revokedAt)}` : b),
            );
          }),
        ),
      ),
    );
  }
  await load();
}
