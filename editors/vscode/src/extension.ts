import * as vscode from "vscode";
import {
    DidChangeConfigurationNotification,
    LanguageClient,
    type LanguageClientOptions,
    type ResponseError,
    type ServerOptions,
    State,
    TransportKind,
} from "vscode-languageclient/node";

import { RESTART_SETTINGS, type ServerSettings, findExecutable, readServerSettings, serverCommand } from "./settings";
import { StatusItem } from "./status";

/** What `activate` returns: lets other extensions (and the tests) reach the running client. */
export interface MemlintApi {
    /** The current client, or undefined while none runs (stopped, or it failed to start). */
    readonly client: () => LanguageClient | undefined;
    /** Settles once the latest start (or restart) has finished, successfully or not. */
    readonly started: () => Promise<void>;
}

/**
 * Python files on disk and unsaved, and Python cells of any notebook: VS Code names
 * notebook cells with the `vscode-notebook-cell` scheme, which the notebook filter covers.
 */
export const DOCUMENT_SELECTOR = [
    { scheme: "file", language: "python" },
    { scheme: "untitled", language: "python" },
    { notebook: "*", language: "python" },
];

let client: LanguageClient | undefined;
/** Disposed with the client it was made for (the config-file watcher). */
let clientDisposables: vscode.Disposable[] = [];
let starting: Promise<void> = Promise.resolve();
/** The settings the running server last received. */
let sentSettings: ServerSettings | undefined;
let output: vscode.LogOutputChannel;
let status: StatusItem;

export function activate(context: vscode.ExtensionContext): MemlintApi {
    output = vscode.window.createOutputChannel("memlint", { log: true });
    status = new StatusItem();
    context.subscriptions.push(output, status);

    context.subscriptions.push(
        vscode.commands.registerCommand("memlint.restart", () => restart()),
        vscode.commands.registerCommand("memlint.showOutput", () => output.show(true)),
        vscode.workspace.onDidChangeConfiguration((event) => onConfigurationChanged(event)),
    );

    starting = start();
    return { client: () => client, started: () => starting };
}

export async function deactivate(): Promise<void> {
    await stop();
}

async function start(): Promise<void> {
    const command = serverCommand();
    status.setCommand(command);
    output.info(`Starting \`${command} server\` (memlint.path: "${vscode.workspace.getConfiguration("memlint").get<string>("path", "")}")`);
    const resolved = findExecutable(command);
    if (resolved === undefined) {
        reportMissingExecutable(command);
        return;
    }
    // memlint's CLI accepts the `--stdio` that TransportKind.stdio appends.
    const executable = { command: resolved, args: ["server"], transport: TransportKind.stdio };
    const serverOptions: ServerOptions = { run: executable, debug: executable };
    const watcher = vscode.workspace.createFileSystemWatcher("**/{memlint.toml,pyproject.toml}");
    clientDisposables.push(watcher);
    const clientOptions: LanguageClientOptions = {
        documentSelector: DOCUMENT_SELECTOR,
        initializationOptions: (sentSettings = readServerSettings()),
        outputChannel: output,
        // The server reads memlint.toml / pyproject.toml itself; it is told when they change.
        synchronize: { fileEvents: watcher },
        middleware: {
            workspace: {
                // A server that pulls `workspace/configuration` gets the same shape as the
                // initialization options, not VS Code's raw view (which has `path` and `trace`).
                configuration: async (params, token, next) => {
                    const raw: unknown = await next(params, token);
                    if (!Array.isArray(raw)) {
                        return raw as ResponseError; // the client's own error answer, passed on
                    }
                    const values: unknown[] = raw;
                    return params.items.map((item, i) =>
                        item.section === "memlint" ? readServerSettings() : values[i],
                    );
                },
            },
        },
    };

    const next = new LanguageClient("memlint", "memlint", serverOptions, clientOptions);
    client = next;
    status.setState("starting");
    next.onDidChangeState((event) => {
        if (client !== next) {
            return;
        }
        if (event.newState === State.Running) {
            status.setState("running", next.initializeResult?.serverInfo?.version);
        } else if (event.newState === State.Stopped) {
            status.setState("stopped");
        } else {
            status.setState("starting");
        }
    });

    try {
        await next.start();
    } catch (error) {
        if (client === next) {
            client = undefined;
        }
        // vscode-languageclient has already shown its own error message with "Go to output".
        const reason = error instanceof Error ? error.message : String(error);
        output.error(`Could not start \`${resolved} server\`: ${reason}`);
        status.setState("failed", undefined, reason);
    }
}

function reportMissingExecutable(command: string): void {
    const reason =
        command === "memlint"
            ? "`memlint` was not found on PATH"
            : `\`${command}\` (from memlint.path) is not an executable file`;
    output.error(`Could not start \`${command} server\`: ${reason}.`);
    status.setState("failed", undefined, reason);
    void vscode.window
        .showErrorMessage(
            `memlint: ${reason}. Install memlint or set "memlint.path" to the memlint executable.`,
            "Open Settings",
            "Show Output",
        )
        .then((choice) => {
            if (choice === "Open Settings") {
                void vscode.commands.executeCommand("workbench.action.openSettings", "memlint.path");
            } else if (choice === "Show Output") {
                output.show(true);
            }
        });
}

async function stop(): Promise<void> {
    const current = client;
    client = undefined;
    for (const disposable of clientDisposables) {
        disposable.dispose();
    }
    clientDisposables = [];
    if (current !== undefined) {
        // A server that is already gone cannot answer `shutdown`; stopping must still finish.
        await current.stop(2000).catch((error: unknown) => output.error(`Stopping the server: ${String(error)}`));
        await current.dispose().catch(() => undefined);
    }
}

async function restart(): Promise<void> {
    // Let an in-flight start settle first so two servers never run at once.
    await starting.catch(() => undefined);
    starting = stop().then(() => start());
    await starting;
}

function onConfigurationChanged(event: vscode.ConfigurationChangeEvent): void {
    if (!event.affectsConfiguration("memlint")) {
        return;
    }
    if (RESTART_SETTINGS.some((section) => event.affectsConfiguration(section))) {
        output.info("memlint.path changed: restarting the server");
        void restart();
        return;
    }
    const current = client;
    if (current === undefined || !current.isRunning()) {
        return;
    }
    const settings = readServerSettings();
    // The server merges a notification into what it has, keeping a setting sent as null; an
    // emptied `memlint.select` (null: "no override") therefore needs a fresh server.
    if (sentSettings !== undefined && sentSettings.select !== null && settings.select === null) {
        void restart();
        return;
    }
    sentSettings = settings;
    void current
        .sendNotification(DidChangeConfigurationNotification.type, { settings: { memlint: settings } })
        .catch((error: unknown) => output.error(`Sending settings: ${String(error)}`));
}
