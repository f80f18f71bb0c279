// Root hooks of `npm run test:unit` (.mocharc.unit.cjs): server connections and server binaries are
// refused (server-guard.ts). The refused call fails as a refused connection would; and so that a file
// whose code swallowed the refusal cannot pass unnoticed, the run ends with a failure naming each
// file that tried (at the end: a failing root hook mid-run would skip every file after it). In a
// parallel run root hooks run around each file in its worker: the failure then follows that file.
import { refuseServers } from './server-guard.js';

const refusals = new Map<string, Set<string>>();
let currentFile = 'a root hook';
refuseServers((why) => refusals.set(currentFile, (refusals.get(currentFile) ?? new Set()).add(why)));

export const mochaHooks = {
  beforeEach(this: Mocha.Context): void {
    currentFile = this.currentTest?.file ?? currentFile;
  },
  afterAll(): void {
    if (refusals.size === 0) return;
    const lines = [...refusals].map(([file, whys]) => `${file}: ${[...whys].join('; ')}`);
    refusals.clear();
    throw new Error(`test files that need a server ran in test:unit:\n${lines.join('\n')}`);
  },
};
