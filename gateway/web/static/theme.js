// Mirror theme: light, dark, or the system's (the default), shared by the
// chat page and the Monitor.
//
// Loaded as a classic script in <head>, before the body is parsed, so the
// chosen theme is on <html> before the first paint (a module runs after
// parsing and would flash the other theme). It touches nothing but <html>,
// the highlight.js style sheets and the toggle buttons.
//
// DOM contract:
//   <html data-theme="light|dark">   the theme in effect; style.css keys its
//                                    dark palette on it
//   <html data-theme-choice="system|light|dark">  what the person chose
//   button[data-theme-toggle]        cycles system → light → dark; its
//                                    .theme-label shows the choice
//   link[data-scheme="light|dark"]   style sheets for one theme only (the
//                                    highlight.js themes): enabled by the
//                                    theme in effect, not by the system's
// The choice is kept in localStorage under "mirror.theme"; "system" follows
// prefers-color-scheme live, and other tabs follow a change at once. A
// "mirror:theme" event on document tells scripts that draw with colours
// (the Monitor's charts) to draw again.
(() => {
  'use strict';
  const KEY = 'mirror.theme';
  const CHOICES = ['system', 'light', 'dark'];
  const NAMES = { system: 'System', light: 'Light', dark: 'Dark' };
  const dark = window.matchMedia('(prefers-color-scheme: dark)');
  const root = document.documentElement;

  function stored() {
    try {
      const v = localStorage.getItem(KEY);
      return CHOICES.includes(v) ? v : 'system';
    } catch {
      return 'system'; // storage disabled: the system's theme, not an error
    }
  }

  function apply(choice) {
    const theme = choice === 'system' ? (dark.matches ? 'dark' : 'light') : choice;
    const changed = root.dataset.theme !== theme;
    root.dataset.theme = theme;
    root.dataset.themeChoice = choice;
    for (const link of document.querySelectorAll('link[data-scheme]')) {
      link.media = link.dataset.scheme === theme ? 'all' : 'not all';
    }
    for (const b of document.querySelectorAll('[data-theme-toggle]')) label(b, choice);
    if (changed) document.dispatchEvent(new CustomEvent('mirror:theme', { detail: { theme, choice } }));
  }

  function label(button, choice) {
    const next = CHOICES[(CHOICES.indexOf(choice) + 1) % CHOICES.length];
    const text = button.querySelector('.theme-label');
    if (text) text.textContent = NAMES[choice];
    button.setAttribute('aria-label', 'Theme: ' + NAMES[choice] + '. Switch to ' + NAMES[next]);
    button.title = 'Theme: ' + NAMES[choice] + ' (switch to ' + NAMES[next] + ')';
  }

  function choose(choice) {
    try {
      if (choice === 'system') localStorage.removeItem(KEY);
      else localStorage.setItem(KEY, choice);
    } catch {
      // Not remembered, but the page still switches.
    }
    apply(choice);
  }

  apply(stored());
  dark.addEventListener('change', () => apply(root.dataset.themeChoice || 'system'));
  window.addEventListener('storage', (e) => {
    if (e.key === KEY || e.key === null) apply(stored());
  });
  // The body is not parsed yet: the buttons and the style sheets after this
  // script are found once it is.
  document.addEventListener('DOMContentLoaded', () => {
    apply(root.dataset.themeChoice || 'system');
    for (const b of document.querySelectorAll('[data-theme-toggle]')) {
      b.addEventListener('click', () => {
        const cur = root.dataset.themeChoice || 'system';
        choose(CHOICES[(CHOICES.indexOf(cur) + 1) % CHOICES.length]);
      });
    }
  });
})();
