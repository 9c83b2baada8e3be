// Anything can be thrown, and the messages built from it must still read well.
export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error)
}
