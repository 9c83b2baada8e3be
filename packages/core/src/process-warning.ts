import type { WarningHandler } from './rules.js'

/** Every `onWarning` option's default: a Node process warning carrying the code. */
export const processWarning: WarningHandler = (message, code) => process.emitWarning(message, { code })
