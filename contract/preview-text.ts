// A rerun preview in words, the same for the CLI, the Slack message and the page's text: per
// table its counts and first rows (a changed row shows only the columns that change), then the
// external effects. Pure (the rerun workflow builds its Slack message with it).
import { slackEscape } from './slack-text.js';
import type { PreviewRow, PreviewTable, RerunPreview } from './workflows.js';

const show = (v: string | null | undefined) => (v === null || v === undefined ? 'null' : v);

function keyText(r: PreviewRow): string {
  return Object.entries(r.key)
    .map(([k, v]) => `${k}=${show(v)}`)
    .join(' ');
}

/** One row's change: `~ day=2026-04-10: order_count 40 -> 41, total 812.00 -> 1312.00`. */
export function rowText(r: PreviewRow): string {
  const values = (side: Readonly<Record<string, string | null>>) =>
    Object.entries(side)
      .filter(([k]) => !(k in r.key))
      .map(([k, v]) => `${k} ${show(v)}`)
      .join(', ');
  const more = r.more ? `, and ${r.more} more columns` : '';
  if (r.change === 'added') return `+ ${keyText(r)}: ${values(r.after!)}${more}`;
  if (r.change === 'removed') return `- ${keyText(r)}: ${values(r.before!)}${more}`;
  const changed = Object.keys({ ...r.before, ...r.after })
    .filter((k) => r.before![k] !== r.after![k])
    .map((k) => `${k} ${show(r.before![k])} -> ${show(r.after![k])}`);
  return `~ ${keyText(r)}: ${changed.join(', ')}${more}`;
}

export function tableText(t: PreviewTable): string {
  if (t.tooLarge !== undefined)
    return `${t.table}: not compared (${t.tooLarge} rows of this job; too many to copy aside)`;
  const parts = [
    t.changed ? `${t.changed} changed` : '',
    t.added ? `${t.added} added` : '',
    t.removed ? `${t.removed} removed` : '',
  ].filter(Boolean);
  return `${t.table}: ${parts.length ? parts.join(', ') : 'no change'}`;
}

/** Does the preview say the rerun changes nothing at all (no row, no effect)? */
export function changesNothing(p: RerunPreview): boolean {
  return (
    p.outcome === 'ok' &&
    (p.tables ?? []).every((t) => t.tooLarge === undefined && t.added + t.removed + t.changed === 0) &&
    p.tables !== null &&
    p.effects.repeat.length + p.effects.added.length + p.effects.dropped.length === 0
  );
}

/**
 * The preview as lines, at most `rows` rows per table. Every line is the preview's own text: the
 * caller escapes it for where it goes (Slack).
 */
export function previewLines(p: RerunPreview, opts: { rows?: number } = {}): string[] {
  const rows = opts.rows ?? 20;
  const head = `preview of generation ${p.generation} (replaces generation ${p.previous}), computed ${p.computedAt}`;
  if (p.outcome === 'refused') return [`${head}: ${p.note ?? 'not previewed'}`];
  if (p.outcome === 'failed') return [`${head}: the handler failed, so would the rerun: ${p.note ?? ''}`];
  if (changesNothing(p)) return [`${head}: no change`];
  const lines = [`${head}:`];
  if (p.tables === null) lines.push('tables not declared by the job: effects only');
  for (const t of p.tables ?? []) {
    lines.push(tableText(t));
    for (const r of t.rows.slice(0, rows)) lines.push(`  ${rowText(r)}`);
    const more = t.added + t.removed + t.changed - Math.min(rows, t.rows.length);
    if (more > 0) lines.push(`  ... and ${more} more`);
  }
  const e = p.effects;
  lines.push(
    e.repeat.length || e.added.length
      ? `would send again: ${e.repeat.join(', ') || '(none)'}${e.added.length ? `; new: ${e.added.join(', ')}` : ''}`
      : 'would send no external effect',
  );
  if (e.dropped.length) lines.push(`sent before, not again: ${e.dropped.join(', ')}`);
  for (const f of p.findings) lines.push(`finding: ${f}`);
  return lines;
}

/** Slack shows a section's first 3,000 characters: the preview gets part of them, the rest says where to look. */
const SLACK_PREVIEW_CHARS = 1_800;
const SLACK_LINE_CHARS = 300;

/** The preview for the Slack message: escaped, a few rows per table, bounded. */
export function slackPreview(preview: RerunPreview | null, note: string | undefined): string {
  if (!preview) return `preview: could not be computed${note ? `: ${slackEscape(note)}` : ''}`;
  const lines: string[] = [];
  let used = 0;
  for (const line of previewLines(preview, { rows: 5 })) {
    const text = slackEscape(line.length > SLACK_LINE_CHARS ? `${line.slice(0, SLACK_LINE_CHARS)}...` : line);
    if (used + text.length > SLACK_PREVIEW_CHARS) {
      lines.push('... (the whole preview: the approvals on the page)');
      break;
    }
    lines.push(text);
    used += text.length + 1;
  }
  return '```' + lines.join('\n') + '```';
}
