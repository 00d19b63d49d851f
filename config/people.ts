// People: one name per person across the CLI (--by or $USER), the management page and Slack
// (configured as name=SlackUserId), so a requester is recognised whichever way they decide.
// Requester and approver are recorded by name; a Slack user without a name is nobody.

export interface Person {
  readonly name: string;
  /** Their Slack user id, when they use Slack. */
  readonly slack?: string;
}

export interface Directory {
  /** Names of those who may approve. */
  readonly approvers: readonly string[];
  /** Everyone with a name: the approvers and TIDEMARK_PEOPLE. */
  readonly people: readonly Person[];
}

const NAME = /^[A-Za-z][A-Za-z0-9._-]*$/;
const SLACK_ID = /^[UW][A-Z0-9]{2,}$/;
/** What a bare Slack user id looks like, so it is not mistaken for a name. */
const LOOKS_LIKE_SLACK_ID = /^[UW][A-Z0-9]{6,}$/;

/**
 * Parses `name` or `name=SlackUserId` entries, comma-separated. Returns the people, or the
 * first problem (naming the entry and the fix).
 */
export function parsePeople(text: string | undefined, pairsOnly: boolean): Person[] | string {
  const people: Person[] = [];
  for (const entry of (text ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)) {
    const [name = '', slack, ...rest] = entry.split('=').map((s) => s.trim());
    if (rest.length > 0 || (slack !== undefined && !SLACK_ID.test(slack)))
      return `"${entry}" must be name=SlackUserId, e.g. alice=U0123ABCD`;
    if (slack === undefined && pairsOnly) return `"${entry}" must be name=SlackUserId, e.g. alice=U0123ABCD`;
    if (slack === undefined && LOOKS_LIKE_SLACK_ID.test(name))
      return `"${entry}" is a Slack user id: write name=${name} so the same person is known in the CLI, the page and Slack`;
    if (!NAME.test(name))
      return `"${name}" is not a name: use letters, digits, ".", "_" or "-", starting with a letter`;
    people.push(slack === undefined ? { name } : { name, slack });
  }
  return people;
}

/**
 * The directory of a configuration; throws when one name has two Slack ids, one id two names, or
 * two names differ only in case.
 */
export function directoryOf(config: {
  readonly TIDEMARK_APPROVERS: readonly Person[];
  readonly TIDEMARK_PEOPLE: readonly Person[];
}): Directory {
  const byName = new Map<string, Person>();
  for (const p of [...config.TIDEMARK_APPROVERS, ...config.TIDEMARK_PEOPLE]) {
    const known = byName.get(p.name);
    if (known?.slack && p.slack && known.slack !== p.slack)
      throw new Error(`${p.name} is given two Slack ids (${known.slack}, ${p.slack}): keep one`);
    byName.set(p.name, { ...known, ...p, ...(known?.slack && !p.slack ? { slack: known.slack } : {}) });
  }
  // Names are compared exactly everywhere, so two that a person would read as one are refused.
  const byFolded = new Map<string, string>();
  for (const name of byName.keys()) {
    const other = byFolded.get(name.toLowerCase());
    if (other)
      throw new Error(
        `"${other}" and "${name}" differ only in case: one person has one name, write it one way`,
      );
    byFolded.set(name.toLowerCase(), name);
  }
  const bySlack = new Map<string, string>();
  for (const p of byName.values()) {
    if (!p.slack) continue;
    const other = bySlack.get(p.slack);
    if (other)
      throw new Error(
        `Slack user ${p.slack} is given two names (${other}, ${p.name}): one person has one name`,
      );
    bySlack.set(p.slack, p.name);
  }
  return {
    approvers: [...new Set(config.TIDEMARK_APPROVERS.map((p) => p.name))],
    people: [...byName.values()],
  };
}

/** The name of a Slack user, or undefined when they have none. */
export function nameOfSlackUser(directory: Directory, slackUser: string): string | undefined {
  return directory.people.find((p) => p.slack === slackUser)?.name;
}

/**
 * Why `name` cannot ask for a rerun, or null when it can: a requester is someone with a name,
 * and when people are configured, one of them (so a later approval in Slack is recognised).
 */
export function requesterProblem(directory: Directory, name: string): string | null {
  if (!name.trim()) return 'the requester must be named (--by NAME, or the name field on the page)';
  if (directory.people.length > 0 && !directory.people.some((p) => p.name === name))
    return `"${name}" is not a known person (${directory.people.map((p) => p.name).join(', ')}): ask under your name, or add ${name} to TIDEMARK_PEOPLE (name=SlackUserId)`;
  return null;
}
