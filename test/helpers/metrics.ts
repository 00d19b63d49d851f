// Scrapes a /metrics endpoint and reads samples out of the Prometheus text format.
export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

const LINE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\d+)?$/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

export function parseMetrics(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (!line.trim() || line.startsWith('#')) continue;
    const m = LINE.exec(line.trim());
    if (!m) throw new Error(`not a Prometheus sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(LABEL)) labels[l[1]!] = l[2]!.replace(/\\(.)/g, '$1');
    samples.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return samples;
}

export async function scrape(baseUrl: string, token?: string): Promise<Sample[]> {
  const res = await fetch(
    `${baseUrl}/metrics`,
    token ? { headers: { authorization: `Bearer ${token}` } } : {},
  );
  if (res.status !== 200) throw new Error(`/metrics answered ${res.status}: ${await res.text()}`);
  return parseMetrics(await res.text());
}

/** The value of the one sample of `name` whose labels are exactly `labels`; undefined if none. */
export function valueOf(samples: Sample[], name: string, labels: Record<string, string>): number | undefined {
  const keys = Object.keys(labels);
  const found = samples.filter(
    (s) =>
      s.name === name &&
      Object.keys(s.labels).length === keys.length &&
      keys.every((k) => s.labels[k] === labels[k]),
  );
  if (found.length > 1) throw new Error(`${found.length} samples of ${name} ${JSON.stringify(labels)}`);
  return found[0]?.value;
}
