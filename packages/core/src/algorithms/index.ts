import type { AlgorithmName } from '../rules/rules.js'
import type { Algorithm } from './algorithm.js'
import { bucket } from './bucket.js'
import { fixedWindow } from './fixed-window.js'
import { slidingLog } from './sliding-log.js'
import { slidingWindow } from './sliding-window.js'

export const algorithms: Readonly<Record<AlgorithmName, Algorithm<unknown>>> = {
  'sliding-log': slidingLog as Algorithm<unknown>,
  'fixed-window': fixedWindow as Algorithm<unknown>,
  'sliding-window': slidingWindow as Algorithm<unknown>,
  'token-bucket': bucket as Algorithm<unknown>,
  gcra: bucket as Algorithm<unknown>,
}
