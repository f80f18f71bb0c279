import type { SqlExecutor } from '../../images/service-kit/src/index.js';

/**
 * The current schema's catalog as comparable text, one line per fact: relations (kind, persistence,
 * partition key and bound, options), columns (position, type, nullability, default, collation, storage,
 * identity), constraints, indexes, sequences (not their positions), sequence ownership, triggers and
 * functions (signature, language, volatility, body hash). Names only, never OIDs, so two databases
 * made differently compare equal exactly when their schemas are the same.
 */
export async function schemaCatalog(sql: SqlExecutor): Promise<string[]> {
  const facts: string[] = [];
  const add = async (label: string, query: string) => {
    const { rows } = await sql.query<Record<string, unknown>>(query);
    for (const row of rows) facts.push(`${label} ${JSON.stringify(row)}`);
  };
  const ns = 'current_schema()::regnamespace';
  await add(
    'relation',
    `SELECT c.relname, c.relkind, c.relpersistence, c.relispartition, c.reloptions,
       pg_get_expr(c.relpartbound, c.oid) AS bound,
       CASE WHEN c.relkind = 'p' THEN pg_get_partkeydef(c.oid) END AS partkey,
       (SELECT p.relname FROM pg_inherits i JOIN pg_class p ON p.oid = i.inhparent WHERE i.inhrelid = c.oid) AS parent
     FROM pg_class c WHERE c.relnamespace = ${ns} ORDER BY c.relname`,
  );
  await add(
    'column',
    `SELECT c.relname, a.attnum, a.attname, format_type(a.atttypid, a.atttypmod) AS type, a.attnotnull,
       a.attstorage, a.attidentity, a.attgenerated, a.attisdropped, a.attislocal, a.attinhcount,
       co.collname, pg_get_expr(d.adbin, d.adrelid) AS default
     FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
     LEFT JOIN pg_collation co ON co.oid = a.attcollation AND a.attcollation <> 0
     LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
     WHERE c.relnamespace = ${ns} AND a.attnum > 0 AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
     ORDER BY c.relname, a.attnum`,
  );
  await add(
    'constraint',
    `SELECT c.relname, k.conname, k.contype, k.condeferrable, k.convalidated, k.conislocal, pg_get_constraintdef(k.oid) AS def
     FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid
     WHERE k.connamespace = ${ns} ORDER BY c.relname, k.conname`,
  );
  await add('index', `SELECT tablename, indexname, indexdef FROM pg_indexes WHERE schemaname = current_schema() ORDER BY tablename, indexname`);
  await add(
    'sequence',
    `SELECT sequencename, data_type::text, start_value, min_value, max_value, increment_by, cycle, cache_size
     FROM pg_sequences WHERE schemaname = current_schema() ORDER BY sequencename`,
  );
  await add(
    'owned-by',
    `SELECT s.relname AS sequence, t.relname AS table, a.attname AS column, d.deptype
     FROM pg_depend d JOIN pg_class s ON s.oid = d.objid AND s.relkind = 'S'
     JOIN pg_class t ON t.oid = d.refobjid JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = d.refobjsubid
     WHERE s.relnamespace = ${ns} ORDER BY 1, 2, 3`,
  );
  await add(
    'trigger',
    `SELECT c.relname, t.tgname, pg_get_triggerdef(t.oid) AS def FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
     WHERE c.relnamespace = ${ns} AND NOT t.tgisinternal ORDER BY 1, 2`,
  );
  await add(
    'function',
    `SELECT p.oid::regprocedure::text AS signature, l.lanname, p.provolatile, p.prokind, pg_get_function_result(p.oid) AS result, md5(p.prosrc) AS body
     FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang WHERE p.pronamespace = ${ns} ORDER BY 1`,
  );
  await add('type', `SELECT t.typname, t.typtype FROM pg_type t WHERE t.typnamespace = ${ns} AND t.typtype NOT IN ('b', 'c') ORDER BY 1`);
  return facts;
}
