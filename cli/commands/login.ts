// `tidemark login`, `logout` and `whoami`: the CLI signed in as a person (cli/login.ts), through
// the page's device flow, so that decisions from the CLI are that person's, verified.
import { hostname } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Command } from '../command.js';
import { UsageError } from '../context.js';
import {
  asSignedIn,
  forgetLogin,
  keptLogin,
  loginFile,
  readLogin,
  writeLogin,
  type Login,
} from '../login.js';

interface DeviceStart {
  deviceCode: string;
  userCode: string;
  verificationUri: string;
  verificationUriComplete: string | null;
  interval: number;
  expiresIn: number;
}

async function postJson(
  url: string,
  body: unknown,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const r = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(60_000),
  }).catch((err: Error) => {
    throw new Error(`the page at ${new URL(url).origin} could not be reached: ${err.message}`);
  });
  return { status: r.status, body: (await r.json().catch(() => ({}))) as Record<string, unknown> };
}

export const loginCommand: Command = {
  name: 'login',
  summary: 'sign the CLI in as you, through the identity provider (decisions then go through the page)',
  usage: ['login [--web URL] [--json]'],
  options: { web: { type: 'string' } },
  async run(ctx, { values }) {
    const web = ((values.web as string | undefined) ?? ctx.config.TIDEMARK_WEB_URL ?? '').replace(/\/$/, '');
    if (!web)
      throw new UsageError(
        "login: say where the page is: --web https://tidemark.example.com, or set TIDEMARK_WEB_URL (the page's address)",
      );
    const start = await postJson(`${web}/auth/device`, {});
    if (start.status === 404)
      throw new Error(
        `the page at ${web} runs in single-user mode (no identity provider): there is nobody to sign in as`,
      );
    if (start.status !== 200)
      throw new Error(String(start.body.error ?? `the page answered HTTP ${start.status}`));
    const d = start.body as unknown as DeviceStart;
    ctx.io.err(
      d.verificationUriComplete
        ? `To sign in, open ${d.verificationUriComplete} (code ${d.userCode})`
        : `To sign in, open ${d.verificationUri} and enter the code ${d.userCode}`,
    );
    let interval = Math.max(1, d.interval) * 1000;
    const deadline = Date.now() + d.expiresIn * 1000;
    for (;;) {
      await sleep(interval);
      const poll = await postJson(`${web}/auth/device/token`, {
        deviceCode: d.deviceCode,
        label: `tidemark login on ${hostname()}`,
      });
      if (poll.status === 202) {
        if (poll.body.slowDown) interval += 5_000;
        if (Date.now() > deadline)
          throw new Error('the code expired before it was entered: run npx tidemark login again');
        continue;
      }
      if (poll.status !== 200)
        throw new Error(String(poll.body.error ?? `the page answered HTTP ${poll.status}`));
      const login = { web, ...poll.body } as unknown as Login;
      await writeLogin(login);
      return {
        json: {
          web,
          name: login.name,
          displayName: login.displayName,
          roles: login.roles,
          expiresAt: login.expiresAt,
        },
        lines: [
          `signed in as ${login.displayName} (${login.name}), roles ${login.roles.join(', ')}, until ${login.expiresAt}; kept in ${loginFile()}`,
        ],
      };
    }
  },
};

export const logoutCommand: Command = {
  name: 'logout',
  summary: 'sign the CLI out: its token is revoked at the page and the file removed',
  usage: ['logout [--json]'],
  options: {},
  async run() {
    // Read even a file refused for use (others may read it): its token is the one to revoke.
    const login = await keptLogin();
    if (!login) {
      await forgetLogin();
      return { json: { signedOut: true }, lines: ['not signed in'] };
    }
    const revoked = await asSignedIn(login, `/api/tokens/${encodeURIComponent(login.id)}/revoke`, {}).then(
      () => null,
      (err: Error) => err.message,
    );
    // A token the page no longer takes (revoked or expired) is as good as revoked.
    if (revoked && !/no longer takes your sign-in/.test(revoked))
      throw new Error(
        `token ${login.id} was not revoked (${revoked}); it still works until ${login.expiresAt}: revoke it on the page (API tokens) or run npx tidemark logout again; ${loginFile()} is kept until then`,
      );
    await forgetLogin();
    return {
      json: { signedOut: true, revoked: login.id },
      lines: [`signed out ${login.name}; token ${login.id} revoked`],
    };
  },
};

export const whoamiCommand: Command = {
  name: 'whoami',
  summary: 'who the CLI decides as: the signed-in person, or not signed in',
  usage: ['whoami [--json]'],
  options: {},
  async run() {
    const login = await readLogin();
    if (!login)
      return {
        json: { signedIn: false },
        lines: ['not signed in: decisions take --by and are not verified (npx tidemark login)'],
      };
    const me = await asSignedIn<{ name: string; displayName: string; roles: string[] }>(login, '/api/me');
    return {
      json: { signedIn: true, web: login.web, ...me },
      lines: [`${me.displayName} (${me.name}) at ${login.web}, roles ${me.roles.join(', ')}`],
    };
  },
};
