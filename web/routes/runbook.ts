// The runbook (docs/runbook.md), which every alert names by its incident kind's anchor, served by
// the page's server at /runbook (and /runbook.md). It needs no sign-in: it holds no job data, only
// what tidemark's documentation says to do, so a person opening an alert's link at night reads it
// before logging in. It is outside /api, so web/access.ts's role table does not apply to it.
// /runbook renders it as a page (marked; the file is tidemark's own, and its `<a id>` anchors pass
// through, so `/runbook#window-failed` lands on its entry); /runbook.md is the file as it is.
import { readFile } from 'node:fs/promises';
import type { FastifyInstance } from 'fastify';
import { Marked } from 'marked';

/**
 * Where docs/runbook.md lies: from web/routes/ in the source tree, and from dist/web/routes/ in the
 * installed package (package.json "files" ships docs/ at the package's root).
 */
export const RUNBOOK_PLACES: readonly URL[] = [
  new URL('../../docs/runbook.md', import.meta.url),
  new URL('../../../docs/runbook.md', import.meta.url),
];

/** The runbook's Markdown, or null when this installation has none. Read per request: it is small. */
export async function readRunbook(): Promise<string | null> {
  for (const place of RUNBOOK_PLACES) {
    try {
      return await readFile(place, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
  }
  return null;
}

const markdown = new Marked({ gfm: true });

/** The runbook as a page of its own, styled by the page's stylesheet; no script. */
export function runbookPage(text: string): string {
  const body = markdown.parse(text, { async: false });
  return `<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8" />
    <meta name="viewport" content="width=device-width, initial-scale=1" />
    <meta name="color-scheme" content="light dark" />
    <title>tidemark runbook</title>
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
  const missing = { error: 'the runbook (docs/runbook.md) is not in this installation' };
  app.get('/runbook', async (_req, reply) => {
    const text = await readRunbook();
    if (text === null) return reply.code(404).send(missing);
    return reply.type('text/html; charset=utf-8').send(runbookPage(text));
  });
  app.get('/runbook.md', async (_req, reply) => {
    const text = await readRunbook();
    if (text === null) return reply.code(404).send(missing);
    return reply.type('text/markdown; charset=utf-8').header('x-content-type-options', 'nosniff').send(text);
  });
}
