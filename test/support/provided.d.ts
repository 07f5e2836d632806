// What test/support/global-setup.ts provides; read with inject() from "vitest".
export {};

declare module "vitest" {
  export interface ProvidedContext {
    bridgeUrl: string;
    bridgeToken: string;
    redisUrl: string;
    /** Bridges on databases 1 and 2 of the same Redis (the shards tests' other stores). */
    shardBridgeUrls: string[];
  }
}
