#!/usr/bin/env node
// The `tidemark` command. Installed from the package it runs the compiled CLI (dist/, node only);
// in the source tree (cli/main.ts next to it) it runs the TypeScript through tsx.
import { existsSync } from 'node:fs';
import { requireSupportedNode } from './node-check.js';

requireSupportedNode();

const source = new URL('../cli/main.ts', import.meta.url);
let cli;
if (existsSync(source)) {
  const { register } = await import('tsx/esm/api');
  register();
  cli = await import(source.href);
} else {
  cli = await import('../dist/cli/main.js');
}
const io = {
  out: (l) => console.log(l),
  err: (l) => console.error(l),
  json: false,
  tty: !!process.stdout.isTTY,
};
process.exit(await cli.run(process.argv.slice(2), io));
