/**
 * Where the fleet's shared stats live: one hash tag, so that a Cluster keeps them in one slot and
 * a reader gets them from one node.
 * - `second(s)`: a hash per second (epoch seconds), fields `rule⇥outcome` and
 *   `rule⇥window⇥denied` (window as `60s`), and `store⇥errors`, counts summed over the processes;
 * - `top(rule, span)`: a sorted set per rule per `topIntervalMs` span, refused identifiers scored
 *   by their refusals (as each process's sketch counted them);
 * - `topRules(span)`: the rules with such a set in that span;
 * - `process(instance)`: a hash per live process, field `hybrid` its HybridStore's `stats()`, and
 *   `processes`: the live processes, scored by when they last wrote.
 */
export function fleetStatsKeys(prefix: string) {
  const base = `${prefix}{stats}:`
  return {
    second: (second: number) => `${base}s:${second}`,
    top: (rule: string, span: number) => `${base}top:${span}:${rule}`,
    topRules: (span: number) => `${base}toprules:${span}`,
    process: (instance: string) => `${base}p:${instance}`,
    processes: `${base}processes`,
  }
}
