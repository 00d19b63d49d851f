// Whether a module is the one node was asked to run (`node x.ts`, `tsx x.ts`, `npm run worker`),
// compared as real file URLs: a path with a space or through a symlink names the same module.
import { realpathSync } from 'node:fs';
import { pathToFileURL } from 'node:url';

export function isEntryPoint(moduleUrl: string): boolean {
  const script = process.argv[1];
  if (!script) return false;
  try {
    return pathToFileURL(realpathSync(script)).href === moduleUrl;
  } catch {
    return false;
  }
}
