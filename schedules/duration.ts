// Parses the short durations used in job definitions ("90s", "5m", "1h", "2d") into milliseconds.

const UNIT_MS = Object.freeze({ ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 });
const PATTERN = /^(\d+)(ms|s|m|h|d)$/;

/** Milliseconds for a duration like "5m"; undefined when the text is not one. */
export function parseDuration(text: string): number | undefined {
  const match = PATTERN.exec(text.trim());
  if (!match) return undefined;
  const [, amount, unit] = match as unknown as [string, string, keyof typeof UNIT_MS];
  return Number(amount) * UNIT_MS[unit];
}

/** The shortest exact short form of a duration: 3_600_000 -> "1h". */
export function formatDuration(ms: number): string {
  for (const unit of ['d', 'h', 'm', 's'] as const) {
    if (ms !== 0 && ms % UNIT_MS[unit] === 0) return `${ms / UNIT_MS[unit]}${unit}`;
  }
  return `${ms}ms`;
}
