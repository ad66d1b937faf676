import type { RequestLogEntry, UsageRecord } from '../../core/store/types.js';
import type { RunningGateway } from './gateway.js';

/** Flush the stores and `read` until it finds something (every 10 ms; the writes are batched in the background); fail after `ms`. */
async function flushedUntil<T>(gw: RunningGateway, read: () => Promise<T | undefined>, ms: number, missing: string): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    await gw.gateway.stores.flush();
    const found = await read();
    if (found !== undefined) return found;
    if (Date.now() > deadline) throw new Error(missing);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** The usage rows of one request, once metering has written at least one. */
export function usageRows(gw: RunningGateway, requestId: string, ms = 3000): Promise<UsageRecord[]> {
  const read = async () => {
    const rows = await gw.gateway.stores.usage.list({ requestId });
    return rows.length > 0 ? rows : undefined;
  };
  return flushedUntil(gw, read, ms, `no usage row for ${requestId}`);
}

/** The usage row of one request, once metering has written it. */
export async function usageRow(gw: RunningGateway, requestId: string, ms = 3000): Promise<UsageRecord> {
  return (await usageRows(gw, requestId, ms))[0]!;
}

/** The request-log row of one request, once the request log has written it (looked for among the latest 200). */
export function logRow(gw: RunningGateway, requestId: string, ms = 3000): Promise<RequestLogEntry> {
  const read = async () => (await gw.gateway.stores.logs.query({ limit: 200 })).entries.find((e) => e.requestId === requestId);
  return flushedUntil(gw, read, ms, `no log row for ${requestId}`);
}
