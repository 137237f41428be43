// Lets the conformance suite's CLI run on Node.js 20: it imports `globSync` from `fs`,
// which Node.js has only since 22. The suite's server scenarios never call it; for the
// suite's modules, `fs` resolves to fs-node20.mjs (all of `fs`, and a `globSync` that
// throws). Use: node --import ./conformance/node20.mjs <suite> ...
import { register } from 'node:module';
import * as fs from 'node:fs';

if (typeof fs.globSync !== 'function') {
  register('./node20-hooks.mjs', import.meta.url);
}
