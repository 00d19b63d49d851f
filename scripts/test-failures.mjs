// A reporter for node's test runner that prints, once the run is over, each failed test with its
// file and the first lines of its error. The TAP or spec report above it holds the same failures
// among hundreds of passing lines and log output; a CI log cut to its last part keeps this list.
export default async function* failures(source) {
  const failed = [];
  for await (const event of source) {
    if (event.type !== 'test:fail') continue;
    const { name, file, details } = event.data;
    // A suite fails when one of its tests does; its own entry would repeat the test's.
    if (details?.type === 'suite') continue;
    const error = details?.error?.cause ?? details?.error;
    const message = String(error?.message ?? error ?? '')
      .split('\n')
      .slice(0, 6)
      .join('\n    ');
    failed.push(`not ok: ${name}\n  file: ${file ?? '?'}\n    ${message}`);
  }
  if (failed.length === 0) return;
  yield `\n# ${failed.length} failed:\n${failed.join('\n')}\n`;
}
