#!/usr/bin/env node
// The installed `tidemark` command: runs the TypeScript CLI through tsx.
import { register } from 'tsx/esm/api';
register();
const { run } = await import('../cli/main.ts');
const io = {
  out: (l) => console.log(l),
  err: (l) => console.error(l),
  json: false,
  tty: !!process.stdout.isTTY,
};
process.exit(await run(process.argv.slice(2), io));
