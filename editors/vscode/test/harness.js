"use strict";
// Loads the BUILT extension (out/extension.js, what the .vsix ships) with `require('vscode')`
// answered by ./vscode-stub.js, and activates it as VS Code would.

const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");
const Module = require("node:module");

const EXTENSION_ROOT = path.resolve(__dirname, "..");
const REPO_ROOT = path.resolve(EXTENSION_ROOT, "..", "..");
const BUNDLE = path.join(EXTENSION_ROOT, "out", "extension.js");
const STUB = path.join(__dirname, "vscode-stub.js");

const originalResolve = Module._resolveFilename;
Module._resolveFilename = function (request, ...rest) {
    if (request === "vscode") {
        return STUB;
    }
    return originalResolve.call(this, request, ...rest);
};

const vscode = require("vscode");
const editor = vscode.__editor;
editor.loadConfigurationDefaults(path.join(EXTENSION_ROOT, "package.json"));

function memlintBinary() {
    const bin = process.env.MEMLINT_BIN ? path.resolve(process.env.MEMLINT_BIN) : path.join(REPO_ROOT, "target", "debug", "memlint");
    if (!fs.existsSync(bin)) {
        throw new Error(`memlint binary not found at ${bin}: build it (cargo build -p memlint) or set MEMLINT_BIN`);
    }
    return bin;
}

/** A fresh workspace folder holding copies of the named fixtures. */
function makeWorkspace(...fixtures) {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "memlint-vscode-test-"));
    for (const name of fixtures) {
        fs.copyFileSync(path.join(__dirname, "fixtures", name), path.join(dir, name));
    }
    editor.addWorkspaceFolder(dir);
    return dir;
}

function activate() {
    if (!fs.existsSync(BUNDLE)) {
        throw new Error(`${BUNDLE} is missing: run npm run compile first`);
    }
    const extension = require(BUNDLE);
    const context = {
        subscriptions: [],
        extensionPath: EXTENSION_ROOT,
        extensionUri: vscode.Uri.file(EXTENSION_ROOT),
        asAbsolutePath: (relative) => path.join(EXTENSION_ROOT, relative),
        extensionMode: 3, // ExtensionMode.Test
        environmentVariableCollection: { replace() {}, append() {}, prepend() {}, get() {}, forEach() {}, delete() {}, clear() {} },
    };
    const api = extension.activate(context);
    return {
        api,
        context,
        async deactivate() {
            await extension.deactivate();
            for (const disposable of context.subscriptions) {
                disposable.dispose();
            }
        },
    };
}

/** Polls `predicate` every 25 ms until it returns a truthy value, or fails after `ms`. */
async function waitFor(what, predicate, ms = 20000) {
    const deadline = Date.now() + ms;
    for (;;) {
        const value = await predicate();
        if (value) {
            return value;
        }
        if (Date.now() > deadline) {
            throw new Error(`timed out after ${ms} ms waiting for ${what}`);
        }
        await new Promise((resolve) => setTimeout(resolve, 25));
    }
}

function memlintDiagnostics(uri) {
    return vscode.languages.getDiagnostics(uri).filter((d) => d.source === "memlint");
}

function codeOf(diagnostic) {
    return typeof diagnostic.code === "object" ? diagnostic.code.value : diagnostic.code;
}

function outputText() {
    return editor.outputChannels.map((c) => `--- ${c.name}\n${c.text}`).join("\n");
}

module.exports = { vscode, editor, memlintBinary, makeWorkspace, activate, waitFor, memlintDiagnostics, codeOf, outputText, REPO_ROOT };
