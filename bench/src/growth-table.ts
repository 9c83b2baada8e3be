/**
 * What the growth tools (held-log, backlog-flood, lockout-flood) print: the time of one unit of
 * work at each size, after one warm-up at the smallest so that it is not timed while V8 compiles,
 * as a Markdown table whose last column is each size's time over the smallest's. A cost that does
 * not grow with the size reads about ×1 all the way down.
 */
export async function printGrowth(
  heading: string,
  columns: { size: string; time: string },
  sizes: readonly number[],
  timeAt: (size: number) => Promise<number>,
): Promise<void> {
  await timeAt(sizes[0] as number)
  console.log(`Node ${process.version}; ${heading}`)
  console.log(`\n| ${columns.size} | ${columns.time} | × the smallest |`)
  console.log('| ---: | ---: | ---: |')
  let smallest = 0
  for (const size of sizes) {
    const time = await timeAt(size)
    if (smallest === 0) smallest = time
    console.log(`| ${size.toLocaleString('en-US')} | ${time.toFixed(2)} | ×${(time / smallest).toFixed(2)} |`)
  }
}
