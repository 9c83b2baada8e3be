/** `live rules under "tg:" at epoch 3, defaults from rules.yaml`, or `rules file rules.yaml`. */
export function describeSource(source: {
  source: 'live' | 'file'
  epoch: number
  prefix: string
  file: string | null
}): string {
  if (source.source === 'file')
    return `rules file ${source.file} (nothing published under ${JSON.stringify(source.prefix)})`
  const defaults = source.file === null ? 'published rules only, no --rules defaults' : `defaults from ${source.file}`
  return `live rules under ${JSON.stringify(source.prefix)} at epoch ${source.epoch} (${defaults})`
}
