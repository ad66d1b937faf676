/**
 * The tokenizer's thread: loads one BPE encoding (tens of MB of tables) and answers
 * `{id, text}` messages with `{id, tokens}`. Counting a long text takes milliseconds; here it
 * never holds up the gateway's event loop, and the tables live outside the main heap.
 */
import { parentPort, workerData } from 'node:worker_threads';

interface Request {
  id: number;
  text: string;
}

const name = (workerData as { encoding?: string } | undefined)?.encoding;
const encoding =
  name === 'o200k_base' ? await import('gpt-tokenizer/encoding/o200k_base') : await import('gpt-tokenizer/encoding/cl100k_base');

parentPort!.on('message', (request: Request) => {
  let tokens: number;
  try {
    tokens = encoding.countTokens(request.text);
  } catch {
    // Text the encoder cannot take (it should take any string): a token is at least one byte.
    tokens = Buffer.byteLength(request.text);
  }
  parentPort!.postMessage({ id: request.id, tokens });
});
