/** A text's JSON value, or undefined when it is empty or not JSON. */
export function jsonOrUndefined<T = unknown>(text: string): T | undefined {
  try {
    return text ? (JSON.parse(text) as T) : undefined;
  } catch {
    return undefined;
  }
}

/** A text's JSON value, or the text as it is when it is not JSON (an event stream, a page). */
export function jsonOrText(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}

/** A value as plain JSON, through a round trip (SDKs add lazy properties and class instances). */
export function plain<T>(value: T): T {
  return JSON.parse(JSON.stringify(value)) as T;
}
