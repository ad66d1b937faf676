import type { IncomingMessage, ServerResponse } from 'node:http';

/**
 * Requests that asked `Expect: 100-continue` (curl for a large upload, .NET, Java clients), each
 * with its response: their 100 Continue waits until their body is read, so that a call refused
 * before it (a wrong key, a rate limit, a body type the route does not take) is refused before
 * the client uploads anything. Such a refusal closes the connection (node does, for an
 * expectation it did not meet), so the body never sent is not waited for.
 */
const waitingForContinue = new WeakMap<IncomingMessage, ServerResponse>();

/** `req` asked for a 100 Continue: it is written when its body is first read (see askForBody). */
export function holdContinue(req: IncomingMessage, res: ServerResponse): void {
  waitingForContinue.set(req, res);
}

/** Tell a client that waits for it to send its body now; nothing for one that did not ask. */
export function askForBody(req: IncomingMessage): void {
  const res = waitingForContinue.get(req);
  if (res === undefined) return;
  waitingForContinue.delete(req);
  if (!res.headersSent && !res.destroyed) res.writeContinue();
}
