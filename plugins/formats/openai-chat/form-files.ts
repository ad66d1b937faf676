import { GatewayError, isUploadedFile, type RouteInput } from '../../../core/index.js';

/**
 * Which fields of a multipart/form-data body may be files, checked when the call is parsed
 * (before its JSON Schema): the multipart reader puts a file part into the body as an
 * UploadedFile, whatever the part's name, and a schema that meets one where it expects text
 * would describe the reader's object (its spool path) in its error. A file sent under a field
 * that takes text, alone or beside text parts of the same name, is a 400 `invalid_type` on that
 * field, said in the client's terms.
 */

/** Whether a call's body came as multipart/form-data. */
export function isMultipart(input: RouteInput | undefined): boolean {
  const type = input?.headers['content-type'];
  return typeof type === 'string' && /^multipart\/form-data/i.test(type);
}

function quotedList(names: readonly string[]): string {
  const quoted = names.map((name) => `'${name}'`);
  return quoted.length <= 1 ? (quoted[0] ?? 'no field') : `${quoted.slice(0, -1).join(', ')} and ${quoted.at(-1)}`;
}

/**
 * Refuse a form that sent a file under one of `textFields` (a JSON body is not looked at: its
 * objects are the client's own). Fields the route does not know are left to its schema (an
 * unknown one is named as such, or passed on). `fileFields` (the body's names: `image` for
 * `image[]` too) are where files go, for the message.
 */
export function refuseFilesIn(input: RouteInput, textFields: readonly string[], fileFields: readonly string[]): void {
  if (!isMultipart(input)) return;
  for (const name of textFields) {
    if (!Object.prototype.hasOwnProperty.call(input.body, name)) continue;
    const value = input.body[name];
    if (Array.isArray(value) ? value.some(isUploadedFile) : isUploadedFile(value)) {
      throw new GatewayError('invalid_type', {
        param: name,
        params: { detail: `expected a text field, but got a file instead (files go only in ${quotedList(fileFields)}).` },
      });
    }
  }
}

/** The fields a route's schema names (its top-level `properties`), less `files`. */
export function textFieldsOf(schemas: readonly object[], files: readonly string[]): string[] {
  const names = new Set<string>();
  for (const schema of schemas) for (const name of Object.keys((schema as { properties?: object }).properties ?? {})) names.add(name);
  return [...names].filter((name) => !files.includes(name));
}
