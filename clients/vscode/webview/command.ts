/**
 * A shell command as a permission question shows it: whole, never shortened — runs of whitespace as a
 * visible marker (`⟨4,200 spaces⟩`), control and invisible formatting characters escaped (`\x1b`,
 * `\u202e`), line breaks kept. A hidden tail (a command pushed off screen by spaces, or hidden by a
 * terminal escape) is exactly how an attacker slips a command past a reviewer.
 *
 * Must not: drop or shorten any character of the command.
 */

export type CommandPart = { kind: "text" | "gap" | "escape"; text: string };

/** A run of this many whitespace characters (or more) becomes a marker. */
export const GAP_MIN = 8;

const SPACE = /[ \t\u00a0\u1680\u2000-\u200a\u202f\u205f\u3000]/;
/** Characters shown escaped: C0 controls but \n (and \t inside text), DEL, C1, and invisible or
 * direction-changing formatting characters; also every space that is not an ASCII space or tab. */
const ESCAPE = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u00ad\u00a0\u1680\u180e\u2000-\u200f\u2028-\u202f\u205f-\u2064\u2066-\u206f\u3000\ufeff\ufff9-\ufffb]/;

function escape(ch: string): string {
  const code = ch.codePointAt(0)!;
  if (ch === "\r") return "\\r";
  return code < 0x100 ? `\\x${code.toString(16).padStart(2, "0")}` : `\\u${code.toString(16).padStart(4, "0")}`;
}

function gapName(run: string): string {
  const n = run.length.toLocaleString("en-US");
  if (/^ +$/.test(run)) return `⟨${n} spaces⟩`;
  if (/^\t+$/.test(run)) return `⟨${n} tabs⟩`;
  return `⟨${n} whitespace characters⟩`;
}

/** The command cut into plain text, whitespace markers and escapes; joined back (markers and escapes
 * decoded) it is the command. */
export function commandParts(command: string): CommandPart[] {
  const parts: CommandPart[] = [];
  let text = "";
  const flush = () => {
    if (text) parts.push({ kind: "text", text });
    text = "";
  };
  const chars = [...command];
  for (let i = 0; i < chars.length; ) {
    if (SPACE.test(chars[i]!)) {
      let j = i;
      while (j < chars.length && SPACE.test(chars[j]!)) j++;
      const run = chars.slice(i, j).join("");
      if (run.length >= GAP_MIN) {
        flush();
        parts.push({ kind: "gap", text: gapName(run) });
        i = j;
        continue;
      }
    }
    const ch = chars[i]!;
    if (ESCAPE.test(ch)) {
      flush();
      parts.push({ kind: "escape", text: escape(ch) });
    } else {
      text += ch;
    }
    i++;
  }
  flush();
  return parts;
}
