import { GatewayError, reportsPrompt, scrub, usageFromChat, type ChatChunk, type ChatChunkChoice, type FinishReason, type Usage } from '../../../core/index.js';
import type { Losses } from '../../formats/anthropic-messages/request.js';
import { chatUsage, finishReasonOf } from '../../formats/anthropic-messages/response.js';

/**
 * Anthropic's message event stream -> canonical chat chunks, one event at a time:
 *
 *   message_start                          -> a role chunk (id and model from the message)
 *   content_block_start text / thinking    -> its opening text, if any
 *   content_block_start tool_use           -> a tool-call delta with index, id, name, arguments ''
 *   content_block_delta text_delta         -> content
 *                       thinking_delta     -> reasoning_content
 *                       signature_delta    -> reasoning_signature
 *                       input_json_delta   -> that tool call's next arguments piece
 *   message_delta                          -> stop_reason, stop_sequence and usage, remembered
 *   message_stop                           -> the finish chunk, then a usage chunk (choices: [])
 *   ping, content_block_stop, unknown      -> nothing
 *   error                                  -> upstream_error
 *
 * Tool calls are numbered 0, 1, ... in the order their blocks start. A stream that ends before
 * message_stop was cut short, and an event that is not what the protocol says is malformed:
 * both are upstream_error. message_stop ends the stream (`finished`): nothing after it is read.
 */

type Json = Record<string, unknown>;

function isObject(value: unknown): value is Json {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

function malformed(what: string): GatewayError {
  return new GatewayError('upstream_error', { params: { detail: `the back end sent a malformed stream event (${what})` } });
}

const USAGE_FIELDS = ['input_tokens', 'output_tokens', 'cache_read_input_tokens', 'cache_creation_input_tokens', 'cache_creation', 'server_tool_use'] as const;

type Block = { kind: 'text' | 'thinking' | 'other' } | { kind: 'tool'; call: number; /** Whether any of its arguments went out. */ argued: boolean };

export class MessageStreamTranslator {
  private id = '';
  private model = '';
  private readonly created = Math.floor(Date.now() / 1000);
  private started = false;
  private stopped = false;
  private readonly blocks = new Map<number, Block>();
  private calls = 0;
  private stopReason: unknown = null;
  private stopSequence: string | null = null;
  private readonly usage: Json = {};
  /** A `message_delta` reported the output tokens (see billed). */
  private outputReported = false;
  private sawUsage = false;

  constructor(
    private readonly losses: Losses,
    private readonly secrets: readonly (string | undefined)[] = [],
  ) {}

  /** Whether message_stop arrived: the answer is complete. */
  get complete(): boolean {
    return this.stopped;
  }

  /**
   * message_stop is the stream's last event: it ends there, whether or not the back end ends its
   * body (one that keeps the connection open is let go, not read into the idle timeout).
   */
  get finished(): boolean {
    return this.stopped;
  }

  private chunk(choices: ChatChunkChoice[], extra: Partial<ChatChunk> = {}): ChatChunk {
    return { id: this.id, object: 'chat.completion.chunk', created: this.created, model: this.model, choices, ...extra };
  }

  private delta(delta: ChatChunkChoice['delta']): ChatChunk {
    return this.chunk([{ index: 0, delta, finish_reason: null }]);
  }

  private takeUsage(usage: unknown): void {
    if (!isObject(usage)) return;
    for (const name of USAGE_FIELDS) {
      if (usage[name] !== undefined && usage[name] !== null) {
        this.usage[name] = usage[name];
        this.sawUsage = true;
      }
    }
  }

  /** The chunks one event (its `event:` name and parsed `data`) makes. */
  push(data: unknown, name?: string): ChatChunk[] {
    if (!isObject(data)) throw malformed('not an object');
    const type = typeof data.type === 'string' ? data.type : name;
    if (type === 'ping') return [];
    if (type === 'error') {
      const error = isObject(data.error) ? data.error : {};
      const kind = typeof error.type === 'string' ? error.type : 'error';
      const message = typeof error.message === 'string' ? scrub(error.message, this.secrets) : 'stream error';
      // Overloaded stays overloaded: the client hears the kind its SDK and agents wait out.
      if (kind === 'overloaded_error') throw new GatewayError('upstream_overloaded', { params: { detail: message }, retryable: true });
      // A rate limit or an account out of credit is that, as the same error on an answer's status
      // is: a client waits out the one and stops on the other, and another target may answer.
      if (kind === 'rate_limit_error') throw new GatewayError('upstream_rate_limited', { params: { detail: message }, retryable: true });
      if (kind === 'billing_error') throw new GatewayError('upstream_quota_exhausted', { retryable: true, headers: { 'x-should-retry': 'false' } });
      throw new GatewayError('upstream_error', { params: { detail: `${kind}: ${message}` }, retryable: kind === 'api_error' });
    }
    if (this.stopped) return [];
    if (type === 'message_start') {
      const message = data.message;
      if (!isObject(message) || this.started) throw malformed('message_start');
      this.started = true;
      this.id = typeof message.id === 'string' ? message.id : '';
      this.model = typeof message.model === 'string' ? message.model : '';
      this.takeUsage(message.usage);
      const opening = this.delta({ role: 'assistant', content: '' });
      // The prompt's tokens (input and cache) are known now: what a stream that ends early is charged for its prompt.
      const prompt = usageFromChat(chatUsage(this.usage));
      if (prompt && this.sawUsage) reportsPrompt(opening, { ...prompt, outputTokens: 0, totalTokens: prompt.inputTokens });
      return [opening];
    }
    if (!this.started) {
      // Events Anthropic may add later are skipped; the known ones need a message first.
      if (type?.startsWith('content_block_') || type === 'message_delta' || type === 'message_stop') throw malformed(`${type} before message_start`);
      return [];
    }
    switch (type) {
      case 'content_block_start':
        return this.blockStart(data);
      case 'content_block_delta':
        return this.blockDelta(data);
      case 'content_block_stop':
        return this.blockStop(data);
      case 'message_delta': {
        const delta = isObject(data.delta) ? data.delta : {};
        if (delta.stop_reason !== undefined) this.stopReason = delta.stop_reason;
        if (typeof delta.stop_sequence === 'string') this.stopSequence = delta.stop_sequence;
        this.takeUsage(data.usage);
        if (isObject(data.usage) && data.usage.output_tokens !== undefined) this.outputReported = true;
        return [];
      }
      case 'message_stop':
        return this.finish();
      default:
        return [];
    }
  }

  private blockStart(data: Json): ChatChunk[] {
    const index = data.index;
    const block = data.content_block;
    if (typeof index !== 'number' || !isObject(block)) throw malformed('content_block_start');
    switch (block.type) {
      case 'text':
        this.blocks.set(index, { kind: 'text' });
        if (block.citations != null && (!Array.isArray(block.citations) || block.citations.length > 0)) this.losses.add('text.citations');
        return typeof block.text === 'string' && block.text ? [this.delta({ content: block.text })] : [];
      case 'thinking':
        this.blocks.set(index, { kind: 'thinking' });
        return typeof block.thinking === 'string' && block.thinking ? [this.delta({ reasoning_content: block.thinking })] : [];
      case 'tool_use': {
        const call = this.calls++;
        const input = isObject(block.input) && Object.keys(block.input).length > 0 ? JSON.stringify(block.input) : '';
        this.blocks.set(index, { kind: 'tool', call, argued: input !== '' });
        return [
          this.delta({
            tool_calls: [{ index: call, id: String(block.id ?? ''), type: 'function', function: { name: String(block.name ?? ''), arguments: input } }],
          }),
        ];
      }
      default:
        this.blocks.set(index, { kind: 'other' });
        this.losses.add(`content_block.${String(block.type)}`);
        return [];
    }
  }

  /**
   * A tool call without arguments streams none (its input `{}`, an empty `partial_json`): its
   * arguments are then the empty object's JSON, as OpenAI gives them and the whole answer has them.
   */
  private blockStop(data: Json): ChatChunk[] {
    const block = typeof data.index === 'number' ? this.blocks.get(data.index) : undefined;
    if (block?.kind !== 'tool' || block.argued) return [];
    block.argued = true;
    return [this.delta({ tool_calls: [{ index: block.call, function: { arguments: '{}' } }] })];
  }

  private blockDelta(data: Json): ChatChunk[] {
    const index = data.index;
    const delta = data.delta;
    if (typeof index !== 'number' || !isObject(delta)) throw malformed('content_block_delta');
    const block = this.blocks.get(index);
    if (!block) throw malformed('content_block_delta without content_block_start');
    switch (delta.type) {
      case 'text_delta':
        return typeof delta.text === 'string' && delta.text ? [this.delta({ content: delta.text })] : [];
      case 'thinking_delta':
        return typeof delta.thinking === 'string' && delta.thinking ? [this.delta({ reasoning_content: delta.thinking })] : [];
      case 'signature_delta':
        return typeof delta.signature === 'string' && delta.signature ? [this.delta({ reasoning_signature: delta.signature })] : [];
      case 'input_json_delta': {
        // A server tool's call (server_tool_use, mcp_tool_use: web search, code execution) streams
        // its input too: the block was named as a loss at its start, its pieces go with it.
        if (block.kind === 'other') return [];
        if (block.kind !== 'tool') throw malformed('input_json_delta outside a tool_use block');
        const piece = delta.partial_json;
        if (typeof piece !== 'string' || !piece) return [];
        block.argued = true;
        return [this.delta({ tool_calls: [{ index: block.call, function: { arguments: piece } }] })];
      }
      case 'citations_delta':
        this.losses.add('text.citations');
        return [];
      default:
        this.losses.add(`content_block_delta.${String(delta.type)}`);
        return [];
    }
  }

  /**
   * The usage so far once `message_delta` has reported the output (its counts are cumulative):
   * what a stream cut before its `message_stop` is charged (see EventTranslator.billed).
   */
  billed(): Usage | undefined {
    return this.outputReported ? usageFromChat(chatUsage(this.usage)) : undefined;
  }

  private finish(): ChatChunk[] {
    this.stopped = true;
    const finish: FinishReason = finishReasonOf(this.stopReason) ?? (this.calls > 0 ? 'tool_calls' : 'stop');
    const choice: ChatChunkChoice = { index: 0, delta: {}, finish_reason: finish };
    if (this.stopSequence !== null) choice.stop_sequence = this.stopSequence;
    const out = [this.chunk([choice])];
    const usage = this.sawUsage ? chatUsage(this.usage) : undefined;
    if (usage) out.push(this.chunk([], { usage }));
    return out;
  }
}
