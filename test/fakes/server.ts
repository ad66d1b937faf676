import http from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * What every fake vendor server in test/ shares: a real HTTP server on 127.0.0.1 and a free port,
 * a record of what it received, a script a test sets for the next answers, and the last request.
 * A fake says how it checks credentials and answers in `dispatch`.
 */
export abstract class FakeServer<Received, Script> {
  readonly received: Received[] = [];
  /** What the next calls are answered with (until reset), when a test set it. */
  protected scripted: Script | undefined;
  private server?: http.Server;
  url = '';

  constructor(readonly apiKey: string) {}

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

  protected abstract dispatch(req: http.IncomingMessage, res: http.ServerResponse): Promise<void>;
}
