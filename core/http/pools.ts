import { Pool } from './undici.js';
import { holdAnswersIn, type HeldAnswers } from './client.js';

export interface PoolOptions {
  /** Most sockets to one origin. */
  connections?: number;
  connectTimeoutMs?: number;
  /** Longest wait for response headers. */
  headersTimeoutMs?: number;
  /** Longest gap between two body chunks. */
  bodyTimeoutMs?: number;
  keepAliveTimeoutMs?: number;
}

/**
 * One keep-alive undici Pool per upstream origin and option set, shared by every provider
 * instance that talks to it. Closed when the gateway stops.
 */
export class PoolRegistry {
  private readonly pools = new Map<string, Pool>();

  /** `held`: what the answers read whole through these pools may hold in all. */
  constructor(private readonly held?: HeldAnswers) {}

  get(origin: string, options: PoolOptions = {}): Pool {
    const key = `${origin}|${options.connections ?? ''}|${options.connectTimeoutMs ?? ''}|${options.headersTimeoutMs ?? ''}|${options.bodyTimeoutMs ?? ''}`;
    let pool = this.pools.get(key);
    if (!pool) {
      pool = new Pool(origin, {
        connections: options.connections ?? 128,
        pipelining: 1,
        keepAliveTimeout: options.keepAliveTimeoutMs ?? 30_000,
        keepAliveMaxTimeout: 600_000,
        connectTimeout: options.connectTimeoutMs ?? 10_000,
        headersTimeout: options.headersTimeoutMs ?? 300_000,
        bodyTimeout: options.bodyTimeoutMs ?? 300_000,
      });
      this.pools.set(key, pool);
      if (this.held) holdAnswersIn(pool, this.held);
    }
    return pool;
  }

  async closeAll(): Promise<void> {
    const pools = [...this.pools.values()];
    this.pools.clear();
    await Promise.allSettled(pools.map((p) => p.close()));
  }
}
