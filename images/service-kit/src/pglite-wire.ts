import pg from 'pg';
import { serialize, type DatabaseError } from 'pg-protocol';
import type { BackendMessage } from 'pg-protocol/dist/messages.js';
import { Parser } from 'pg-protocol/dist/parser.js';
import type { SqlResult } from './sql.js';

/**
 * One statement as one exchange of PostgreSQL's extended protocol, for embedded PGlite.
 *
 * PGlite's own `query()` calls into the WASM backend six times per statement (Parse, Describe the
 * statement to learn the parameter types, Bind, Describe the portal, Execute, Sync), with a protocol
 * parse in JavaScript after each; the same messages sent in one buffer cost about half as much
 * (hack/bench/measurements.md). The buffer is what node-postgres sends to a
 * server: parameters as text with unspecified types (the server infers them) serialised by pg's own
 * `prepareValue`, and the answer's rows parsed by the same type parsers as the pg client's, so a value
 * reads the same from the embedded database as from PostgreSQL.
 */

const INT8_OID = 20;

/** The parser of a column type, as the pg client is configured: int8 as a number (sizes stay far below 2^53). */
export function pgTypeParser(oid: number, format: 'text' | 'binary' = 'text'): (value: string) => unknown {
  return oid === INT8_OID ? Number : (pg.types.getTypeParser(oid, format) as (value: string) => unknown);
}

// pg's parameter serialisation (Dates, arrays, Buffers, objects as JSON); @types/pg leaves `utils` out.
const { prepareValue } = (pg as unknown as { utils: { prepareValue(value: unknown): unknown } }).utils;

/** A named (prepared) statement: `parse` the first time, then only bound and executed. */
export interface NamedStatement {
  name: string;
  parse: boolean;
}

/**
 * Parse, Bind, Describe, Execute and Sync of one statement, in one buffer of its own (not a slice of
 * Node's shared pool, so that posting it to a thread copies or moves just these bytes). Unnamed unless
 * `named`; a named statement that is already prepared skips the Parse.
 */
export function encodeStatement(text: string, params: readonly unknown[] = [], named?: NamedStatement): Uint8Array {
  return concat([
    ...(named && !named.parse ? [] : [serialize.parse({ text, name: named?.name })]),
    serialize.bind({ statement: named?.name, values: params as unknown[], valueMapper: prepareValue }),
    serialize.describe({ type: 'P' }),
    serialize.execute({}),
    serialize.sync(),
  ]);
}

/** Close (deallocate) a named statement; closing one that does not exist is not an error. */
export function encodeClose(name: string): Uint8Array {
  return concat([serialize.close({ type: 'S', name }), serialize.sync()]);
}

function concat(parts: Buffer[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, part) => n + part.length, 0));
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
}

/**
 * The backend's answer to `encodeStatement`: its rows and row count, or the server's error thrown as
 * pg-protocol's DatabaseError (code, detail, constraint… as node-postgres reports them).
 */
export function decodeStatementResult<R>(answer: Uint8Array): SqlResult<R> {
  const { result, error } = decodeAnswer<R>(answer);
  if (error) throw error;
  return result;
}

/** The answer, or its error, and whether a Parse in it succeeded (a named statement then exists). */
export function decodeAnswer<R>(answer: Uint8Array): { result: SqlResult<R>; error?: DatabaseError; parsed: boolean } {
  let columns: Array<{ name: string; parse: (value: string) => unknown }> = [];
  const rows: R[] = [];
  let rowCount: number | undefined;
  let error: DatabaseError | undefined;
  let parsed = false;
  new Parser().parse(Buffer.from(answer.buffer, answer.byteOffset, answer.byteLength), (message: BackendMessage) => {
    switch (message.name) {
      case 'parseComplete':
        parsed = true;
        break;
      case 'rowDescription': {
        const { fields } = message as unknown as { fields: Array<{ name: string; dataTypeID: number; format: 'text' | 'binary' }> };
        columns = fields.map((f) => ({ name: f.name, parse: pgTypeParser(f.dataTypeID, f.format) }));
        break;
      }
      case 'dataRow': {
        const { fields } = message as unknown as { fields: Array<string | null> };
        const row: Record<string, unknown> = {};
        for (let i = 0; i < columns.length; i++) {
          const value = fields[i];
          row[columns[i]!.name] = value === null || value === undefined ? null : columns[i]!.parse(value);
        }
        rows.push(row as R);
        break;
      }
      case 'commandComplete': {
        // As pg's Result: the tag's last number ("INSERT 0 3", "UPDATE 2", "SELECT 5"), if it has one.
        const count = /\d+$/.exec((message as unknown as { text: string }).text);
        if (count) rowCount = Number(count[0]);
        break;
      }
      case 'error':
        error ??= message as DatabaseError;
        break;
      default:
        break;
    }
  });
  return { result: { rows, rowCount: rowCount ?? rows.length }, ...(error ? { error } : {}), parsed };
}
