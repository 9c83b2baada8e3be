import type { CommandModule } from '../command.js'
import { admin } from './admin.js'
import { doctor } from './doctor.js'
import { inspect } from './inspect.js'
import { reset } from './reset.js'
import { rules } from './rules/index.js'
import { top } from './top.js'
import { watch } from './watch.js'

/** Every command of the program, in the order `--help` lists them: adding one is adding its module here. */
export const COMMANDS: readonly CommandModule[] = [inspect, reset, top, watch, admin, rules, doctor]
