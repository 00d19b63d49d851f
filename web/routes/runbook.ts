// The runbook (docs/runbook.md), which every alert names by its incident kind's anchor, served by
// the page's server at /runbook, with the other pages of docs/ it links at /docs/<page>.md. They
// need no sign-in: they hold no job data, only what tidemark's documentation says to do, so a
// person opening an alert's link at night reads it before logging in. They are outside /api, so
// web/access.ts's role table does not apply to them. Each page is rendered by marked (the files are
// tidemark's own): its `<a id>` anchors pass through and its headings get GitHub's anchors, so
// `/runbook#window-failed` and `/docs/restore.md#when-verify-fails` land on their entries.
// /runbook.md is the runbook's file as it is.
import { readFile } from 'node:fs/promises';
import { posix } from 'node:path';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { Marked, type Tokens } from 'marked';

/**
 * Where docs/ lies: from web/routes/ in the source tree, and from dist/web/routes/ in the installed
 * package (package.json "files" ships docs/ at the package's root).
 */
const DOCS_PLACES: readonly URL[] = [
  new URL('../../docs/', import.meta.url),
  new URL('../../../docs/', import.meta.url),
];

/** A page of docs/ by its path there (`runbook.md`, `guides/effects.md`); nothing else is served. */
const PAGE = /^(?:[a-z0-9][a-z0-9-]*\/)*[a-z0-9][a-z0-9-]*\.md$/;

/** A page's Markdown, or null when this installation has no such page. Read per request: they are small. */
export async function readDoc(page: string): Promise<string | null> {
  if (!PAGE.test(page)) return null;
  for (const place of DOCS_PLACES) {
    try {
      return await readFile(new URL(page, place), 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
  }
  return null;
}

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces to dashes. */
const slug = (text: string): string =>
  text
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');

/** Marked for one page: relative links to other pages of docs/ become their address on the page. */
function renderer(page: string): Marked {
  const seen = new Map<string, number>();
  return new Marked({
    gfm: true,
    walkTokens(token) {
      if (token.type !== 'link') return;
      const link = token as Tokens.Link;
      if (/^([a-z][a-z0-9+.-]*:|#|\/)/i.test(link.href)) return;
      const [path, anchor] = link.href.split('#') as [string, string | undefined];
      const target = posix.normalize(posix.join(posix.dirname(page), path));
      if (PAGE.test(target)) link.href = `/docs/${target}${anchor ? `#${anchor}` : ''}`;
    },
    renderer: {
      heading({ tokens, depth, text }) {
        const base = slug(text.replace(/`/g, ''));
        const n = seen.get(base) ?? 0;
        seen.set(base, n + 1);
        const id = n === 0 ? base : `${base}-${n}`;
        return `<h${depth} id="${id}">${this.parser.parseInline(tokens)}</h${depth}>\n`;
      },
    },
  });
}

/** A page of docs/ as a page of its own, styled by the page's stylesheet; no script. */
export function docPage(page: string, text: string): string {
  const body = renderer(page).parse(text, { async: false });
  const title = /^# (.+)$/m.exec(text)?.[1] ?? page;
  return `<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8" />
    <meta name="viewport" content="width=device-width, initial-scale=1" />
    <meta name="color-scheme" content="light dark" />
    <title>tidemark: ${title.replace(/[<>&"]/g, '')}</title>
    <link rel="stylesheet" href="/app.css" />
  </head>
  <body class="runbook">
    <main>
${body}
    </main>
  </body>
</html>
`;
}

export async function runbookRoutes(app: FastifyInstance): Promise<void> {
  const missing = (page: string) => ({ error: `docs/${page} is not in this installation` });
  const html = async (page: string, reply: FastifyReply) => {
    const text = await readDoc(page);
    if (text === null) return reply.code(404).send(missing(page));
    return reply.type('text/html; charset=utf-8').send(docPage(page, text));
  };
  app.get('/runbook', async (_req, reply) => await html('runbook.md', reply));
  app.get('/docs/*', async (req, reply) => await html((req.params as { '*': string })['*'], reply));
  app.get('/runbook.md', async (_req, reply) => {
    const text = await readDoc('runbook.md');
    if (text === null) return reply.code(404).send(missing('runbook.md'));
    return reply.type('text/markdown; charset=utf-8').header('x-content-type-options', 'nosniff').send(text);
  });
}
