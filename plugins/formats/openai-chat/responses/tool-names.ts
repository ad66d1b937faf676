import { createHash } from 'node:crypto';

type Json = Record<string, any>;

/** A tool's name as the client knows it: its own, and the namespace it was declared in, if any. */
export interface ClientToolName {
  name: string;
  namespace?: string;
}

/** Chat function names: letters, digits, `_` and `-`, at most 64 of them. */
const CHAT_NAME_MAX = 64;
const CHAT_NAME = /^[A-Za-z0-9_-]{1,64}$/;

/** `text` in chat's shape for a function name, `suffix` (kept whole) at its end. */
function chatShaped(text: string, suffix = ''): string {
  return text.replace(/[^A-Za-z0-9_-]/g, '_').slice(0, CHAT_NAME_MAX - suffix.length) + suffix;
}

/**
 * The names a request's tools go up to chat under. Chat has no namespaces (Codex declares its
 * sub-agent and MCP tools in `namespace` tools): a namespaced function or custom tool goes up as
 * a function of its own name when no other tool of the request has that name, else as
 * `namespace__name`; its calls come back with the name and namespace the client gave. The same
 * request body always gives the same names, so earlier turns' calls match the tools.
 */
export class ToolNames {
  /** Chat names of custom (freeform) tools: their calls come back as custom tool calls. */
  readonly customs = new Set<string>();
  /** Chat name -> the client's name and namespace, for namespaced tools. */
  private readonly spaced = new Map<string, ClientToolName>();
  /** `namespace` NUL `name` -> chat name. */
  private readonly up = new Map<string, string>();

  constructor(body: Json) {
    const tools = Array.isArray(body.tools) ? (body.tools as Json[]) : [];
    const named = (tool: Json | undefined): boolean => (tool?.type === 'function' || tool?.type === 'custom') && typeof tool?.name === 'string';
    // Every top-level name is the client's own: taken first, as it is.
    const taken = new Set<string>();
    const members = new Map<string, number>();
    for (const tool of tools) {
      if (named(tool)) {
        taken.add(tool.name as string);
        if (tool.type === 'custom') this.customs.add(tool.name as string);
      } else if (tool?.type === 'namespace' && Array.isArray(tool.tools)) {
        for (const member of tool.tools as Json[]) if (named(member)) members.set(member.name as string, (members.get(member.name as string) ?? 0) + 1);
      }
    }
    for (const tool of tools) {
      if (tool?.type !== 'namespace' || typeof tool.name !== 'string' || !Array.isArray(tool.tools)) continue;
      for (const member of tool.tools as Json[]) {
        if (!named(member)) continue;
        const name = member.name as string;
        // Its own name when no other tool has it and chat takes it as it is; else namespace__name,
        // made chat's shape, and made unique (a short hash of both) where that is taken too.
        let chat = members.get(name) === 1 && !taken.has(name) && CHAT_NAME.test(name) ? name : chatShaped(`${tool.name}__${name}`);
        if (taken.has(chat)) chat = chatShaped(`${tool.name}__${name}`, `_${createHash('sha256').update(`${tool.name}\u0000${name}`).digest('hex').slice(0, 8)}`);
        for (let n = 2; taken.has(chat); n++) chat = chatShaped(`${tool.name}__${name}`, `_${n}`);
        taken.add(chat);
        this.spaced.set(chat, { name, namespace: tool.name });
        this.up.set(`${tool.name}\u0000${name}`, chat);
        if (member.type === 'custom') this.customs.add(chat);
      }
    }
  }

  /** The chat name of the client's tool `name` (in `namespace`, when the client gave one). */
  chatName(name: string, namespace?: unknown): string {
    return typeof namespace === 'string' && namespace !== '' ? (this.up.get(`${namespace}\u0000${name}`) ?? name) : name;
  }

  /** The client's name (and namespace) of a call the back end made by `chatName`. */
  clientName(chatName: string): ClientToolName {
    return this.spaced.get(chatName) ?? { name: chatName };
  }
}

const made = new WeakMap<object, ToolNames>();

/** The tool names of a request body (made once per body). */
export function toolNamesOf(body: Json): ToolNames {
  let names = made.get(body);
  if (!names) {
    names = new ToolNames(body);
    made.set(body, names);
  }
  return names;
}
