// What test/support/global-setup.ts provides; read with inject() from "vitest".
export {};

declare module "vitest" {
  export interface ProvidedContext {
    bridgeUrl: string;
    bridgeToken: string;
    redisUrl: string;
  }
}
