/**
 * A value kept on an object of someone else's, out of sight: a private field added to the object
 * itself. Spreads, keys, `JSON.stringify` and `structuredClone` never see it, and nothing but the
 * slot can read it.
 *
 * For per-call data keyed by a per-call object (a parsed body, a request context), this is what
 * a WeakMap does without its cost: a WeakMap's entries are ephemerons, which every young-generation
 * collection must trace specially, and a gateway makes thousands of such entries a second. A
 * private field is an ordinary property for V8, and goes with its object.
 */
export interface HiddenSlot<T> {
  get(target: object): T | undefined;
  set(target: object, value: T): void;
  has(target: object): boolean;
  /** Forget the value (the field stays, holding undefined: private fields cannot be deleted). */
  clear(target: object): void;
}

/** A base whose constructor hands back the object it is given, so a subclass adds its private fields to that object. */
class Adopt {
  constructor(target: object) {
    return target;
  }
}

/** A new slot: each has its own private name, so slots never see each other's values. */
export function hiddenSlot<T>(): HiddenSlot<T> {
  class Slot extends Adopt {
    #value: T | undefined;

    private constructor(target: object, value: T) {
      super(target);
      this.#value = value;
    }

    static get(target: object): T | undefined {
      return #value in target ? (target as Slot).#value : undefined;
    }

    static set(target: object, value: T): void {
      if (#value in target) (target as Slot).#value = value;
      else new Slot(target, value);
    }

    static has(target: object): boolean {
      return #value in target && (target as Slot).#value !== undefined;
    }

    static clear(target: object): void {
      if (#value in target) (target as Slot).#value = undefined;
    }
  }
  return { get: Slot.get, set: Slot.set, has: Slot.has, clear: Slot.clear };
}
