// Names of tidemark's own span attributes, shared by the workflows' and the activities' spans.
export const SPAN_ATTR = Object.freeze({
  job: 'tidemark.job',
  windowKey: 'tidemark.window.key',
  generation: 'tidemark.generation',
  outcome: 'tidemark.outcome',
  effectKey: 'tidemark.effect.key',
  channel: 'tidemark.effect.channel',
} as const);

/** The job, window key and generation of a tidemark workflow input, where it names them. */
export function windowAttributes(input: unknown): Record<string, string | number> {
  if (typeof input !== 'object' || input === null) return {};
  const { job, key, generation } = input as { job?: unknown; key?: unknown; generation?: unknown };
  return {
    ...(typeof job === 'string' ? { [SPAN_ATTR.job]: job } : {}),
    ...(typeof key === 'string' && key ? { [SPAN_ATTR.windowKey]: key } : {}),
    ...(typeof generation === 'number' ? { [SPAN_ATTR.generation]: generation } : {}),
  };
}
