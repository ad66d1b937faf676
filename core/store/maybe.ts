/** Whether a store's answer is a promise (a remote store) rather than the value itself (memory). */
export function isPromise<T>(value: T | Promise<T>): value is Promise<T> {
  return value instanceof Promise || (value !== null && typeof value === 'object' && typeof (value as { then?: unknown }).then === 'function');
}
