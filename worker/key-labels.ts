/**
 * Raw client keys beside the digests the plans list (analytics.keyLabels, docs/analytics.md
 * "Who is limited"): an override or key block set with a header rule's raw value is stored under
 * its SHA-256, which names nobody on the dashboard. With keyLabels on, the raw value the admin
 * sent is kept beside it, in one hash on the first store (what is per deployment lives there).
 */
import type { createStoreClient } from "edge-limiter";

type Store = ReturnType<typeof createStoreClient>;

export interface KeyLabels {
  /** Remembers `raw` as the label of `key` (only when they differ: an "ip" key is its own). */
  remember(key: string, raw: string): Promise<void>;
  /** The labels known for these keys. */
  read(keys: readonly string[]): Promise<Map<string, string>>;
}

export function createKeyLabels(store: Store, prefix: string): KeyLabels {
  const hash = `${prefix}:plans:labels`;
  return {
    async remember(key, raw) {
      if (key === raw) return;
      await store.hset(hash, { [key]: raw });
    },
    async read(keys) {
      const labels = new Map<string, string>();
      if (keys.length === 0) return labels;
      const values = (await store.hmget(hash, ...keys)) as unknown;
      // The client answers HMGET as the values in field order, or as an object by field (null
      // when none is set), depending on its deserialization.
      const pairs: [string, unknown][] = Array.isArray(values)
        ? keys.map((key, i) => [key, values[i]])
        : values && typeof values === "object"
          ? Object.entries(values)
          : [];
      for (const [key, value] of pairs) if (typeof value === "string") labels.set(key, value);
      return labels;
    },
  };
}
