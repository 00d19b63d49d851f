const csrf = document.querySelector('meta[name=csrf]').content;
const esc = (s) =>
  String(s ?? '-').replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]);
const msg = (t) => {
  document.getElementById('msg').textContent = t;
};
async function post(path, body) {
  const r = await fetch(path, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-csrf-token': csrf },
    body: JSON.stringify(body || {}),
  });
  const j = await r.json();
  msg(r.ok ? path.split('/').pop() + ': done' : 'error: ' + j.error);
}
function render(s) {
  document.getElementById('webui').href = s.webUi;
  document.querySelector('#jobs tbody').innerHTML = s.jobs
    .map((j) => {
      const cells = (s.windows[j.job] || [])
        .map(
          (w) =>
            '<a class="cell ' +
            esc(w.status) +
            '" title="' +
            esc(w.window + ' ' + w.status + ' ' + (w.input ?? 0) + ' records') +
            '" href="' +
            s.webUi +
            '/' +
            encodeURIComponent(w.workflowId || w.window) +
            '"></a>',
        )
        .join('');
      const state = !j.scheduled ? 'no schedule' : j.paused ? '<span class="paused">paused</span>' : 'active';
      return (
        '<tr data-job="' +
        esc(j.job) +
        '"><td>' +
        esc(j.job) +
        '</td><td>' +
        esc(j.grid) +
        '</td><td class="state">' +
        state +
        '</td><td>' +
        esc(j.nextFires[0]) +
        '</td><td>' +
        esc(j.watermark) +
        '</td><td>' +
        esc(j.lagWindows) +
        '</td><td>' +
        esc(j.lastRun ? j.lastRun.outcome + ' ' + j.lastRun.durationMs + ' ms' : null) +
        '</td><td><div class="grid" data-job="' +
        esc(j.job) +
        '">' +
        cells +
        '</div></td><td>' +
        '<button data-action="trigger">Trigger</button>' +
        (j.paused
          ? '<button data-action="resume">Resume</button>'
          : '<button data-action="pause">Pause</button>') +
        '</td></tr>'
      );
    })
    .join('');
  for (const sel of document.querySelectorAll('select[name=job]'))
    if (!sel.options.length)
      sel.innerHTML = s.jobs.map((j) => '<option>' + esc(j.job) + '</option>').join('');
  document.getElementById('approvals').innerHTML =
    s.approvals
      .map((a) => '<li>' + esc(a.request) + ' asked by ' + esc(a.by) + ': ' + esc(a.reason) + '</li>')
      .join('') || '<li>none</li>';
}
if (document.body.dataset.auth === 'no') document.getElementById('login').hidden = false;
else {
  document.getElementById('app').hidden = false;
  document.getElementById('jobs').addEventListener('click', (e) => {
    const b = e.target.closest('button[data-action]');
    if (b)
      post(
        '/api/jobs/' + b.closest('tr').dataset.job + '/' + b.dataset.action,
        b.dataset.action === 'pause' ? { reason: 'paused from the page' } : {},
      );
  });
  for (const id of ['backfill', 'rerun'])
    document.getElementById(id).addEventListener('submit', (e) => {
      e.preventDefault();
      const f = Object.fromEntries(new FormData(e.target));
      post('/api/jobs/' + f.job + '/' + id, f);
    });
  const events = new EventSource('/api/events');
  events.onmessage = (e) => render(JSON.parse(e.data));
  // Refused (the session expired or logged out elsewhere): back to the login form.
  events.onerror = () => {
    if (events.readyState === EventSource.CLOSED) location.reload();
  };
}
