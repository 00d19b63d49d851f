// Headless Chromium (Debian's, through playwright-core) for the page's tests: a logged-in page that
// records anything the CSP refused or the page threw, axe-core's check (serious and critical
// violations fail, listed), and a screenshot per view under test-artifacts/.
import assert from 'node:assert/strict';
import { mkdir, readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { chromium, type Browser, type Locator, type Page } from 'playwright-core';

const require = createRequire(import.meta.url);

export function launchBrowser(): Promise<Browser> {
  return chromium.launch({
    executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}

export interface PageProblems {
  /** Console lines about the Content Security Policy refusing something. */
  refused: string[];
  /** Uncaught errors in the page's scripts. */
  errors: string[];
}

/** A new page (its own context: cookies, viewport, colour scheme) logged in with `token`. */
export async function loggedInPage(
  browser: Browser,
  url: string,
  token: string,
  o: { width?: number; height?: number; colorScheme?: 'light' | 'dark'; hash?: string } = {},
): Promise<{ page: Page; problems: PageProblems }> {
  const context = await browser.newContext({
    viewport: { width: o.width ?? 1280, height: o.height ?? 900 },
    colorScheme: o.colorScheme ?? 'light',
  });
  const page = await context.newPage();
  const problems: PageProblems = { refused: [], errors: [] };
  page.on('console', (m) => {
    if (/Content Security Policy/i.test(m.text())) problems.refused.push(m.text());
  });
  page.on('pageerror', (e) => problems.errors.push(e.message));
  await page.goto(url);
  await page.fill('input[name=token]', token);
  await page.click('button:has-text("Log in")');
  await page.locator('#nav').waitFor();
  if (o.hash) await page.goto(`${url}/${o.hash}`);
  return { page, problems };
}

interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  nodes: { target: string[]; failureSummary?: string }[];
}

/** Runs axe-core on the page as it is; fails listing every serious or critical violation. */
export async function checkAccessibility(page: Page, what: string): Promise<void> {
  // Evaluated over the DevTools protocol: addScriptTag would add an inline script, which the page's
  // CSP (rightly) refuses.
  await page.evaluate(await readFile(require.resolve('axe-core/axe.min.js'), 'utf8'));
  // A string, so it runs in the page (this file is compiled without the DOM's types).
  const violations = (await page.evaluate('axe.run(document).then((r) => r.violations)')) as AxeViolation[];
  const bad = violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
  assert.deepEqual(
    bad.map(
      (v) =>
        `${v.impact} ${v.id}: ${v.help} at ${v.nodes
          .slice(0, 5)
          .map((n) => n.target.join(' '))
          .join(', ')}`,
    ),
    [],
    `axe-core on ${what}`,
  );
}

/** Saves test-artifacts/<name>.png (the whole page). */
export async function screenshot(page: Page, name: string): Promise<string> {
  await mkdir('test-artifacts', { recursive: true });
  const path = `test-artifacts/${name}.png`;
  await page.screenshot({ path, fullPage: true });
  return path;
}

/** The overview's card of `job`: its line in the job list found, its Details opened. */
export async function jobCard(page: Page, job: string): Promise<Locator> {
  const line = page.locator(`table.job-list tr[data-job="${job}"]`);
  await line.waitFor();
  const details = line.locator('button.jl-open');
  if ((await details.getAttribute('aria-expanded')) !== 'true') await details.click();
  const card = page.locator(`article.job[data-job="${job}"]`);
  await card.waitFor();
  return card;
}
