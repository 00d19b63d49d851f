// The management page: one HTML document; its script (web/client.ts, served as /app.js) renders what
// /api/events streams. No inline script or style, so the CSP can refuse any that gets injected.
export const PAGE = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>tidemark</title>
<meta name="csrf" content="%CSRF%">
<link rel="stylesheet" href="/app.css">
</head>
<body data-auth="yes">
<h1>tidemark</h1>
<div id="login" hidden><form method="post" action="/login"><input type="password" name="token" placeholder="access token" autofocus><button>Log in</button></form></div>
<div id="app" hidden>
<form method="post" action="/logout"><input type="hidden" name="csrf" value="%CSRF%"><button>Log out</button></form>
<p id="msg"></p>
<table id="jobs"><thead><tr><th>job</th><th>grid</th><th>state</th><th>next fire</th><th>watermark</th><th>lag</th><th>last run</th><th>windows (oldest to newest)</th><th></th></tr></thead><tbody></tbody></table>
<h2>Backfill</h2>
<form id="backfill"><select name="job"></select><input name="from" placeholder="from (ISO)"><input name="to" placeholder="to (ISO)"><input name="batch" placeholder="windows per batch (optional)" inputmode="numeric"><label><input type="checkbox" name="allowLarge" value="true">more windows than the limit</label><button>Start backfill</button></form>
<h2>Request a rerun</h2>
<form id="rerun"><select name="job"></select><input name="window" placeholder="window start (ISO)"><input name="reason" placeholder="reason"><input name="by" placeholder="your name"><button>Request</button></form>
<h2>Pending approvals</h2><ul id="approvals"></ul>
<p><a id="webui" href="#">All runs in the Temporal Web UI</a></p>
</div>
<script src="/app.js"></script>
</body></html>`;

export const STYLE = `body{font-family:system-ui,Arial,sans-serif;margin:24px;color:#111}
table{border-collapse:collapse;margin-bottom:16px}td,th{border:1px solid #ccc;padding:4px 8px;font-size:13px;text-align:left}
.grid{display:flex;flex-wrap:wrap;gap:2px;max-width:620px}.cell{width:10px;height:10px;display:inline-block;background:#ddd}
.cell.done{background:#16a34a}.cell.failed{background:#dc2626}.paused{color:#b45309;font-weight:bold}
form{margin:8px 0}input,select,button{font-size:13px;margin-right:4px}#msg{color:#1d4ed8}
`;
