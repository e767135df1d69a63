import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import * as vscode from "vscode";

/**
 * The settings memlint's server understands, in the shape it reads from
 * `initializationOptions` and from `workspace/didChangeConfiguration`'s `settings`.
 */
export interface ServerSettings {
    /** Null when the setting is empty: an empty selection would mean "no rules" to the server. */
    select: string[] | null;
    ignore: string[];
    unsafeFixes: boolean;
    /**
     * Absolute path, or "" to discover the configuration file as the CLI does ("" rather
     * than null: the server keeps its previous value for a setting sent as null).
     */
    configPath: string;
}

/** The settings whose change needs a new server process rather than a notification. */
export const RESTART_SETTINGS = ["memlint.path"];

export function readServerSettings(): ServerSettings {
    const config = vscode.workspace.getConfiguration("memlint");
    const configPath = config.get<string>("configPath", "").trim();
    const select = stringList(config.get<unknown>("select"));
    return {
        select: select.length === 0 ? null : select,
        ignore: stringList(config.get<unknown>("ignore")),
        unsafeFixes: config.get<boolean>("unsafeFixes", false) === true,
        configPath: configPath === "" ? "" : resolveUserPath(configPath, true),
    };
}

/** The executable to start: `memlint.path` when set, else `memlint` found on PATH by spawn. */
export function serverCommand(): string {
    const configured = vscode.workspace.getConfiguration("memlint").get<string>("path", "").trim();
    return configured === "" ? "memlint" : resolveUserPath(configured);
}

/**
 * Expands `~` and `${workspaceFolder}`, and anchors a relative path at the first workspace
 * folder: a server process's working directory is not something users can see or set.
 * A bare executable name (no separator) stays bare unless `anchorBare`, so spawn searches PATH.
 */
export function resolveUserPath(value: string, anchorBare = false): string {
    const folder = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
    let expanded = value;
    if (folder !== undefined) {
        expanded = expanded.replace(/\$\{workspaceFolder\}/g, folder);
    }
    if (expanded === "~" || expanded.startsWith("~/")) {
        expanded = path.join(os.homedir(), expanded.slice(1));
    }
    if (!path.isAbsolute(expanded) && folder !== undefined && (anchorBare || expanded.includes(path.sep))) {
        expanded = path.join(folder, expanded);
    }
    return expanded;
}

function stringList(value: unknown): string[] {
    if (!Array.isArray(value)) {
        return [];
    }
    return value.filter((item): item is string => typeof item === "string" && item.trim() !== "").map((s) => s.trim());
}

/**
 * Where `command` would be run from: itself when it names a path, else the first match on
 * PATH (as spawn searches it). Undefined when there is no such executable file: checked up
 * front so the user gets one clear message instead of the client's connection errors.
 */
export function findExecutable(command: string, env: NodeJS.ProcessEnv = process.env): string | undefined {
    const candidates =
        command.includes("/") || command.includes(path.sep)
            ? [command]
            : (env.PATH ?? "")
                  .split(path.delimiter)
                  .filter((dir) => dir !== "")
                  .flatMap((dir) => executableNames(command, env).map((name) => path.join(dir, name)));
    return candidates.find((candidate) => isExecutableFile(candidate));
}

function executableNames(command: string, env: NodeJS.ProcessEnv): string[] {
    if (process.platform !== "win32") {
        return [command];
    }
    const extensions = (env.PATHEXT ?? ".EXE;.CMD;.BAT;.COM").split(";").filter((e) => e !== "");
    return [command, ...extensions.map((ext) => command + ext.toLowerCase())];
}

function isExecutableFile(candidate: string): boolean {
    try {
        if (!fs.statSync(candidate).isFile()) {
            return false;
        }
        fs.accessSync(candidate, fs.constants.X_OK);
        return true;
    } catch {
        return false;
    }
}
