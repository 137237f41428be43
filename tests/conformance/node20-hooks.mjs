// Module hooks for node20.mjs: `fs` imported by the conformance suite resolves to a module
// that adds `globSync`.
const shim = new URL('./fs-node20.mjs', import.meta.url).href;

export async function resolve(specifier, context, next) {
  if (
    (specifier === 'fs' || specifier === 'node:fs') &&
    context.parentURL?.includes('/@modelcontextprotocol/conformance/')
  ) {
    return { url: shim, shortCircuit: true };
  }
  return next(specifier, context);
}
