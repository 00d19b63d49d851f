// The CLI's io for tests: what it prints (out and err, in order) kept in `lines`.
export function capturedIo(json = false) {
  const lines: string[] = [];
  const push = (l: string) => void lines.push(l);
  return { lines, io: { out: push, err: push, json, tty: false } };
}
