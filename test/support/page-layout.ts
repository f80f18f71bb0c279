import type { Page } from 'playwright-core';

/**
 * Controls inside `scope` that overflow the viewport, or that a click at their centre would not reach
 * (covered by a neighbour); the page's own width too. Empty when the page lays out as it should.
 */
export async function layoutProblems(page: Page, scope: string): Promise<string[]> {
  return page.evaluate((selector) => {
    const problems: string[] = [];
    if (document.documentElement.scrollWidth > window.innerWidth)
      problems.push(`page is ${document.documentElement.scrollWidth}px wide in a ${window.innerWidth}px viewport`);
    const controls = [...document.querySelectorAll<HTMLElement>(`${selector} :is(input, textarea, button, select, a[href], [tabindex]:not([tabindex="-1"]))`)];
    for (const control of controls) {
      const name = control.id || control.getAttribute('aria-label') || control.textContent?.trim() || control.tagName;
      if (control.closest('[hidden]') || control.getClientRects().length === 0) continue;
      // Focused first: a skip link is shown only then, as a keyboard user meets it.
      control.focus({ preventScroll: true });
      control.scrollIntoView({ block: 'center', inline: 'center' });
      const box = control.getBoundingClientRect();
      if (box.right > window.innerWidth + 0.5 || box.left < -0.5)
        problems.push(`${name} is outside the viewport (${Math.round(box.left)}..${Math.round(box.right)})`);
      const hit = document.elementFromPoint(box.left + box.width / 2, box.top + box.height / 2);
      const label = control.id ? document.querySelector(`label[for="${control.id}"]`) : null;
      if (!hit || !(control === hit || control.contains(hit) || (label && (label === hit || label.contains(hit))))) {
        problems.push(`${name}: a click at its centre reaches ${hit ? hit.id || hit.className || hit.tagName : 'nothing'}`);
      }
    }
    return problems;
  }, scope);
}
