/** Milliseconds since the epoch, as whole numbers. */
export type Clock = () => number

export const systemClock: Clock = () => Date.now()
