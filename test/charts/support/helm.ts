import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { parseAllDocuments } from 'yaml';
import { helmBinary } from './helm-binary.js';

const run = promisify(execFile);

export const CHART_DIR = path.resolve(import.meta.dirname, '../../../charts/strata');

export interface HelmResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Run helm with its own config/cache/data dirs (no state shared with other runs, no network). */
export async function helm(args: string[]): Promise<HelmResult> {
  const home = mkdtempSync(path.join(os.tmpdir(), 'strata-helm-home-'));
  try {
    const { stdout, stderr } = await run(helmBinary(), args, {
      env: { PATH: process.env.PATH, HOME: home, HELM_CACHE_HOME: path.join(home, 'cache'), HELM_CONFIG_HOME: path.join(home, 'config'), HELM_DATA_HOME: path.join(home, 'data') },
      maxBuffer: 64 * 1024 * 1024,
    });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof e.code === 'number' ? e.code : 1, stdout: e.stdout ?? '', stderr: e.stderr ?? String(err) };
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
}

export interface RenderedObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  [key: string]: unknown;
}

/** `helm template` the chart with --set pairs; every rendered document, parsed. */
export async function template(sets: string[] = [], extra: string[] = []): Promise<RenderedObject[]> {
  const result = await helm(['template', 'strata', CHART_DIR, '--namespace', 'strata-system', ...sets.flatMap((s) => ['--set', s]), ...extra]);
  if (result.code !== 0) throw new Error(`helm template failed: ${result.stderr}`);
  return parseAllDocuments(result.stdout)
    .map((d) => d.toJS() as RenderedObject | null)
    .filter((d): d is RenderedObject => d !== null);
}
