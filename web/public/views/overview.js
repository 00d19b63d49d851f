// Overview: one card per job: schedule in words and as the Temporal Schedule has it, state, next
// fire, watermark, lag, last run, health counts, a sparkline of recent durations; Pause (with a
// reason), Resume and Trigger. Updates in place from the stream, so focus stays where it was.
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

export function renderOverview(root, ctx) {
  root.append(h('h1', {}, 'Jobs'));
  const list = h('div', { class: 'jobs' });
  root.append(list);
  let cards = new Map();
  const draw = (jobs) => {
    const same = jobs.length === cards.size && jobs.every((j) => cards.has(j.job));
    if (!same) {
      cards = new Map(jobs.map((j) => [j.job, card(j, ctx)]));
      list.replaceChildren(...[...cards.values()].map((c) => c.el));
      if (!jobs.length) list.append(h('p', { class: 'empty' }, 'No jobs in the catalog.'));
      return;
    }
    for (const j of jobs) cards.get(j.job).update(j);
  };
  draw(ctx.jobs);
  ctx.onUpdate((s) => draw(s.jobs));
}
