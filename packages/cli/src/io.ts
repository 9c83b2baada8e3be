/** Where the program reads and writes: the process's streams and environment, or a test's. */
export interface Io {
  readonly stdout: NodeJS.WritableStream & { isTTY?: boolean }
  readonly stderr: NodeJS.WritableStream & { isTTY?: boolean }
  readonly stdin: NodeJS.ReadableStream & { isTTY?: boolean }
  readonly env: Readonly<Record<string, string | undefined>>
}

export const processIo: Io = {
  stdout: process.stdout,
  stderr: process.stderr,
  stdin: process.stdin,
  env: process.env,
}
