import type { Socket } from 'node:net';
import type * as Undici from 'undici';
import { buildConnector, ConnectTimeoutError, Pool } from './undici.js';
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
        connect: preciseConnector(options.connectTimeoutMs ?? 10_000),
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

/**
 * undici's connector with its connect timeout kept by a timer of the gateway's own. undici keeps
 * it on its coarse timers, which tick every half second: a limit of 200 ms waited a second, and
 * one of 800 ms could cut a connection at 580 ms. `base` is undici's connector without a timeout
 * (a test passes one that never connects).
 */
export function preciseConnector(timeoutMs: number, base: Undici.buildConnector.connector = buildConnector({ timeout: 0 })): Undici.buildConnector.connector {
  return (options, callback) => {
    let settled = false;
    let socket: Socket | undefined;
    const timer = setTimeout(() => {
      if (settled) return;
      settled = true;
      socket?.destroy();
      callback(new ConnectTimeoutError(`Connect Timeout Error (attempted address: ${options.hostname}:${options.port}, timeout: ${timeoutMs}ms)`), null);
    }, timeoutMs);
    // undici's connector returns the socket it opens (its types say nothing of it).
    socket = (base as (...args: Parameters<Undici.buildConnector.connector>) => unknown)(options, (...args) => {
      clearTimeout(timer);
      if (settled) {
        args[1]?.destroy();
        return;
      }
      settled = true;
      callback(...args);
    }) as Socket | undefined;
    return socket as never;
  };
}
