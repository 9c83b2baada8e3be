/** Where a component's warnings go: a message and its code (`TG_…`, docs/errors.md). */
export type WarningHandler = (message: string, code: string) => void

/** Every `onWarning` option's default: a Node process warning carrying the code. */
export const processWarning: WarningHandler = (message, code) => process.emitWarning(message, { code })
