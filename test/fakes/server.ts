import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** A real HTTP server on 127.0.0.1 and a free port, answering with `dispatch`: how every fake vendor server starts and stops. */
export abstract class LocalServer {
  private server?: http.Server;
  url = '';

  async start(): Promise<string> {
    this.server = http.createServer((req, res) => void this.dispatch(req, res));
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this.url;
  }

  async stop(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }

  protected abstract dispatch(req: http.IncomingMessage, res: http.ServerResponse): Promise<void>;
}

/**
 * What most fake vendor servers in test/ share: a LocalServer with the key it checks, a record of
 * what it received, a script a test sets for the next answers, and the last request.
 * A fake says how it checks credentials and answers in `dispatch`.
 */
export abstract class FakeServer<Received, Script> extends LocalServer {
  readonly received: Received[] = [];
  /** What the next calls are answered with (until reset), when a test set it. */
  protected scripted: Script | undefined;

  constructor(readonly apiKey: string) {
    super();
  }

  /** Answer the next calls with `script` (until reset). */
  script(script: Script | undefined): void {
    this.scripted = script;
  }

  reset(): void {
    this.scripted = undefined;
    this.received.length = 0;
  }

  last(): Received {
    const entry = this.received[this.received.length - 1];
    if (!entry) throw new Error('the fake upstream received nothing');
    return entry;
  }
}

/** The whole body of a request, as its bytes. */
export async function readBody(req: http.IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

/** Record `entry` in `received`, marked aborted if the caller closes the connection before the answer ended. */
export function recordAborts<T extends { aborted: boolean }>(received: T[], entry: T, res: http.ServerResponse): void {
  received.push(entry);
  res.on('close', () => {
    if (!res.writableFinished) entry.aborted = true;
  });
}

/** Answer `body` as JSON with its length; `headers` are added (a content-type among them replaces application/json). */
/** Until `res` can take more (its 'drain') or is gone (its 'close'), leaving no listener behind. */
export function drainedOrClosed(res: http.ServerResponse): Promise<void> {
  return new Promise<void>((resolve) => {
    const done = () => {
      res.off('drain', done);
      res.off('close', done);
      resolve();
    };
    res.on('drain', done);
    res.on('close', done);
  });
}

export function json(res: http.ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers });
  res.end(text);
}
