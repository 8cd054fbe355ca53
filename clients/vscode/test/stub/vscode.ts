// A small stand-in for the `vscode` module in unit tests: documents held in memory (text, version,
// dirty), `workspace.applyEdit` applying text replacements, and an in-memory file system. Only what
// the modules under test use. Not a mock of behaviour under test: proposals and buffers run for real.
import { applyToText, offsetAt } from "../../src/proposalModel";

export class Uri {
  private constructor(readonly scheme: string, readonly path: string, readonly fragment = "", readonly query = "") {}
  static file(path: string): Uri {
    return new Uri("file", path);
  }
  static parse(value: string): Uri {
    const m = /^([a-z][\w+.-]*):(?:\/\/[^/]*)?([^?#]*)(?:\?([^#]*))?(?:#(.*))?$/i.exec(value);
    if (!m) throw new Error(`bad uri ${value}`);
    return new Uri(m[1]!, decodeURIComponent(m[2]!), m[4] ?? "", m[3] ?? "");
  }
  static from(c: { scheme: string; path: string; query?: string }): Uri {
    return new Uri(c.scheme, c.path, "", c.query ?? "");
  }
  static joinPath(base: Uri, ...parts: string[]): Uri {
    return new Uri(base.scheme, [base.path, ...parts].join("/"));
  }
  get fsPath(): string {
    return this.path;
  }
  with(c: { fragment?: string }): Uri {
    return new Uri(this.scheme, this.path, c.fragment ?? this.fragment, this.query);
  }
  toString(): string {
    const base = this.scheme === "file" ? `file://${encodeURI(this.path)}` : `${this.scheme}:${this.path}${this.query ? `?${this.query}` : ""}`;
    return this.fragment ? `${base}#${this.fragment}` : base;
  }
}

export class Position {
  constructor(readonly line: number, readonly character: number) {}
}

export class Range {
  readonly start: Position;
  readonly end: Position;
  constructor(a: number | Position, b: number | Position, c?: number, d?: number) {
    if (typeof a === "number") {
      this.start = new Position(a, b as number);
      this.end = new Position(c!, d!);
    } else {
      this.start = a;
      this.end = b as Position;
    }
  }
}

export class StubDocument {
  isClosed = false;
  saves = 0;
  /** As VS Code names it (`TextDocument.encoding`). */
  encoding = "utf8";
  constructor(readonly uri: Uri, public text: string, public version = 1, public isDirty = false) {}
  getText(): string {
    return this.text;
  }
  get lineCount(): number {
    return this.text.split(/\r\n|\n|\r/).length;
  }
  lineAt(line: number): { text: string } {
    return { text: this.text.split(/\r\n|\n|\r/)[line] ?? "" };
  }
  positionAt(offset: number): Position {
    const before = this.text.slice(0, offset).split(/\r\n|\n|\r/);
    return new Position(before.length - 1, before[before.length - 1]!.length);
  }
  async save(): Promise<boolean> {
    hooks.beforeSave?.(this); // a save participant (format on save)
    this.saves++;
    this.isDirty = false;
    if (rawFiles.has(this.uri.path)) rawFiles.set(this.uri.path, new TextEncoder().encode(this.text)); // as VS Code: UTF-8, U+FFFD and all
    else files.set(this.uri.path, this.text);
    return true;
  }
}

type Op =
  | { type: "replace"; uri: Uri; range: Range; text: string }
  | { type: "create"; uri: Uri }
  | { type: "rename"; uri: Uri; newUri: Uri }
  | { type: "delete"; uri: Uri };

export class WorkspaceEdit {
  readonly ops: Op[] = [];
  replace(uri: Uri, range: Range, text: string): void {
    this.ops.push({ type: "replace", uri, range, text });
  }
  insert(uri: Uri, pos: Position, text: string): void {
    this.ops.push({ type: "replace", uri, range: new Range(pos, pos), text });
  }
  createFile(uri: Uri): void {
    this.ops.push({ type: "create", uri });
  }
  renameFile(uri: Uri, newUri: Uri): void {
    this.ops.push({ type: "rename", uri, newUri });
  }
  deleteFile(uri: Uri): void {
    this.ops.push({ type: "delete", uri });
  }
}

export class FileSystemError extends Error {
  constructor(readonly code: string) {
    super(code);
  }
}

/** The disk: path → text. */
export const files = new Map<string, string>();
/** The disk, for files whose bytes are not UTF-8: path → bytes (read before `files`). */
export const rawFiles = new Map<string, Uint8Array>();
/** Directories on disk (a path there is not a file), and files that cannot be read (`NoPermissions`). */
export const dirs = new Set<string>();
export const unreadable = new Set<string>();
export enum FileChangeType {
  Changed = 1,
  Created = 2,
  Deleted = 3,
}
export enum FileType {
  File = 1,
  Directory = 2,
}
/** Each file's mtime on disk (ms; 0 when not set). */
export const mtimes = new Map<string, number>();
/** Runs after each applied edit (a formatter or another extension changing the text). */
export const hooks: { afterApply?: (doc: StubDocument) => void; beforeSave?: (doc: StubDocument) => void } = {};

export const workspace = {
  textDocuments: [] as StubDocument[],
  applyEditCalls: 0,
  fs: {
    async readFile(uri: Uri): Promise<Uint8Array> {
      if (dirs.has(uri.path)) throw new FileSystemError("FileIsADirectory");
      if (unreadable.has(uri.path)) throw new FileSystemError("NoPermissions");
      const raw = rawFiles.get(uri.path);
      if (raw !== undefined) return raw;
      const t = files.get(uri.path);
      if (t === undefined) throw new FileSystemError("FileNotFound");
      return new TextEncoder().encode(t);
    },
    async writeFile(uri: Uri, data: Uint8Array): Promise<void> {
      if (rawFiles.has(uri.path)) rawFiles.set(uri.path, data); // a test that set bytes reads bytes back
      files.set(uri.path, new TextDecoder().decode(data));
    },
    async stat(uri: Uri): Promise<{ mtime: number; type: FileType }> {
      if (dirs.has(uri.path)) return { mtime: mtimes.get(uri.path) ?? 0, type: FileType.Directory };
      if (!files.has(uri.path) && !rawFiles.has(uri.path)) throw new FileSystemError("FileNotFound");
      return { mtime: mtimes.get(uri.path) ?? 0, type: FileType.File };
    },
  },
  async openTextDocument(uri: Uri): Promise<StubDocument> {
    const open = workspace.textDocuments.find((d) => d.uri.toString() === uri.toString());
    if (open) return open;
    const raw = rawFiles.get(uri.path);
    const text = raw !== undefined ? new TextDecoder().decode(raw) : files.get(uri.path); // VS Code's utf8: U+FFFD for bad bytes
    if (text === undefined) throw new Error(`no such file ${uri.path}`);
    const doc = new StubDocument(uri, text, 1, false);
    workspace.textDocuments.push(doc);
    return doc;
  },
  async applyEdit(edit: WorkspaceEdit): Promise<boolean> {
    workspace.applyEditCalls++;
    const byDoc = new Map<StubDocument, { range: Range; newText: string }[]>();
    for (const op of edit.ops) {
      if (op.type === "create") {
        files.set(op.uri.path, "");
        workspace.textDocuments.push(new StubDocument(op.uri, "", 1, false));
      } else if (op.type === "replace") {
        const doc = await workspace.openTextDocument(op.uri);
        byDoc.set(doc, [...(byDoc.get(doc) ?? []), { range: op.range, newText: op.text }]);
      }
    }
    for (const [doc, edits] of byDoc) {
      doc.text = applyToText(doc.text, edits);
      doc.version++;
      doc.isDirty = true;
      hooks.afterApply?.(doc);
    }
    return true;
  },
  registerTextDocumentContentProvider: () => ({ dispose() {} }),
  asRelativePath: (u: Uri) => u.path,
  /** `agentServer.*` user settings by their short key ("path", "args" …); unset ones get their default. */
  settings: {} as Record<string, unknown>,
  /** The same from the workspace (`.vscode/settings.json`) and the folder: `get` merges them over the user's, as VS Code does for a window-scoped setting. */
  workspaceSettings: {} as Record<string, unknown>,
  folderSettings: {} as Record<string, unknown>,
  getConfiguration: () => ({
    get: <T>(k: string, d: T) => {
      for (const layer of [workspace.folderSettings, workspace.workspaceSettings, workspace.settings]) if (k in layer) return layer[k] as T;
      return d;
    },
    inspect: <T>(k: string) => ({
      key: `agentServer.${k}`,
      defaultValue: undefined as T | undefined,
      globalValue: workspace.settings[k] as T | undefined,
      workspaceValue: workspace.workspaceSettings[k] as T | undefined,
      workspaceFolderValue: workspace.folderSettings[k] as T | undefined,
    }),
  }),
  workspaceFolders: undefined as { uri: Uri }[] | undefined,
  // what activate() registers (the panel's tests run the whole extension)
  configListeners: [] as ((e: { affectsConfiguration(section: string): boolean }) => unknown)[],
  onDidChangeConfiguration(l: (e: { affectsConfiguration(section: string): boolean }) => unknown) {
    workspace.configListeners.push(l);
    return { dispose() {} };
  },
  /** Fires onDidChangeConfiguration for `agentServer.KEY` (as VS Code does after any layer changed) and waits for the listeners. */
  async changed(key: string): Promise<void> {
    const full = `agentServer.${key}`;
    await Promise.all(workspace.configListeners.map((l) => l({ affectsConfiguration: (s: string) => full === s || full.startsWith(`${s}.`) })));
  },
  onDidChangeTextDocument: () => ({ dispose() {} }),
  onDidOpenTextDocument: () => ({ dispose() {} }),
  onDidSaveTextDocument: () => ({ dispose() {} }),
  onDidCloseTextDocument: () => ({ dispose() {} }),
  folderListeners: [] as (() => unknown)[],
  onDidChangeWorkspaceFolders(l: () => unknown) {
    workspace.folderListeners.push(l);
    return { dispose() {} };
  },
  registerFileSystemProvider: () => ({ dispose() {} }),
  createFileSystemWatcher: () => ({ onDidDelete: () => ({ dispose() {} }), onDidCreate: () => ({ dispose() {} }), onDidChange: () => ({ dispose() {} }), dispose() {} }),
};

export const commands = {
  executed: [] as unknown[][],
  async executeCommand(...args: unknown[]) {
    commands.executed.push(args);
  },
  /** Commands registered by the extension, by id (tests run them as the palette would). */
  registered: new Map<string, (...args: unknown[]) => unknown>(),
  registerCommand(id: string, f: (...args: unknown[]) => unknown) {
    commands.registered.set(id, f);
    return { dispose() {} };
  },
};
export const window = {
  tabGroups: {
    all: [] as { tabs: { input: unknown; label: string }[] }[],
    activeTabGroup: { activeTab: undefined },
    /** The tabs closed by the extension (in order). */
    closed: [] as unknown[],
    close: async (tabs: unknown) => (window.tabGroups.closed.push(...(Array.isArray(tabs) ? tabs : [tabs])), true),
    onDidChangeTabs: () => ({ dispose() {} }),
  },
  /** Webview view providers registered by id (the panel's tests resolve them with a fake view). */
  providers: new Map<string, unknown>(),
  registerWebviewViewProvider(id: string, provider: unknown) {
    window.providers.set(id, provider);
    return { dispose() {} };
  },
  createOutputChannel: () => ({ appendLine() {}, show() {}, dispose() {} }),
  /** The status bar items made (the tests read their text). */
  statusItems: [] as { text: string; tooltip: string }[],
  createStatusBarItem: () => {
    const item = { text: "", tooltip: "", name: "", command: "", accessibilityInformation: undefined, show() {}, hide() {}, dispose() {} };
    window.statusItems.push(item);
    return item;
  },
  activeTextEditor: undefined,
  /** What the tests answer to QuickPicks (an item's `value` or `label`) and to warnings (a button, or none: dismissed), in order. */
  quickPickAnswers: [] as string[],
  warningAnswers: [] as (string | undefined)[],
  /** The warnings shown (their text). */
  warnings: [] as string[],
  async showQuickPick<T extends { label: string; value?: string }>(items: T[]): Promise<T | undefined> {
    const want = window.quickPickAnswers.shift();
    return items.find((i) => i.value === want || i.label === want);
  },
  async showWarningMessage(message: string): Promise<string | undefined> {
    window.warnings.push(message);
    return window.warningAnswers.shift();
  },
  onDidStartTerminalShellExecution: () => ({ dispose() {} }),
  onDidChangeTextEditorSelection: () => ({ dispose() {} }),
  /** Terminals made (the tests close them with `closeTerminal`), and the listeners of their closing. */
  terminals: [] as { name: string; shown: boolean; show(): void }[],
  terminalClosed: [] as ((t: unknown) => void)[],
  createTerminal(options: { name: string }) {
    const t = { name: options.name, shown: false, show() { t.shown = true; } };
    window.terminals.push(t);
    return t;
  },
  onDidCloseTerminal(f: (t: unknown) => void) {
    window.terminalClosed.push(f);
    return { dispose() { window.terminalClosed = window.terminalClosed.filter((x) => x !== f); } };
  },
  closeTerminal(t: unknown) {
    for (const f of [...window.terminalClosed]) f(t);
  },
  /** Information messages shown (their text). */
  infos: [] as string[],
  async showInformationMessage(message: string): Promise<string | undefined> {
    window.infos.push(message);
    return undefined;
  },
};
export const env = { openExternal: async () => true };
export enum StatusBarAlignment {
  Left = 1,
  Right = 2,
}
export class TabInputTextDiff {
  constructor(readonly original: Uri, readonly modified: Uri) {}
}
export class TabInputText {
  constructor(readonly uri: Uri) {}
}
export class EventEmitter<T> {
  private listeners: ((e: T) => void)[] = [];
  event = (l: (e: T) => void) => {
    this.listeners.push(l);
    return { dispose() {} };
  };
  fire(e: T): void {
    for (const l of this.listeners) l(e);
  }
}
export const Disposable = { from: (...d: { dispose(): void }[]) => ({ dispose: () => d.forEach((x) => x.dispose()) }) };
export const languages = { registerCodeLensProvider: () => ({ dispose() {} }) };

/** Resets documents, disk and hooks between tests. */
export function resetStub(): void {
  files.clear();
  rawFiles.clear();
  dirs.clear();
  unreadable.clear();
  mtimes.clear();
  workspace.textDocuments.length = 0;
  workspace.applyEditCalls = 0;
  hooks.afterApply = undefined;
  hooks.beforeSave = undefined;
  commands.executed.length = 0;
  workspace.settings = {};
  workspace.workspaceSettings = {};
  workspace.folderSettings = {};
  workspace.workspaceFolders = undefined;
  workspace.configListeners.length = 0;
  workspace.folderListeners.length = 0;
  window.providers.clear();
  window.quickPickAnswers.length = 0;
  window.warningAnswers.length = 0;
  window.warnings.length = 0;
  window.terminals.length = 0;
  window.terminalClosed.length = 0;
  window.infos.length = 0;
  window.statusItems.length = 0;
  window.tabGroups.all.length = 0;
  window.tabGroups.closed.length = 0;
}

export { offsetAt };
export enum TextEditorSelectionChangeKind {
  Keyboard = 1,
  Mouse = 2,
  Command = 3,
}
