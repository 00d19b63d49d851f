// What to do about an incident: its runbook entry, where the page shows it, and the commands that
// inspect or fix it with its values filled in (quoted for a POSIX shell). Pure: the alerts print
// it, and the runbook can print the same table.

/** The incident kinds (activities/alerts.ts INCIDENT_KIND): each is an anchor of docs/runbook.md. */
export type NextStepKind =
  | 'window-failed'
  | 'tick-failed'
  | 'schedule-sync-failed'
  | 'effect-unknown'
  | 'effect-failed'
  | 'lag'
  | 'finding'
  | 'settle-failed'
  | 'alert-undelivered'
  | 'restore-drill-failed';

/** One step: a command to run as written, and what it does. */
export interface NextStep {
  readonly command: string;
  readonly why: string;
}

/** What is known of a lag's cause (the watch's diagnosis); absent: every conditional step is listed. */
export interface LagSituation {
  readonly noPoller?: boolean;
  readonly paused?: boolean;
  /** The job's schedule cannot be read: deleted, or never synced. */
  readonly scheduleMissing?: boolean;
}

/** The runbook file's place inside the package. */
export const RUNBOOK_FILE = 'docs/runbook.md';

/** Control characters: a line break in a key would print as a line of the alert of its own. */
const CONTROL = /[\u0000-\u001f\u007f]/;

/** A word with control characters as one argument in bash's $'...' quoting, each one escaped. */
const ansiQuote = (word: string): string =>
  `$'${word
    .replace(/\\/g, '\\\\')
    .replace(/'/g, "\\'")
    .replace(/[\u0000-\u001f\u007f]/g, (c) =>
      c === '\n'
        ? '\\n'
        : c === '\t'
          ? '\\t'
          : c === '\r'
            ? '\\r'
            : `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`,
    )}'`;

/** A word as one shell argument: bare when it holds nothing a shell reads, else single-quoted. */
export function shellQuote(word: string): string {
  if (CONTROL.test(word)) return ansiQuote(word);
  return /^[A-Za-z0-9_./:=@%+-]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`;
}

/** A key (window, effect) as one shell argument, always quoted so it reads as a key. */
const key = (k: string): string => (CONTROL.test(k) ? ansiQuote(k) : `'${k.replace(/'/g, `'\\''`)}'`);

const base = (webUrl: string): string => webUrl.replace(/\/+$/, '');

/** The runbook entry of a kind: on the page when its address is known, else in the package. */
export function runbookRef(kind: NextStepKind, webUrl?: string): string {
  return webUrl ? `${base(webUrl)}/runbook#${kind}` : `${RUNBOOK_FILE}#${kind} (in the tidemark package)`;
}

/** The window an incident's subject names (a window key, or `<window key>:<name>`), as web/public/views/incidents.js reads it. */
export function windowOfSubject(job: string, subject: string): string | null {
  const m = /^([^/]+\/\d{4}-\d\d-\d\dT[\d:]+Z(?:#\d+)?)(?::[^/]*)?$/.exec(subject);
  return m && m[1]!.startsWith(`${job}/`) ? m[1]! : null;
}

/** The page's hash route (web/public/app.js) that shows an incident best. */
export function pageRoute(kind: NextStepKind, job: string, subject: string): string {
  const j = encodeURIComponent(job);
  const win = windowOfSubject(job, subject);
  switch (kind) {
    case 'effect-unknown':
      return '#/effects'; // where it is decided, Resend or Skip
    case 'restore-drill-failed':
      return `#/jobs/${j}/backups`;
    case 'tick-failed':
    case 'lag':
      return `#/jobs/${j}`;
    case 'schedule-sync-failed':
    case 'alert-undelivered':
      return '#/incidents';
    default:
      return win ? `#/jobs/${j}/windows/${encodeURIComponent(win)}` : '#/incidents';
  }
}

/** The page's address of an incident, or null when the page's address is not configured. */
export function pageLink(kind: NextStepKind, job: string, subject: string, webUrl?: string): string | null {
  return webUrl ? `${base(webUrl)}/${pageRoute(kind, job, subject)}` : null;
}

/** The commands that inspect or fix an incident of `kind` about `subject` of `job`. */
export function nextSteps(kind: NextStepKind, subject: string, job: string, lag?: LagSituation): NextStep[] {
  const j = shellQuote(job);
  const win = windowOfSubject(job, subject);
  const cli = (args: string, why: string): NextStep => ({ command: `npx tidemark ${args}`, why });
  switch (kind) {
    case 'window-failed':
      return [
        cli(`status ${j}`, "the job's recent windows, their attempts and errors"),
        cli(`runs ${j} --kind window`, "the window's attempts"),
        cli(`trigger ${j}`, 'after a fix, try it now (every tick tries a failed window again anyway)'),
      ];
    case 'tick-failed':
      return [
        cli(`runs ${j} --kind tick`, 'the recent ticks'),
        cli(`trigger ${j}`, 'after a fix, fire the tick now (nothing runs twice)'),
      ];
    case 'schedule-sync-failed':
      return [
        cli('schedules sync --dry-run', 'what the sync would change, changing nothing'),
        cli('schedules sync', 'after a fix, sync the schedules again'),
      ];
    case 'effect-unknown':
      return [
        cli(`effects decide ${key(subject)} --resend`, 'it did not reach the provider: send it again'),
        cli(
          `effects decide ${key(subject)} --skip`,
          'it did reach the provider: mark it done, never send it',
        ),
      ];
    case 'effect-failed':
      return [
        ...(win ? [cli(`effects list --window ${key(win)}`, "the window's effects and their errors")] : []),
        cli(`effects retry ${key(subject)}`, 'after a fix, perform it again'),
      ];
    case 'lag': {
      const steps = [
        cli('jobs', 'every job: watermark, lag, paused, last run'),
        cli(`status ${j}`, "the job's recent windows: a failing one holds the watermark"),
      ];
      if (!lag || lag.noPoller)
        steps.push(
          cli(
            'worker',
            `${lag ? '' : 'if no worker polls: '}start a worker (catch-up starts once one polls)`,
          ),
        );
      if (!lag || lag.paused)
        steps.push(cli(`resume ${j}`, `${lag ? '' : 'if paused: '}resume the schedule`));
      if (!lag || lag.scheduleMissing)
        steps.push(
          cli('schedules sync', `${lag ? '' : 'if its schedule is gone: '}make the schedules again`),
        );
      return steps;
    }
    case 'finding':
      return [
        cli(`status ${j}`, "the job's recent windows and counts"),
        ...(win
          ? [
              cli(`effects list --window ${key(win)}`, "the window's effects"),
              cli(
                `rerun ${j} --window ${shellQuote(win.slice(job.length + 1).replace(/#\d+$/, ''))} --preview`,
                'what running the window again would change (then ask for the rerun without --preview)',
              ),
            ]
          : []),
      ];
    case 'settle-failed':
      return [
        ...(win
          ? [cli(`effects list --window ${key(win)}`, "the window's effects the settle step reads")]
          : []),
        cli(`runs ${j} --kind window`, "the window's attempts"),
      ];
    case 'alert-undelivered':
      return [
        cli(`incidents --job ${j}`, "the job's open incidents: what its alerts said"),
        cli(
          `effects list --job ${j} --status pending,begun,unknown,failed`,
          'the alerts not delivered yet, with their last errors',
        ),
      ];
    case 'restore-drill-failed':
      return [
        cli(`backups list ${j}`, 'the backups and their last verification'),
        cli(`backups drill ${j}`, 'after a fix, run the drill again'),
      ];
  }
}
