// A real HTTP server on loopback speaking the two chat APIs tidemark uses: Slack's Web API
// (POST /api/chat.postMessage, Bearer token) and Telegram's Bot API (POST /bot<token>/sendMessage).
// Each can be told to fail (HTTP 500, a gateway's 502/504, Slack's 200 internal_error),
// rate-limit (429 with a retry delay) or answer normally.
import { createServer, type IncomingMessage } from 'node:http';

export type ChatAnswer =
  'ok' | 'error-500' | 'bad-gateway' | 'gateway-timeout' | 'internal-error' | 'rate-limit';

export interface ChatMessage {
  api: 'slack' | 'telegram';
  target: string;
  text: string;
  at: number;
  auth: string | undefined;
  path: string;
  method: string;
  blocks?: unknown;
  ts?: string;
  user?: string;
}

export interface TestChat {
  url: string;
  slackUrl: string;
  telegramUrl: string;
  messages: ChatMessage[];
  requests: { api: 'slack' | 'telegram'; at: number; answer: ChatAnswer }[];
  plan: { slack: ChatAnswer[]; telegram: ChatAnswer[] };
  /** Answer given when a plan is empty. */
  fallback: { slack: ChatAnswer; telegram: ChatAnswer };
  retryAfterSeconds: number;
  /** Slack user groups and their members, for usergroups.users.list. */
  groups: Record<string, string[]>;
  close(): Promise<void>;
}

/** Slack's own client sends form-encoded bodies; tidemark's providers send JSON. Both are accepted. */
async function body(req: IncomingMessage): Promise<Record<string, unknown>> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  const text = Buffer.concat(chunks).toString('utf8');
  if ((req.headers['content-type'] ?? '').includes('application/x-www-form-urlencoded'))
    return Object.fromEntries(new URLSearchParams(text));
  return JSON.parse(text || '{}') as Record<string, unknown>;
}

/**
 * `port`: listen there (a channel that was down coming up); any free port by default. `host`:
 * the address to listen on (the fault suite's hosts reach it on a bridge); loopback by default.
 */
export async function startChat(opts: { port?: number; host?: string } = {}): Promise<TestChat> {
  const state = {
    messages: [] as ChatMessage[],
    requests: [] as TestChat['requests'],
    plan: { slack: [] as ChatAnswer[], telegram: [] as ChatAnswer[] },
    fallback: { slack: 'ok' as ChatAnswer, telegram: 'ok' as ChatAnswer },
    retryAfterSeconds: 1,
    groups: {} as Record<string, string[]>,
  };
  let ts = 1_000;
  const server = createServer((req, res) => {
    void (async () => {
      const json = await body(req);
      const send = (status: number, payload: unknown, headers: Record<string, string> = {}) => {
        res.writeHead(status, { 'content-type': 'application/json', ...headers });
        res.end(JSON.stringify(payload));
      };
      if (req.url === '/api/usergroups.users.list') {
        return send(200, { ok: true, users: state.groups[String(json.usergroup)] ?? [] });
      }
      if (req.url === '/api/auth.test')
        return send(200, {
          ok: true,
          url: 'https://test.slack.example/',
          team: 'test',
          user: 'tidemark',
          team_id: 'T1',
          user_id: 'UBOT',
          bot_id: 'BBOT',
        });
      const slackMethod = /^\/api\/(chat\.postMessage|chat\.update|chat\.postEphemeral)$/.exec(
        req.url ?? '',
      )?.[1];
      const api = slackMethod ? 'slack' : /^\/bot[^/]+\/sendMessage$/.test(req.url ?? '') ? 'telegram' : null;
      if (!api) return send(404, { ok: false, error: 'unknown_method' });
      const answer = state.plan[api].shift() ?? state.fallback[api];
      state.requests.push({ api, at: Date.now(), answer });
      if (answer === 'error-500') return send(500, { ok: false, error: 'internal_error' });
      if (answer === 'bad-gateway' || answer === 'gateway-timeout') {
        res.writeHead(answer === 'bad-gateway' ? 502 : 504, { 'content-type': 'text/html' });
        return res.end('<html><body>gateway error</body></html>');
      }
      if (answer === 'internal-error') return send(200, { ok: false, error: 'internal_error' });
      if (answer === 'rate-limit') {
        return api === 'slack'
          ? send(429, { ok: false, error: 'ratelimited' }, { 'retry-after': String(state.retryAfterSeconds) })
          : send(429, {
              ok: false,
              error_code: 429,
              description: 'Too Many Requests',
              parameters: { retry_after: state.retryAfterSeconds },
            });
      }
      const target = String(api === 'slack' ? json.channel : json.chat_id);
      ts++;
      const messageTs = slackMethod === 'chat.update' ? String(json.ts) : `${ts}.000100`;
      state.messages.push({
        api,
        target,
        text: String(json.text),
        at: Date.now(),
        auth: req.headers.authorization,
        path: req.url ?? '',
        method: slackMethod ?? 'sendMessage',
        ...(json.blocks ? { blocks: json.blocks } : {}),
        ...(api === 'slack' ? { ts: messageTs } : {}),
        ...(json.user ? { user: String(json.user) } : {}),
      });
      return api === 'slack'
        ? send(200, { ok: true, channel: target, ts: messageTs })
        : send(200, { ok: true, result: { message_id: ts, chat: { id: target }, text: json.text } });
    })();
  });
  await new Promise<void>((r) => server.listen(opts.port ?? 0, opts.host ?? '127.0.0.1', r));
  const { port } = server.address() as { port: number };
  const url = `http://${opts.host ?? '127.0.0.1'}:${port}`;
  return Object.assign(state, {
    url,
    slackUrl: `${url}/api`,
    telegramUrl: url,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  });
}
