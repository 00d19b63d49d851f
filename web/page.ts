// The management page: one HTML document; its script renders what /api/events streams.
export const PAGE = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>tidemark</title>
<meta name="csrf" content="%CSRF%">
<style>
body{font-family:system-ui,Arial,sans-serif;margin:24px;color:#111}
table{border-collapse:collapse;margin-bottom:16px}td,th{border:1px solid #ccc;padding:4px 8px;font-size:13px;text-align:left}
.grid{display:flex;flex-wrap:wrap;gap:2px;max-width:620px}.cell{width:10px;height:10px;display:inline-block;background:#ddd}
.cell.done{background:#16a34a}.cell.failed{background:#dc2626}.paused{color:#b45309;font-weight:bold}
form{margin:8px 0}input,select,button{font-size:13px;margin-right:4px}#msg{color:#1d4ed8}
</style></head>
<body data-auth="yes">
<h1>tidemark</h1>
<div id="login" hidden><form method="post" action="/login"><input type="password" name="token" placeholder="access token" autofocus><button>Log in</button></form></div>
<div id="app" hidden>
<p id="msg"></p>
<table id="jobs"><thead><tr><th>job</th><th>grid</th><th>state</th><th>next fire</th><th>watermark</th><th>lag</th><th>last run</th><th>windows (oldest to newest)</th><th></th></tr></thead><tbody></tbody></table>
<h2>Backfill</h2>
<form id="backfill"><select name="job"></select><input name="from" placeholder="from (ISO)"><input name="to" placeholder="to (ISO)"><button>Start backfill</button></form>
<h2>Request a rerun</h2>
<form id="rerun"><select name="job"></select><input name="window" placeholder="window start (ISO)"><input name="reason" placeholder="reason"><input name="by" placeholder="your name"><button>Request</button></form>
<h2>Pending approvals</h2><ul id="approvals"></ul>
<p><a id="webui" href="#">All runs in the Temporal Web UI</a></p>
</div>
<script>
const csrf = document.querySelector('meta[name=csrf]').content;
const esc = (s) => String(s ?? '-').replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]);
const msg = (t) => { document.getElementById('msg').textContent = t; };
async function post(path, body) {
  const r = await fetch(path, { method: 'POST', headers: { 'content-type': 'application/json', 'x-csrf-token': csrf }, body: JSON.stringify(body || {}) });
  const j = await r.json();
  msg(r.ok ? path.split('/').pop() + ': done' : 'error: ' + j.error);
}
function render(s) {
  document.getElementById('webui').href = s.webUi;
  document.querySelector('#jobs tbody').innerHTML = s.jobs.map((j) => {
    const cells = (s.windows[j.job] || []).map((w) => '<a class="cell ' + esc(w.status) + '" title="' + esc(w.window + ' ' + w.status + ' ' + (w.input ?? 0) + ' records') + '" href="' + s.webUi + '/' + encodeURIComponent(w.workflowId || w.window) + '"></a>').join('');
    const state = !j.scheduled ? 'no schedule' : j.paused ? '<span class="paused">paused</span>' : 'active';
    return '<tr data-job="' + esc(j.job) + '"><td>' + esc(j.job) + '</td><td>' + esc(j.grid) + '</td><td class="state">' + state + '</td><td>' + esc(j.nextFires[0]) + '</td><td>' + esc(j.watermark) + '</td><td>' + esc(j.lagWindows) +
      '</td><td>' + esc(j.lastRun ? j.lastRun.outcome + ' ' + j.lastRun.durationMs + ' ms' : null) + '</td><td><div class="grid" data-job="' + esc(j.job) + '">' + cells + '</div></td><td>' +
      '<button data-action="trigger">Trigger</button>' + (j.paused ? '<button data-action="resume">Resume</button>' : '<button data-action="pause">Pause</button>') + '</td></tr>';
  }).join('');
  for (const sel of document.querySelectorAll('select[name=job]')) if (!sel.options.length) sel.innerHTML = s.jobs.map((j) => '<option>' + esc(j.job) + '</option>').join('');
  document.getElementById('approvals').innerHTML = s.approvals.map((a) => '<li>' + esc(a.request) + ' asked by ' + esc(a.by) + ': ' + esc(a.reason) + '</li>').join('') || '<li>none</li>';
}
if (document.body.dataset.auth === 'no') document.getElementById('login').hidden = false;
else {
  document.getElementById('app').hidden = false;
  document.getElementById('jobs').addEventListener('click', (e) => {
    const b = e.target.closest('button[data-action]');
    if (b) post('/api/jobs/' + b.closest('tr').dataset.job + '/' + b.dataset.action, b.dataset.action === 'pause' ? { reason: 'paused from the page' } : {});
  });
  for (const id of ['backfill', 'rerun']) document.getElementById(id).addEventListener('submit', (e) => {
    e.preventDefault();
    const f = Object.fromEntries(new FormData(e.target));
    post('/api/jobs/' + f.job + '/' + id, f);
  });
  new EventSource('/api/events').onmessage = (e) => render(JSON.parse(e.data));
}
</script></body></html>`;
