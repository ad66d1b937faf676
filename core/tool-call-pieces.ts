/**
 * Which call a streamed tool-call piece (`delta.tool_calls[]`) belongs to. Chat streams key
 * pieces by `index`; back ends differ: some give every parallel call index 0 (each with its own
 * id), some give no index (Gemini's OpenAI-compatible API: a piece continues the last call), and
 * some interleave the pieces of calls under one index, each naming its call's id. A piece goes to
 * the call its id names, else to its index's call (the last call when it has no index), unless
 * that call has another id: then it starts a new call. One resolver per choice of a stream.
 */
export class ToolCallPieces<T> {
  private readonly byIndex = new Map<number, T>();
  private readonly byId = new Map<string, T>();
  private readonly ids = new Map<T, string | undefined>();
  private last: T | undefined;

  /** The call `piece` continues, or undefined when it starts a new one (then call `opened`). */
  find(piece: { index?: unknown; id?: unknown }): T | undefined {
    const id = pieceId(piece);
    const named = id !== undefined ? this.byId.get(id) : undefined;
    if (named !== undefined) return named;
    const call = typeof piece.index === 'number' ? this.byIndex.get(piece.index) : this.last;
    if (call === undefined) return undefined;
    const own = this.ids.get(call);
    return id !== undefined && own !== undefined && own !== id ? undefined : call;
  }

  /** Record `call`, which `piece` started. */
  opened(piece: { index?: unknown; id?: unknown }, call: T): void {
    const id = pieceId(piece);
    if (typeof piece.index === 'number') this.byIndex.set(piece.index, call);
    if (id !== undefined) this.byId.set(id, call);
    this.ids.set(call, id);
    this.last = call;
  }
}

function pieceId(piece: { id?: unknown }): string | undefined {
  return typeof piece.id === 'string' && piece.id !== '' ? piece.id : undefined;
}
