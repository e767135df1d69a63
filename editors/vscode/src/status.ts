import * as vscode from "vscode";

export type ServerState = "starting" | "running" | "stopped" | "failed";

/**
 * The status bar item: the server's state, and how many memlint findings the active
 * editor's file has. Clicking it opens memlint's output.
 */
export class StatusItem implements vscode.Disposable {
    private readonly item: vscode.StatusBarItem;
    private readonly subscriptions: vscode.Disposable[] = [];
    private state: ServerState = "starting";
    private version: string | undefined;
    private reason: string | undefined;
    private command = "memlint";

    constructor() {
        this.item = vscode.window.createStatusBarItem("memlint.status", vscode.StatusBarAlignment.Right, 100);
        this.item.name = "memlint";
        this.item.command = "memlint.showOutput";
        this.subscriptions.push(
            vscode.window.onDidChangeActiveTextEditor(() => this.render()),
            vscode.languages.onDidChangeDiagnostics((event) => {
                const active = vscode.window.activeTextEditor?.document.uri.toString();
                if (active !== undefined && event.uris.some((uri) => uri.toString() === active)) {
                    this.render();
                }
            }),
        );
        this.render();
        this.item.show();
    }

    setCommand(command: string): void {
        this.command = command;
    }

    setState(state: ServerState, version?: string, reason?: string): void {
        this.state = state;
        this.version = version;
        this.reason = reason;
        this.render();
    }

    /** Findings memlint reports for the active editor's file; undefined when no editor is active. */
    activeFindings(): number | undefined {
        const editor = vscode.window.activeTextEditor;
        if (editor === undefined) {
            return undefined;
        }
        return vscode.languages.getDiagnostics(editor.document.uri).filter((d) => d.source === "memlint").length;
    }

    /** The text shown, exposed so tests can read what a user would see. */
    get text(): string {
        return this.item.text;
    }

    private render(): void {
        const findings = this.activeFindings();
        switch (this.state) {
            case "starting":
                this.item.text = "$(sync~spin) memlint";
                break;
            case "running":
                this.item.text =
                    findings === undefined || findings === 0 ? "$(check) memlint" : `$(warning) memlint: ${findings}`;
                break;
            case "stopped":
                this.item.text = "$(circle-slash) memlint";
                break;
            case "failed":
                this.item.text = "$(error) memlint";
                break;
        }
        const lines = [`memlint server: ${this.state}${this.version ? ` (${this.version})` : ""}`, `Executable: ${this.command}`];
        if (this.state === "running" && findings !== undefined) {
            lines.push(`${findings} finding${findings === 1 ? "" : "s"} in this file`);
        }
        if (this.reason !== undefined) {
            lines.push(this.reason);
        }
        lines.push("Click to show memlint's output.");
        this.item.tooltip = lines.join("\n");
        this.item.backgroundColor =
            this.state === "failed" ? new vscode.ThemeColor("statusBarItem.errorBackground") : undefined;
    }

    dispose(): void {
        for (const subscription of this.subscriptions) {
            subscription.dispose();
        }
        this.item.dispose();
    }
}
