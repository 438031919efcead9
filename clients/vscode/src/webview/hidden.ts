// What a person reads is what runs: the characters of code that do not show, or that change how the text
// around them is shown ("Trojan Source", CVE-2021-42574), become visible markers on the panel's cards.
//
// A right-to-left override in a string or a comment reorders the rest of its line on the screen (the
// browser's bidi algorithm acts on it wherever it is in the DOM), so a call can read as part of a comment; a
// zero-width space, or a Hangul filler (which Python accepts in a name), shows as nothing; a lone carriage
// return ends a Python line that the card shows as one. The server rates such code at least medium and
// names the characters (server/interpreter_lsp/safety/visible.py); here each one is drawn as `<U+202E>`
// instead of itself. The set is the server's, character for character: keep the two in step.

/**
 * One hidden character per match, exactly as the server's `hidden` finds them. The alternatives:
 * - a carriage return not directly before a line feed (one before a line feed is a Windows line end);
 * - a zero-width joiner, unless the characters directly before and after it are both symbols (So, Sk),
 *   as inside the emoji sequence "👩‍💻" (the symbol before it may carry a variation selector: "❤️‍🔥");
 * - any other character of general category Cc (tab and line feed excepted), Cf, Co, Cn (unassigned), Cs
 *   (a lone surrogate), Zl or Zp, or that is a Default_Ignorable_Code_Point (what renders as nothing:
 *   U+115F, U+3164, U+FFA0, U+180B..U+180F, the tags U+E0000.., ...); except the variation selectors
 *   U+FE00..U+FE0F and U+E0100..U+E01EF ("⚠️" is U+26A0 U+FE0F), which neither hide nor reorder text.
 * The `u` flag makes each match a whole code point, and lets the lookbehind see a whole emoji (a surrogate
 * pair) before a joiner. Unicode's data is the JavaScript engine's: a character assigned in a newer
 * version than the server's Python knows is Cn there and hidden, possibly not here (and the reverse).
 */
const HIDDEN =
  /\r(?!\n)|\u200D(?:(?<![\p{So}\p{Sk}][\uFE00-\uFE0F]?\u200D)|(?![\p{So}\p{Sk}]))|(?![\t\n\r\u200D]|[\uFE00-\uFE0F]|[\u{E0100}-\u{E01EF}])[\p{Cc}\p{Cf}\p{Co}\p{Cn}\p{Cs}\p{Zl}\p{Zp}\p{Default_Ignorable_Code_Point}]/gu;

/** The characters that change the order the text around them is shown in (the server's `_BIDI`). */
const BIDI = /[\u061C\u200E\u200F\u202A-\u202E\u2066-\u2069]/u;

/** How a hidden character is shown, as the server names it in a rating's reason: `<U+202E>`. */
export function marker(char: string): string {
  return `<U+${(char.codePointAt(0) ?? 0).toString(16).toUpperCase().padStart(4, "0")}>`;
}

/** The marker's tooltip: which character, and what it would have done to the display. */
function markerTitle(char: string): string {
  const name = marker(char).slice(1, -1);
  if (char === "\r") return `${name}, a carriage return: Python ends the line here`;
  if (BIDI.test(char)) return `${name}, a character that changes the direction of the text around it`;
  return `${name}, a character that does not show`;
}

/**
 * `text` as HTML (through `escape`), each hidden character replaced by its marker in a `hidden-char` span
 * that the stylesheet paints as a warning: the character itself never reaches the DOM, where it would act
 * on the display. Text without hidden characters comes back as `escape(text)`, unchanged.
 */
export function markHidden(text: string, escape: (text: string) => string): string {
  let html = "";
  let end = 0;
  for (const match of text.matchAll(HIDDEN)) {
    const char = match[0];
    html += `${escape(text.slice(end, match.index))}<span class="hidden-char" title="${markerTitle(char)}">${escape(marker(char))}</span>`;
    end = match.index + char.length;
  }
  return end === 0 ? escape(text) : html + escape(text.slice(end));
}

/**
 * Where the hidden characters of `text` are, in code points (not UTF-16 units): what the server's `hidden`
 * answers, as ../../../hidden-characters.json records it for the tests to compare.
 */
export function hiddenAt(text: string): number[] {
  const at: number[] = [];
  for (const match of text.matchAll(HIDDEN)) at.push([...text.slice(0, match.index)].length);
  return at;
}
