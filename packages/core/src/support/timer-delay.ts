/** The longest delay setTimeout and setInterval hold (a signed 32-bit count); past it Node silently uses 1 ms. */
export const MAX_TIMER_MS = 2 ** 31 - 1
