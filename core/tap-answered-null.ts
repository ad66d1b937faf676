/**
 * A waterfall tap's answer in the wrong shape: null (`undefined` keeps the value; null is nothing
 * the next tap or the gateway can use). Thrown at once, naming the tap, so that the failure is
 * blamed on its plugin rather than on the code that would trip over the null later.
 */
export class TapAnsweredNull extends Error {
  constructor(readonly plugin: string) {
    super(`the tap '${plugin}' answered null (return the value it was given, changed or not, or undefined to keep it)`);
  }
}
