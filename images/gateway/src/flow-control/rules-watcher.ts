import { watch, type FSWatcher } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import type { Logger } from '../../../service-kit/src/index.js';
import { contentHash, parseFlowRules, type FlowRules } from './rules.js';

export type ReloadOutcome = 'applied' | 'rejected' | 'unchanged' | 'unreadable';

export interface RulesWatcherOptions {
  file: string;
  logger: Logger;
  /** Called with each new valid rule set (not for the initial one, which `current()` returns). */
  onChange: (rules: FlowRules) => void;
  /** Called after every reload attempt, for metrics. */
  onReload?: (outcome: ReloadOutcome) => void;
  /** Quiet time after the last file-system event before reading (a swap is several events). */
  debounceMs?: number;
  /** Re-read this often even without events (file systems that do not report them); 0 = never. */
  pollMs?: number;
}

export interface RulesWatcher {
  current(): FlowRules;
  /** Read the file now (what a file-system event triggers). */
  reload(): Promise<ReloadOutcome>;
  close(): void;
}

/**
 * Keep the rules of `file` current without a restart. Kubernetes updates a mounted ConfigMap by
 * writing a new timestamped directory and swapping the `..data` symlink, so the file's inode never
 * changes and a watch on the file itself would miss it: we watch the directory, debounce, read
 * through the symlinks and compare a content hash. A malformed file is logged and ignored; the
 * previous rules stay in force. The initial read must succeed (a gateway without its rules would
 * silently run unprotected).
 */
export async function watchRules(opts: RulesWatcherOptions): Promise<RulesWatcher> {
  const { file, logger, onChange } = opts;
  const debounceMs = opts.debounceMs ?? 200;
  const initialText = await readFile(file, 'utf8');
  let rules = parseFlowRules(initialText);
  // Hash of the last content we acted on (applied or rejected), so one bad file logs once.
  let lastHash = contentHash(initialText);
  logger.info({ file, hash: lastHash.slice(0, 12) }, 'flow-control rules loaded');

  let running: Promise<ReloadOutcome> | undefined;
  let again = false;
  const readOnce = async (): Promise<ReloadOutcome> => {
    let text: string;
    try {
      text = await readFile(file, 'utf8');
    } catch (err) {
      logger.warn({ file, err: (err as Error).message }, 'flow-control rules unreadable; keeping the previous rules');
      return 'unreadable';
    }
    const hash = contentHash(text);
    if (hash === lastHash) return 'unchanged';
    lastHash = hash;
    try {
      rules = parseFlowRules(text);
    } catch (err) {
      logger.error({ file, hash: hash.slice(0, 12), err: (err as Error).message }, 'flow-control rules rejected; keeping the previous rules');
      return 'rejected';
    }
    logger.info({ file, hash: hash.slice(0, 12) }, 'flow-control rules reloaded');
    onChange(rules);
    return 'applied';
  };
  // One read at a time; events during a read cause one more read afterwards.
  const reload = (): Promise<ReloadOutcome> => {
    if (running) {
      again = true;
      return running;
    }
    running = (async () => {
      let outcome: ReloadOutcome;
      do {
        again = false;
        outcome = await readOnce();
        opts.onReload?.(outcome);
      } while (again);
      running = undefined;
      return outcome;
    })();
    return running;
  };

  let timer: NodeJS.Timeout | undefined;
  const schedule = () => {
    clearTimeout(timer);
    timer = setTimeout(() => void reload(), debounceMs);
  };
  let watcher: FSWatcher | undefined;
  try {
    watcher = watch(path.dirname(file), { persistent: false }, schedule);
    watcher.on('error', (err) => logger.warn({ file, err: err.message }, 'flow-control rules watch failed; polling only'));
  } catch (err) {
    logger.warn({ file, err: (err as Error).message }, 'cannot watch the rules directory; polling only');
  }
  const pollMs = opts.pollMs ?? 10_000;
  const poll = pollMs > 0 ? setInterval(() => void reload(), pollMs) : undefined;
  poll?.unref();

  return {
    current: () => rules,
    reload,
    close: () => {
      clearTimeout(timer);
      clearInterval(poll);
      watcher?.close();
    },
  };
}
