// `fs` with a `globSync` for Node.js 20 (see node20.mjs).
import fs from 'node:fs';
export * from 'node:fs';
export default fs;
export function globSync() {
  throw new Error('fs.globSync needs Node.js 22 or later');
}
