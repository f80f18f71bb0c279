import { chromium, type BrowserContext } from 'playwright-core';

type LaunchOptions = Parameters<typeof chromium.launchPersistentContext>[1];

/** Flags that keep headless Chromium quiet and self-contained on a machine without a display or network. */
const QUIET_FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** Debian's Chromium, headless, with its profile in `profileDir` (a fresh directory per run). */
export function launchChromium(profileDir: string, options: Omit<LaunchOptions, 'executablePath' | 'headless' | 'args'> = {}): Promise<BrowserContext> {
  return chromium.launchPersistentContext(profileDir, { executablePath: '/usr/bin/chromium', headless: true, args: QUIET_FLAGS, ...options });
}
