/**
 * Hash tags that spread Strata's hot cache keys over the masters of a Redis Cluster.
 *
 * Redis Cluster maps a key to one of 16384 slots by CRC16 of the key (or of its `{tag}` part), and
 * each master owns slot ranges. Hot keys that share one tag would all sit on one master; picking one
 * tag per master and spreading keys over those tags puts the load on every master. Pure functions:
 * the caller supplies the slot ranges (from CLUSTER SLOTS) or uses the standard even split.
 */

export const SLOT_COUNT = 16384;

/** One contiguous slot range and the master that owns it ("host:port" or a node id). */
export interface SlotRange {
  start: number;
  end: number;
  master: string;
}

// CRC16/XMODEM (poly 0x1021, init 0), the variant the Redis Cluster spec names.
const CRC16_TABLE = (() => {
  const table = new Uint16Array(256);
  for (let i = 0; i < 256; i++) {
    let crc = i << 8;
    for (let bit = 0; bit < 8; bit++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
    table[i] = crc;
  }
  return table;
})();

export function crc16(data: Uint8Array): number {
  let crc = 0;
  for (const byte of data) crc = ((crc << 8) & 0xffff) ^ CRC16_TABLE[((crc >> 8) ^ byte) & 0xff]!;
  return crc;
}

/**
 * The bytes of a key that Redis Cluster hashes: if the key has a `{` followed later by a `}` with at
 * least one byte between them, only those bytes (up to the first `}`), else the whole key.
 */
export function hashedPart(key: string | Uint8Array): Uint8Array {
  const bytes = typeof key === 'string' ? Buffer.from(key, 'utf8') : key;
  const open = bytes.indexOf(0x7b); // '{'
  if (open !== -1) {
    const close = bytes.indexOf(0x7d, open + 1); // '}'
    if (close > open + 1) return bytes.subarray(open + 1, close);
  }
  return bytes;
}

/** The slot of a key per the Redis Cluster spec. */
export function keySlot(key: string | Uint8Array): number {
  return crc16(hashedPart(key)) % SLOT_COUNT;
}

/** What `redis-cli --cluster create` assigns to `masters` masters: equal ranges, the remainder spread. */
export function standardSlotRanges(masters = 3): SlotRange[] {
  const ranges: SlotRange[] = [];
  const per = SLOT_COUNT / masters;
  for (let i = 0; i < masters; i++) {
    const start = Math.round(i * per);
    const end = Math.round((i + 1) * per) - 1;
    ranges.push({ start, end, master: `master-${i}` });
  }
  return ranges;
}

/**
 * Slot ranges from a CLUSTER SLOTS reply: `[[start, end, [host, port, id, ...], ...replicas], ...]`.
 * The master is named "host:port".
 */
export function slotRangesFromClusterSlots(reply: unknown): SlotRange[] {
  if (!Array.isArray(reply)) throw new TypeError('CLUSTER SLOTS reply must be an array');
  return reply.map((entry: unknown) => {
    if (!Array.isArray(entry) || entry.length < 3 || !Array.isArray(entry[2])) {
      throw new TypeError('malformed CLUSTER SLOTS entry');
    }
    const [start, end, [host, port]] = entry as [number, number, [string, number]];
    return { start: Number(start), end: Number(end), master: `${host}:${port}` };
  });
}

/** How many candidate names to try before concluding that some master owns too few slots to find. */
const SEARCH_LIMIT = 1_000_000;

/**
 * One hash tag per master (`{s<k>}`, smallest k first), ordered by each master's lowest slot, so that
 * each tag lands on a different master. Deterministic for a given layout.
 */
export function pickHashTags(ranges: SlotRange[] = standardSlotRanges(), prefix = 's'): string[] {
  const ownerOf = new Array<string | undefined>(SLOT_COUNT);
  const firstSlot = new Map<string, number>();
  for (const r of ranges) {
    for (let slot = r.start; slot <= r.end; slot++) ownerOf[slot] = r.master;
    firstSlot.set(r.master, Math.min(firstSlot.get(r.master) ?? SLOT_COUNT, r.start));
  }
  const masters = [...firstSlot.keys()].sort((a, b) => firstSlot.get(a)! - firstSlot.get(b)!);
  const tagOf = new Map<string, string>();
  for (let k = 0; k < SEARCH_LIMIT && tagOf.size < masters.length; k++) {
    const name = `${prefix}${k}`;
    const owner = ownerOf[keySlot(name)];
    if (owner !== undefined && !tagOf.has(owner)) tagOf.set(owner, `{${name}}`);
  }
  if (tagOf.size < masters.length) throw new Error('could not find a hash tag for every master');
  return masters.map((m) => tagOf.get(m)!);
}

export interface KeySharder {
  /** The tags in use, one per master. */
  readonly tags: readonly string[];
  /** `baseKey` prefixed with one of the tags, chosen from the key itself: same key, same tag, always. */
  shardedKey(baseKey: string): string;
}

/**
 * Spread keys over `tags`. The tag is picked by CRC16 of what Redis would hash of the key alone (its
 * own tag if it has one, else the whole key): distinct hot keys fall evenly on the tags, keys grouped
 * on purpose by a tag of their own (the keys of one upload, `strata:mpu:{<id>}`) stay on one slot,
 * and a key's tag depends on nothing but the key and the tag list.
 */
export function createKeySharder(tags: readonly string[] = pickHashTags()): KeySharder {
  if (tags.length === 0) throw new Error('at least one hash tag is needed');
  const frozen = Object.freeze([...tags]);
  return {
    tags: frozen,
    shardedKey: (baseKey) => `${frozen[crc16(hashedPart(baseKey)) % frozen.length]}${baseKey}`,
  };
}

const standardSharder = createKeySharder();

/** `shardedKey` over the tags of the standard 3-master split. */
export function shardedKey(baseKey: string): string {
  return standardSharder.shardedKey(baseKey);
}
