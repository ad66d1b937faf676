type Json = Record<string, any>;

/** A tool's name as the client knows it: its own, and the namespace it was declared in, if any. */
export interface ClientToolName {
  name: string;
  namespace?: string;
}

/** Chat function names: letters, digits, `_` and `-`, at most 64 of them. */
const CHAT_NAME_MAX = 64;

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
    const uses = new Map<string, number>();
    const count = (name: string) => uses.set(name, (uses.get(name) ?? 0) + 1);
    for (const tool of tools) {
      if (named(tool)) {
        count(tool.name as string);
        if (tool.type === 'custom') this.customs.add(tool.name);
      } else if (tool?.type === 'namespace' && Array.isArray(tool.tools)) for (const member of tool.tools as Json[]) if (named(member)) count(member.name as string);
    }
    for (const tool of tools) {
      if (tool?.type !== 'namespace' || typeof tool.name !== 'string' || !Array.isArray(tool.tools)) continue;
      for (const member of tool.tools as Json[]) {
        if (!named(member)) continue;
        const chat = uses.get(member.name) === 1 ? member.name : `${tool.name}__${member.name}`.replace(/[^A-Za-z0-9_-]/g, '_').slice(0, CHAT_NAME_MAX);
        this.spaced.set(chat, { name: member.name, namespace: tool.name });
        this.up.set(`${tool.name}\u0000${member.name}`, chat);
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
