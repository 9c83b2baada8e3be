// Module resolution hooks for built-tollgate.mjs: @tollgate/* specifiers resolve to the bundles.
let urls = {}

export function initialize(data) {
  urls = data
}

export async function resolve(specifier, context, next) {
  const url = urls[specifier]
  if (url) return { url, format: 'module', shortCircuit: true }
  return next(specifier, context)
}
