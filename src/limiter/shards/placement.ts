/**
 * Where a client key lives among a limiter's shards (docs/shards.md): rendezvous
 * (highest-random-weight) hashing of the key over the shard names. Each shard's weight for a key
 * is a 32-bit hash of `name + "\u0000" + key`; the key lives on the shard of the highest weight.
 * Adding a shard moves only the keys whose new weight beats their old maximum (about 1/N of
 * them); removing one moves only its own keys, each to the shard of its second-highest weight.
 * Synchronous and allocation-free on the decision path: FNV-1a over the UTF-16 code units, then
 * murmur3's finalizer (FNV alone mixes its last characters poorly into the high bits, which
 * decide the comparison).
 */

const FNV_OFFSET = 0x811c9dc5;
const FNV_PRIME = 0x01000193;

/** FNV-1a state after `text`, continuing from `state`. */
function fnv(state: number, text: string): number {
  let h = state;
  for (let i = 0; i < text.length; i++) {
    h = Math.imul(h ^ text.charCodeAt(i), FNV_PRIME);
  }
  return h;
}

/** murmur3's fmix32: every input bit reaches every output bit. */
function finalize(state: number): number {
  let h = state;
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/**
 * A placement over a fixed list of shard names: `of(key)` is the index (into `names`) of the
 * shard the key lives on. The names' hash states are computed once; a key costs one pass over
 * its characters per shard.
 */
export interface Placement {
  readonly names: readonly string[];
  of(key: string): number;
}

export function createPlacement(names: readonly string[]): Placement {
  // The hash state after `name + "\u0000"`: the separator keeps ("a", "bc") and ("ab", "c") apart.
  const seeds = names.map((name) => fnv(fnv(FNV_OFFSET, name), "\u0000"));
  return {
    names,
    of(key) {
      let best = 0;
      let bestWeight = -1;
      for (let i = 0; i < seeds.length; i++) {
        const weight = finalize(fnv(seeds[i] as number, key));
        // Ties (1 in 2^32) go to the earlier name, the same on every isolate.
        if (weight > bestWeight) {
          best = i;
          bestWeight = weight;
        }
      }
      return best;
    },
  };
}
