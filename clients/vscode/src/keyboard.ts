/**
 * Where an editor the agent opens unasked (a proposal's diff, a permission question's diff, a file
 * it created) goes, so that it never takes the keyboard from where the user types: in front when the
 * panel holds the keyboard (its focus is kept), otherwise as a tab behind the active editor of the
 * active group (the editor the user may be typing in stays in front and keeps every keystroke).
 *
 * Must never: put an editor in front of the active editor while the keyboard may be in it (VS Code's
 * `preserveFocus` keeps the focus only in an editor that stays visible: the replaced one's keys went
 * to the workbench's body, lost).
 */

import * as vscode from "vscode";

/** The options of `vscode.diff` / `vscode.open` for an editor opened unasked: `background` (an
 * inactive tab; VS Code opens it active all the same in an empty group) unless the panel has the
 * keyboard or no editor is open in the active group. */
export function openedUnasked(panelFocused: boolean, activeTab: boolean): { preserveFocus: true; background: boolean } {
  return { preserveFocus: true, background: !panelFocused && activeTab };
}

/** Whether the panel's webview holds the keyboard: its own focus and blur events, and any keyboard
 * or mouse move of a text editor's cursor (the user is in that editor). */
export class Keyboard implements vscode.Disposable {
  private panel = false;
  private readonly subscription: vscode.Disposable;

  constructor() {
    this.subscription = vscode.window.onDidChangeTextEditorSelection((e) => {
      if (e.kind === vscode.TextEditorSelectionChangeKind.Keyboard || e.kind === vscode.TextEditorSelectionChangeKind.Mouse) this.panel = false;
    });
  }

  /** The panel's webview gained (`true`) or lost the focus (or went away). */
  panelFocus(focused: boolean): void {
    this.panel = focused;
  }

  /** The options for an editor opened now without the user asking for it. */
  unasked(): { preserveFocus: true; background: boolean } {
    return openedUnasked(this.panel, vscode.window.tabGroups.activeTabGroup.activeTab !== undefined);
  }

  dispose(): void {
    this.subscription.dispose();
  }
}
