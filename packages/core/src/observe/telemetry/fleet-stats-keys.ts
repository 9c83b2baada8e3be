/**
 * Where the fleet's shared stats live: one hash tag, so that a Cluster keeps them on one slot and
 * a reader gets them from one node.
 * - `second(s)`: a hash per second (epoch seconds), fields `rule⇥outcome` and
 *   `rule⇥window⇥denied` (window as `60s`), and `store⇥errors`, counts summed over the processes;
 * - `top(rule, slot)`: a sorted set per rule per `topIntervalMs` slot, refused identifiers scored
 *   by their refusals (as each process's sketch counted them);
 * - `topRules(slot)`: the rules with such a set in that slot;
 * - `process(instance)`: a hash per live process, field `hybrid` its HybridStore's `stats()`, and
 *   `processes`: the live processes, scored by when they last wrote.
 */
export function fleetStatsKeys(prefix: string) {
  const base = `${prefix}{stats}:`
  return {
    second: (second: number) => `${base}s:${second}`,
    top: (rule: string, slot: number) => `${base}top:${slot}:${rule}`,
    topRules: (slot: number) => `${base}toprules:${slot}`,
    process: (instance: string) => `${base}p:${instance}`,
    processes: `${base}processes`,
  }
}
