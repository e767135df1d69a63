"use strict";
// A hand-written stand-in for the `vscode` module, so the built extension and the real
// vscode-languageclient run in plain Node. It implements what the client and the extension
// touch on their paths (start, text sync, push and pull diagnostics, code actions, hover,
// commands, configuration); everything else vscode-languageclient only needs to exist at
// load time (classes it extends) or to register providers the server may advertise.
// Namespaces are wrapped so that reading a member this stub lacks fails loudly (and is
// recorded in `stub.missing`) instead of yielding `undefined` somewhere deep in the client.
//
// The "editor" side (opening a file, applying a quick fix as VS Code does when the user
// picks it) is in `stub.editor`, for the tests to drive.

const fs = require("node:fs");
const nodePath = require("node:path");
const { pathToFileURL, fileURLToPath } = require("node:url");

const missing = new Set();

function strict(name, target) {
    return new Proxy(target, {
        get(obj, prop, receiver) {
            if (typeof prop === "symbol" || prop in obj || prop === "then" || prop === "toJSON") {
                return Reflect.get(obj, prop, receiver);
            }
            missing.add(`${name}.${prop}`);
            throw new Error(`vscode stub: ${name}.${prop} is not implemented`);
        },
    });
}

// ---------------------------------------------------------------------------------------
// Basic types

class Disposable {
    static from(...items) {
        return new Disposable(() => {
            for (const item of items) {
                item?.dispose?.();
            }
        });
    }
    constructor(callOnDispose) {
        this._callOnDispose = callOnDispose;
    }
    dispose() {
        const fn = this._callOnDispose;
        this._callOnDispose = undefined;
        fn?.();
    }
}

class EventEmitter {
    constructor() {
        this._listeners = new Set();
        this.event = (listener, thisArgs, disposables) => {
            const entry = { listener, thisArgs };
            this._listeners.add(entry);
            const disposable = new Disposable(() => this._listeners.delete(entry));
            if (Array.isArray(disposables)) {
                disposables.push(disposable);
            }
            return disposable;
        };
    }
    fire(data) {
        for (const { listener, thisArgs } of [...this._listeners]) {
            try {
                listener.call(thisArgs, data);
            } catch (error) {
                // VS Code isolates listener errors too; surface them without breaking delivery.
                listenerErrors.push(error);
                console.error("vscode stub: listener failed:", error);
            }
        }
    }
    dispose() {
        this._listeners.clear();
    }
}
const listenerErrors = [];

class CancellationError extends Error {
    constructor() {
        super("Canceled");
        this.name = "Canceled";
    }
}

class CancellationTokenSource {
    constructor() {
        this._emitter = new EventEmitter();
        this.token = { isCancellationRequested: false, onCancellationRequested: this._emitter.event };
    }
    cancel() {
        if (!this.token.isCancellationRequested) {
            this.token.isCancellationRequested = true;
            this._emitter.fire(undefined);
        }
    }
    dispose() {
        this._emitter.dispose();
    }
}

// Percent-encodes a URI component as VS Code's Uri.toString() does (RFC 3986 unreserved
// characters stay; `/` stays in paths), so the server sees the URIs VS Code would send.
function encodeComponent(value, keepSlash) {
    let out = "";
    for (const ch of value) {
        if (/[A-Za-z0-9\-._~]/.test(ch) || (keepSlash && ch === "/")) {
            out += ch;
        } else {
            out += [...Buffer.from(ch, "utf8")].map((b) => "%" + b.toString(16).toUpperCase().padStart(2, "0")).join("");
        }
    }
    return out;
}

class Uri {
    constructor(scheme, authority, path, query, fragment) {
        this.scheme = scheme;
        this.authority = authority ?? "";
        this.path = path ?? "";
        this.query = query ?? "";
        this.fragment = fragment ?? "";
    }
    static file(fsPath) {
        return new Uri("file", "", nodePath.resolve(fsPath));
    }
    static parse(value) {
        const match = /^([a-zA-Z][\w+.-]*):(?:\/\/([^/?#]*))?([^?#]*)(?:\?([^#]*))?(?:#(.*))?$/.exec(value);
        if (!match) {
            throw new Error(`vscode stub: cannot parse URI ${value}`);
        }
        const dec = (s) => (s === undefined ? "" : decodeURIComponent(s));
        return new Uri(match[1], dec(match[2]), dec(match[3]), dec(match[4]), dec(match[5]));
    }
    static joinPath(base, ...segments) {
        return base.with({ path: nodePath.posix.join(base.path, ...segments) });
    }
    get fsPath() {
        return this.scheme === "file" ? fileURLToPath(`file://${encodeComponent(this.path, true)}`) : this.path;
    }
    with(change) {
        return new Uri(
            change.scheme ?? this.scheme,
            change.authority ?? this.authority,
            change.path ?? this.path,
            change.query ?? this.query,
            change.fragment ?? this.fragment,
        );
    }
    toString() {
        let out = `${this.scheme}:`;
        if (this.authority !== "" || this.scheme === "file") {
            out += `//${encodeComponent(this.authority, false)}`;
        }
        out += encodeComponent(this.path, true);
        if (this.query !== "") {
            out += `?${encodeComponent(this.query, false)}`;
        }
        if (this.fragment !== "") {
            out += `#${encodeComponent(this.fragment, false)}`;
        }
        return out;
    }
    toJSON() {
        return { $mid: 1, scheme: this.scheme, path: this.path, external: this.toString() };
    }
}
// Guard: our encoder must agree with Node's for file paths.
if (Uri.file("/tmp/a b/é.py").toString() !== pathToFileURL("/tmp/a b/é.py").href) {
    throw new Error("vscode stub: Uri.file encoding disagrees with pathToFileURL");
}

class Position {
    constructor(line, character) {
        if (line < 0 || character < 0) {
            throw new Error("Illegal argument: negative position");
        }
        this.line = line;
        this.character = character;
    }
    isBefore(other) {
        return this.line < other.line || (this.line === other.line && this.character < other.character);
    }
    isEqual(other) {
        return this.line === other.line && this.character === other.character;
    }
    isAfter(other) {
        return !this.isEqual(other) && !this.isBefore(other);
    }
    compareTo(other) {
        return this.isBefore(other) ? -1 : this.isEqual(other) ? 0 : 1;
    }
    translate(lineDelta = 0, characterDelta = 0) {
        return new Position(this.line + lineDelta, this.character + characterDelta);
    }
    with(line = this.line, character = this.character) {
        return new Position(line, character);
    }
}

class Range {
    constructor(a, b, c, d) {
        const start = a instanceof Position ? a : new Position(a, b);
        const end = a instanceof Position ? b : new Position(c, d);
        [this.start, this.end] = start.isAfter(end) ? [end, start] : [start, end];
    }
    get isEmpty() {
        return this.start.isEqual(this.end);
    }
    get isSingleLine() {
        return this.start.line === this.end.line;
    }
    contains(value) {
        if (value instanceof Range) {
            return this.contains(value.start) && this.contains(value.end);
        }
        return !value.isBefore(this.start) && !value.isAfter(this.end);
    }
    intersection(other) {
        const start = this.start.isAfter(other.start) ? this.start : other.start;
        const end = this.end.isBefore(other.end) ? this.end : other.end;
        return start.isAfter(end) ? undefined : new Range(start, end);
    }
    isEqual(other) {
        return this.start.isEqual(other.start) && this.end.isEqual(other.end);
    }
}

class Selection extends Range {
    constructor(anchor, active) {
        super(anchor, active);
        this.anchor = anchor;
        this.active = active;
    }
}

class Location {
    constructor(uri, rangeOrPosition) {
        this.uri = uri;
        this.range = rangeOrPosition instanceof Position ? new Range(rangeOrPosition, rangeOrPosition) : rangeOrPosition;
    }
}

const DiagnosticSeverity = { Error: 0, Warning: 1, Information: 2, Hint: 3 };
const DiagnosticTag = { Unnecessary: 1, Deprecated: 2 };

class Diagnostic {
    constructor(range, message, severity = DiagnosticSeverity.Error) {
        this.range = range;
        this.message = message;
        this.severity = severity;
    }
}

class DiagnosticRelatedInformation {
    constructor(location, message) {
        this.location = location;
        this.message = message;
    }
}

class CodeActionKind {
    constructor(value) {
        this.value = value;
    }
    append(part) {
        return new CodeActionKind(this.value ? `${this.value}.${part}` : part);
    }
    contains(other) {
        return this.value === "" || other.value === this.value || other.value.startsWith(`${this.value}.`);
    }
    intersects(other) {
        return this.contains(other) || other.contains(this);
    }
}
CodeActionKind.Empty = new CodeActionKind("");
CodeActionKind.QuickFix = new CodeActionKind("quickfix");
CodeActionKind.Refactor = new CodeActionKind("refactor");
CodeActionKind.RefactorExtract = new CodeActionKind("refactor.extract");
CodeActionKind.RefactorInline = new CodeActionKind("refactor.inline");
CodeActionKind.RefactorMove = new CodeActionKind("refactor.move");
CodeActionKind.RefactorRewrite = new CodeActionKind("refactor.rewrite");
CodeActionKind.Source = new CodeActionKind("source");
CodeActionKind.SourceOrganizeImports = new CodeActionKind("source.organizeImports");
CodeActionKind.SourceFixAll = new CodeActionKind("source.fixAll");

const CodeActionTriggerKind = { Invoke: 1, Automatic: 2 };

class CodeAction {
    constructor(title, kind) {
        this.title = title;
        this.kind = kind;
    }
}

class TextEdit {
    static replace(range, newText) {
        return new TextEdit(range, newText);
    }
    static insert(position, newText) {
        return new TextEdit(new Range(position, position), newText);
    }
    static delete(range) {
        return new TextEdit(range, "");
    }
    constructor(range, newText) {
        this.range = range;
        this.newText = newText;
    }
}

class WorkspaceEdit {
    constructor() {
        this._edits = new Map();
        this._uris = new Map();
    }
    _list(uri) {
        const key = uri.toString();
        if (!this._edits.has(key)) {
            this._edits.set(key, []);
            this._uris.set(key, uri);
        }
        return this._edits.get(key);
    }
    replace(uri, range, newText) {
        this._list(uri).push(new TextEdit(range, newText));
    }
    insert(uri, position, newText) {
        this.replace(uri, new Range(position, position), newText);
    }
    delete(uri, range) {
        this.replace(uri, range, "");
    }
    set(uri, edits) {
        const list = this._list(uri);
        list.length = 0;
        for (const edit of edits ?? []) {
            list.push(Array.isArray(edit) ? edit[0] : edit);
        }
    }
    has(uri) {
        return this._edits.has(uri.toString());
    }
    get(uri) {
        return this._edits.get(uri.toString()) ?? [];
    }
    entries() {
        return [...this._edits.keys()].map((key) => [this._uris.get(key), this._edits.get(key)]);
    }
    get size() {
        return this._edits.size;
    }
    // memlint's fixes only edit text; a file operation would be a bug worth failing on.
    createFile() {
        throw new Error("vscode stub: WorkspaceEdit.createFile is not supported");
    }
    renameFile() {
        throw new Error("vscode stub: WorkspaceEdit.renameFile is not supported");
    }
    deleteFile() {
        throw new Error("vscode stub: WorkspaceEdit.deleteFile is not supported");
    }
}

class MarkdownString {
    constructor(value = "", supportThemeIcons = false) {
        this.value = value;
        this.supportThemeIcons = supportThemeIcons;
    }
    appendMarkdown(value) {
        this.value += value;
        return this;
    }
    appendText(value) {
        this.value += value.replace(/[\\`*_{}[\]()#+\-.!]/g, "\\$&");
        return this;
    }
    appendCodeblock(code, language = "") {
        this.value += `\n\`\`\`${language}\n${code}\n\`\`\`\n`;
        return this;
    }
}

class Hover {
    constructor(contents, range) {
        this.contents = Array.isArray(contents) ? contents : [contents];
        this.range = range;
    }
}

class ThemeColor {
    constructor(id) {
        this.id = id;
    }
}

class RelativePattern {
    constructor(base, pattern) {
        this.baseUri = base instanceof Uri ? base : base.uri;
        this.base = this.baseUri.fsPath;
        this.pattern = pattern;
    }
}

class TabInputText {
    constructor(uri) {
        this.uri = uri;
    }
}
class TabInputTextDiff {
    constructor(original, modified) {
        this.original = original;
        this.modified = modified;
    }
}
class TabInputNotebook {
    constructor(uri, notebookType) {
        this.uri = uri;
        this.notebookType = notebookType;
    }
}
class TabInputCustom {
    constructor(uri, viewType) {
        this.uri = uri;
        this.viewType = viewType;
    }
}

// vscode-languageclient subclasses these at load time; memlint's server never sends the
// results that would construct them, so they only carry their constructor arguments.
class CompletionItem {
    constructor(label, kind) {
        this.label = label;
        this.kind = kind;
    }
}
class SymbolInformation {
    constructor(name, kind, containerName, location) {
        Object.assign(this, { name, kind, containerName, location });
    }
}
class DocumentLink {
    constructor(range, target) {
        Object.assign(this, { range, target });
    }
}
class CodeLens {
    constructor(range, command) {
        Object.assign(this, { range, command });
    }
}
class InlayHint {
    constructor(position, label, kind) {
        Object.assign(this, { position, label, kind });
    }
}
class TypeHierarchyItem {
    constructor(kind, name, detail, uri, range, selectionRange) {
        Object.assign(this, { kind, name, detail, uri, range, selectionRange });
    }
}
class CallHierarchyItem {
    constructor(kind, name, detail, uri, range, selectionRange) {
        Object.assign(this, { kind, name, detail, uri, range, selectionRange });
    }
}

const StatusBarAlignment = { Left: 1, Right: 2 };
const LogLevel = { Off: 0, Trace: 1, Debug: 2, Info: 3, Warning: 4, Error: 5 };
const ProgressLocation = { SourceControl: 1, Window: 10, Notification: 15 };
const EndOfLine = { LF: 1, CRLF: 2 };
const TextDocumentSaveReason = { Manual: 1, AfterDelay: 2, FocusOut: 3 };
const NotebookCellKind = { Markup: 1, Code: 2 };
const ConfigurationTarget = { Global: 1, Workspace: 2, WorkspaceFolder: 3 };

// ---------------------------------------------------------------------------------------
// Documents

class TextDocument {
    constructor(uri, languageId, text) {
        this.uri = uri;
        this.languageId = languageId;
        this.version = 1;
        this.isClosed = false;
        this.isDirty = false;
        this._text = text;
    }
    get fileName() {
        return this.uri.fsPath;
    }
    get isUntitled() {
        return this.uri.scheme === "untitled";
    }
    get eol() {
        return this._text.includes("\r\n") ? EndOfLine.CRLF : EndOfLine.LF;
    }
    get _lineStarts() {
        const starts = [0];
        for (let i = 0; i < this._text.length; i++) {
            if (this._text[i] === "\n") {
                starts.push(i + 1);
            }
        }
        return starts;
    }
    get lineCount() {
        return this._lineStarts.length;
    }
    getText(range) {
        if (range === undefined) {
            return this._text;
        }
        return this._text.slice(this.offsetAt(range.start), this.offsetAt(range.end));
    }
    lineAt(lineOrPosition) {
        const line = typeof lineOrPosition === "number" ? lineOrPosition : lineOrPosition.line;
        const starts = this._lineStarts;
        const start = starts[line];
        const end = line + 1 < starts.length ? starts[line + 1] : this._text.length;
        const text = this._text.slice(start, end).replace(/\r?\n$/, "");
        return { lineNumber: line, text, range: new Range(line, 0, line, text.length), isEmptyOrWhitespace: text.trim() === "" };
    }
    // Positions are UTF-16 code units, as in VS Code (and JavaScript strings).
    offsetAt(position) {
        const starts = this._lineStarts;
        const line = Math.min(Math.max(position.line, 0), starts.length - 1);
        const lineEnd = line + 1 < starts.length ? starts[line + 1] - 1 : this._text.length;
        return Math.min(starts[line] + position.character, lineEnd);
    }
    positionAt(offset) {
        const clamped = Math.min(Math.max(offset, 0), this._text.length);
        const starts = this._lineStarts;
        let line = 0;
        while (line + 1 < starts.length && starts[line + 1] <= clamped) {
            line++;
        }
        return new Position(line, clamped - starts[line]);
    }
    validateRange(range) {
        return new Range(this.validatePosition(range.start), this.validatePosition(range.end));
    }
    validatePosition(position) {
        return this.positionAt(this.offsetAt(position));
    }
    getWordRangeAtPosition(position) {
        const line = this.lineAt(position.line).text;
        const re = /[A-Za-z_][A-Za-z0-9_]*/g;
        let match;
        while ((match = re.exec(line))) {
            if (match.index <= position.character && position.character <= match.index + match[0].length) {
                return new Range(position.line, match.index, position.line, match.index + match[0].length);
            }
        }
        return undefined;
    }
    async save() {
        if (this.uri.scheme !== "file") {
            return false;
        }
        const reason = TextDocumentSaveReason.Manual;
        const waits = [];
        events.willSave.fire({ document: this, reason, waitUntil: (thenable) => waits.push(thenable) });
        await Promise.all(waits);
        fs.writeFileSync(this.uri.fsPath, this._text);
        this.isDirty = false;
        events.didSave.fire(this);
        return true;
    }
}

// ---------------------------------------------------------------------------------------
// Document selectors: VS Code's scoring (10 exact, 5 wildcard, 0 no match).

function globToRegExp(glob) {
    let re = "";
    for (let i = 0; i < glob.length; i++) {
        const ch = glob[i];
        if (ch === "*") {
            if (glob[i + 1] === "*") {
                re += ".*";
                i++;
                if (glob[i + 1] === "/") {
                    i++;
                    re += "(?:/)?";
                }
            } else {
                re += "[^/]*";
            }
        } else if (ch === "?") {
            re += "[^/]";
        } else if (ch === "{") {
            const close = glob.indexOf("}", i);
            re += `(?:${glob.slice(i + 1, close).split(",").map((p) => p.replace(/[.+^$()|[\]\\]/g, "\\$&")).join("|")})`;
            i = close;
        } else {
            re += ch.replace(/[.+^$()|[\]\\]/g, "\\$&");
        }
    }
    return new RegExp(`^${re}$`);
}

function matchFilter(filter, document) {
    if (typeof filter === "string") {
        return filter === "*" ? 5 : filter === document.languageId ? 10 : 0;
    }
    const notebook = notebookOfCell(document);
    if (filter.notebookType !== undefined) {
        if (notebook === undefined) {
            return 0;
        }
        if (filter.notebookType !== "*" && filter.notebookType !== notebook.notebookType) {
            return 0;
        }
    }
    let score = 0;
    if (filter.scheme !== undefined) {
        if (filter.scheme === document.uri.scheme) {
            score = 10;
        } else if (filter.scheme === "*") {
            score = 5;
        } else {
            return 0;
        }
    }
    if (filter.language !== undefined) {
        if (filter.language === document.languageId) {
            score = 10;
        } else if (filter.language === "*") {
            score = Math.max(score, 5);
        } else {
            return 0;
        }
    }
    if (filter.pattern !== undefined) {
        const pattern = typeof filter.pattern === "string" ? filter.pattern : nodePath.posix.join(filter.pattern.base, filter.pattern.pattern);
        if (globToRegExp(pattern).test(document.uri.fsPath) || globToRegExp(`**/${pattern}`).test(document.uri.fsPath)) {
            score = 10;
        } else {
            return 0;
        }
    }
    return score === 0 && filter.notebookType !== undefined ? 10 : score;
}

function match(selector, document) {
    const filters = Array.isArray(selector) ? selector : [selector];
    return Math.max(0, ...filters.map((filter) => matchFilter(filter, document)));
}

function notebookOfCell(document) {
    for (const notebook of notebookDocuments) {
        if (notebook.getCells().some((cell) => cell.document === document)) {
            return notebook;
        }
    }
    return undefined;
}

// ---------------------------------------------------------------------------------------
// State and events

const events = {
    didOpen: new EventEmitter(),
    didClose: new EventEmitter(),
    didChange: new EventEmitter(),
    willSave: new EventEmitter(),
    didSave: new EventEmitter(),
    didChangeConfiguration: new EventEmitter(),
    didChangeWorkspaceFolders: new EventEmitter(),
    didOpenNotebook: new EventEmitter(),
    didCloseNotebook: new EventEmitter(),
    didChangeNotebook: new EventEmitter(),
    didSaveNotebook: new EventEmitter(),
    didChangeActiveEditor: new EventEmitter(),
    didChangeVisibleEditors: new EventEmitter(),
    didChangeTabs: new EventEmitter(),
    didChangeTabGroups: new EventEmitter(),
    didChangeDiagnostics: new EventEmitter(),
};

const textDocuments = [];
const notebookDocuments = [];
const workspaceFolders = [];
let activeTextEditor;
const visibleTextEditors = [];
const tabGroup = { isActive: true, viewColumn: 1, activeTab: undefined, tabs: [] };
const commandHandlers = new Map();
const diagnosticCollections = new Set();
const providers = {
    codeAction: [],
    hover: [],
};
const outputChannels = [];
const statusBarItems = [];
const messages = [];
const settings = new Map(); // "memlint.select" -> value, set by tests through stub.editor

// Defaults from the extension's package.json, as VS Code reads them from the manifest.
function loadConfigurationDefaults(packageJsonPath) {
    const manifest = JSON.parse(fs.readFileSync(packageJsonPath, "utf8"));
    const properties = manifest.contributes?.configuration?.properties ?? {};
    for (const [key, schema] of Object.entries(properties)) {
        defaults.set(key, schema.default);
    }
}
const defaults = new Map();

function configurationValue(key) {
    if (settings.has(key)) {
        return settings.get(key);
    }
    if (defaults.has(key)) {
        return defaults.get(key);
    }
    // Nested keys: "memlint.trace" -> { server: ... }
    const prefix = `${key}.`;
    let nested;
    for (const [full, value] of [...defaults, ...settings]) {
        if (full.startsWith(prefix)) {
            nested ??= {};
            let target = nested;
            const parts = full.slice(prefix.length).split(".");
            for (const part of parts.slice(0, -1)) {
                target = target[part] ??= {};
            }
            target[parts[parts.length - 1]] = value;
        }
    }
    return nested;
}

function getConfiguration(section) {
    const qualify = (key) => (section ? `${section}.${key}` : key);
    const config = {
        get(key, defaultValue) {
            const value = configurationValue(qualify(key));
            return value === undefined ? defaultValue : value;
        },
        has(key) {
            return configurationValue(qualify(key)) !== undefined;
        },
        inspect(key) {
            const full = qualify(key);
            return { key: full, defaultValue: defaults.get(full), globalValue: settings.get(full) };
        },
        async update(key, value) {
            setSetting(qualify(key), value);
        },
    };
    // `workspace/configuration` for a whole section reads the object's own properties.
    const whole = section ? configurationValue(section) : undefined;
    if (whole && typeof whole === "object") {
        for (const [key, value] of Object.entries(whole)) {
            if (!(key in config)) {
                config[key] = value;
            }
        }
    }
    return config;
}

function setSetting(key, value) {
    settings.set(key, value);
    events.didChangeConfiguration.fire({
        affectsConfiguration: (section) => key === section || key.startsWith(`${section}.`) || section.startsWith(`${key}.`),
    });
}

function createDiagnosticCollection(name) {
    const entries = new Map();
    const collection = {
        name,
        set(uriOrEntries, diagnostics) {
            const changed = [];
            if (Array.isArray(uriOrEntries)) {
                for (const [uri, list] of uriOrEntries) {
                    entries.set(uri.toString(), { uri, list: list ?? [] });
                    changed.push(uri);
                }
            } else {
                entries.set(uriOrEntries.toString(), { uri: uriOrEntries, list: diagnostics ?? [] });
                changed.push(uriOrEntries);
            }
            events.didChangeDiagnostics.fire({ uris: changed });
        },
        get(uri) {
            return entries.get(uri.toString())?.list ?? [];
        },
        has(uri) {
            return entries.has(uri.toString());
        },
        delete(uri) {
            entries.delete(uri.toString());
            events.didChangeDiagnostics.fire({ uris: [uri] });
        },
        clear() {
            const uris = [...entries.values()].map((e) => e.uri);
            entries.clear();
            events.didChangeDiagnostics.fire({ uris });
        },
        forEach(callback) {
            for (const { uri, list } of entries.values()) {
                callback(uri, list, collection);
            }
        },
        dispose() {
            collection.clear();
            diagnosticCollections.delete(collection);
        },
        [Symbol.iterator]: function* () {
            for (const { uri, list } of entries.values()) {
                yield [uri, list];
            }
        },
    };
    diagnosticCollections.add(collection);
    return strict(`DiagnosticCollection(${name})`, collection);
}

function getDiagnostics(uri) {
    if (uri === undefined) {
        const all = new Map();
        for (const collection of diagnosticCollections) {
            collection.forEach((u, list) => {
                const key = u.toString();
                all.set(key, [u, [...(all.get(key)?.[1] ?? []), ...list]]);
            });
        }
        return [...all.values()];
    }
    return [...diagnosticCollections].flatMap((collection) => collection.get(uri));
}

function registerProvider(kind) {
    return (selector, provider, metadata) => {
        const entry = { selector, provider, metadata };
        providers[kind].push(entry);
        return new Disposable(() => providers[kind].splice(providers[kind].indexOf(entry), 1));
    };
}

// Providers memlint's server does not offer: registering one means the client saw a
// capability this test does not expect, which the test reports through `unexpected`.
const unexpected = [];
function unexpectedProvider(name) {
    return () => {
        unexpected.push(name);
        return new Disposable(() => undefined);
    };
}

function createOutputChannel(name, options) {
    const logLevelChanged = new EventEmitter();
    const channel = {
        name,
        text: "",
        append(value) {
            channel.text += value;
        },
        appendLine(value) {
            channel.text += `${value}\n`;
        },
        replace(value) {
            channel.text = value;
        },
        clear() {
            channel.text = "";
        },
        show() {},
        hide() {},
        dispose() {},
    };
    // `{ log: true }` makes a LogOutputChannel, which vscode-languageclient 10+ expects.
    if (options?.log === true) {
        Object.assign(channel, {
            logLevel: LogLevel.Info,
            onDidChangeLogLevel: logLevelChanged.event,
            setLogLevel(level) {
                channel.logLevel = level;
                logLevelChanged.fire(level);
            },
        });
        for (const [method, level] of [["trace", LogLevel.Trace], ["debug", LogLevel.Debug], ["info", LogLevel.Info], ["warn", LogLevel.Warning], ["error", LogLevel.Error]]) {
            channel[method] = (message, ...args) => {
                if (channel.logLevel !== LogLevel.Off && level >= channel.logLevel) {
                    const text = message instanceof Error ? message.stack ?? message.message : String(message);
                    channel.text += `[${method}] ${[text, ...args.map(String)].join(" ")}\n`;
                }
            };
        }
    }
    outputChannels.push(channel);
    return strict(`OutputChannel(${name})`, channel);
}

function createStatusBarItem(idOrAlignment, alignmentOrPriority, maybePriority) {
    const item = {
        id: typeof idOrAlignment === "string" ? idOrAlignment : undefined,
        alignment: typeof idOrAlignment === "string" ? alignmentOrPriority : idOrAlignment,
        priority: typeof idOrAlignment === "string" ? maybePriority : alignmentOrPriority,
        name: undefined,
        text: "",
        tooltip: undefined,
        command: undefined,
        color: undefined,
        backgroundColor: undefined,
        accessibilityInformation: undefined,
        visible: false,
        show() {
            item.visible = true;
        },
        hide() {
            item.visible = false;
        },
        dispose() {
            item.visible = false;
        },
    };
    statusBarItems.push(item);
    return strict("StatusBarItem", item);
}

function showMessage(level) {
    return async (message, ...items) => {
        messages.push({ level, message, items: items.filter((i) => typeof i === "string" || typeof i?.title === "string") });
        return undefined; // the user dismisses every message
    };
}

// ---------------------------------------------------------------------------------------
// Namespaces

const workspace = strict("workspace", {
    get workspaceFolders() {
        return workspaceFolders.length === 0 ? undefined : workspaceFolders;
    },
    get name() {
        return workspaceFolders[0]?.name;
    },
    get rootPath() {
        return workspaceFolders[0]?.uri.fsPath;
    },
    get textDocuments() {
        return textDocuments;
    },
    get notebookDocuments() {
        return notebookDocuments;
    },
    isTrusted: true,
    getWorkspaceFolder(uri) {
        return workspaceFolders.find((folder) => uri.fsPath === folder.uri.fsPath || uri.fsPath.startsWith(folder.uri.fsPath + nodePath.sep));
    },
    getConfiguration,
    onDidChangeConfiguration: events.didChangeConfiguration.event,
    onDidOpenTextDocument: events.didOpen.event,
    onDidCloseTextDocument: events.didClose.event,
    onDidChangeTextDocument: events.didChange.event,
    onWillSaveTextDocument: events.willSave.event,
    onDidSaveTextDocument: events.didSave.event,
    onDidChangeWorkspaceFolders: events.didChangeWorkspaceFolders.event,
    onDidOpenNotebookDocument: events.didOpenNotebook.event,
    onDidCloseNotebookDocument: events.didCloseNotebook.event,
    onDidChangeNotebookDocument: events.didChangeNotebook.event,
    onDidSaveNotebookDocument: events.didSaveNotebook.event,
    // vscode-languageclient subscribes to these only when the server registers file
    // operation capabilities; present so such a server is served, never fired here.
    onDidCreateFiles: new EventEmitter().event,
    onDidRenameFiles: new EventEmitter().event,
    onDidDeleteFiles: new EventEmitter().event,
    onWillCreateFiles: new EventEmitter().event,
    onWillRenameFiles: new EventEmitter().event,
    onWillDeleteFiles: new EventEmitter().event,
    createFileSystemWatcher(globPattern) {
        // Real watching of memlint.toml is the server's concern under test elsewhere; the
        // client only needs the three events to subscribe to.
        const created = new EventEmitter();
        const changed = new EventEmitter();
        const deleted = new EventEmitter();
        return {
            globPattern,
            ignoreCreateEvents: false,
            ignoreChangeEvents: false,
            ignoreDeleteEvents: false,
            onDidCreate: created.event,
            onDidChange: changed.event,
            onDidDelete: deleted.event,
            dispose() {},
        };
    },
    async openTextDocument(uriOrPath) {
        const uri = typeof uriOrPath === "string" ? Uri.file(uriOrPath) : uriOrPath;
        return editor.openDocument(uri);
    },
    async applyEdit(edit) {
        for (const [uri, edits] of edit.entries()) {
            const document = textDocuments.find((d) => d.uri.toString() === uri.toString()) ?? (await editor.openDocument(uri));
            editor.applyTextEdits(document, edits);
        }
        return true;
    },
});

const window = strict("window", {
    get activeTextEditor() {
        return activeTextEditor;
    },
    get visibleTextEditors() {
        return visibleTextEditors;
    },
    onDidChangeActiveTextEditor: events.didChangeActiveEditor.event,
    onDidChangeVisibleTextEditors: events.didChangeVisibleEditors.event,
    tabGroups: strict("window.tabGroups", {
        get all() {
            return [tabGroup];
        },
        get activeTabGroup() {
            return tabGroup;
        },
        onDidChangeTabs: events.didChangeTabs.event,
        onDidChangeTabGroups: events.didChangeTabGroups.event,
    }),
    createOutputChannel,
    createStatusBarItem,
    showInformationMessage: showMessage("info"),
    showWarningMessage: showMessage("warning"),
    showErrorMessage: showMessage("error"),
    async showTextDocument(documentOrUri) {
        const document = documentOrUri instanceof Uri ? await editor.openDocument(documentOrUri) : documentOrUri;
        return editor.show(document);
    },
    async withProgress(_options, task) {
        return task({ report() {} }, new CancellationTokenSource().token);
    },
});

const languages = strict("languages", {
    match,
    createDiagnosticCollection,
    getDiagnostics,
    onDidChangeDiagnostics: events.didChangeDiagnostics.event,
    registerCodeActionsProvider: registerProvider("codeAction"),
    registerHoverProvider: registerProvider("hover"),
    registerCompletionItemProvider: unexpectedProvider("completion"),
    registerDefinitionProvider: unexpectedProvider("definition"),
    registerReferenceProvider: unexpectedProvider("references"),
    registerDocumentSymbolProvider: unexpectedProvider("documentSymbol"),
    registerDocumentFormattingEditProvider: unexpectedProvider("formatting"),
    registerDocumentRangeFormattingEditProvider: unexpectedProvider("rangeFormatting"),
    registerRenameProvider: unexpectedProvider("rename"),
    registerCodeLensProvider: unexpectedProvider("codeLens"),
    registerSignatureHelpProvider: unexpectedProvider("signatureHelp"),
    registerDocumentHighlightProvider: unexpectedProvider("documentHighlight"),
    registerWorkspaceSymbolProvider: unexpectedProvider("workspaceSymbol"),
    registerInlayHintsProvider: unexpectedProvider("inlayHints"),
    registerDocumentSemanticTokensProvider: unexpectedProvider("semanticTokens"),
    registerDocumentRangeSemanticTokensProvider: unexpectedProvider("semanticTokensRange"),
    registerFoldingRangeProvider: unexpectedProvider("foldingRange"),
    registerSelectionRangeProvider: unexpectedProvider("selectionRange"),
    registerDocumentLinkProvider: unexpectedProvider("documentLink"),
    registerDeclarationProvider: unexpectedProvider("declaration"),
    registerImplementationProvider: unexpectedProvider("implementation"),
    registerTypeDefinitionProvider: unexpectedProvider("typeDefinition"),
    registerTypeHierarchyProvider: unexpectedProvider("typeHierarchy"),
    registerCallHierarchyProvider: unexpectedProvider("callHierarchy"),
    registerColorProvider: unexpectedProvider("color"),
    registerOnTypeFormattingEditProvider: unexpectedProvider("onTypeFormatting"),
    registerLinkedEditingRangeProvider: unexpectedProvider("linkedEditingRange"),
    registerInlineValuesProvider: unexpectedProvider("inlineValues"),
    registerInlineCompletionItemProvider: unexpectedProvider("inlineCompletion"),
});

const commands = strict("commands", {
    registerCommand(id, handler, thisArg) {
        if (commandHandlers.has(id)) {
            throw new Error(`command '${id}' already exists`);
        }
        commandHandlers.set(id, { handler, thisArg });
        return new Disposable(() => commandHandlers.delete(id));
    },
    async executeCommand(id, ...args) {
        const entry = commandHandlers.get(id);
        if (entry === undefined) {
            throw new Error(`command '${id}' not found`);
        }
        return entry.handler.apply(entry.thisArg, args);
    },
    async getCommands() {
        return [...commandHandlers.keys()];
    },
});

const env = strict("env", {
    appName: "vscode-stub (memlint tests)",
    appRoot: __dirname,
    language: "en",
    machineId: "someValue.machineId",
    sessionId: "stub-session",
    uriScheme: "vscode",
    async openExternal() {
        return false;
    },
});

const extensions = strict("extensions", {
    all: [],
    getExtension() {
        return undefined;
    },
});

// ---------------------------------------------------------------------------------------
// The editor side, driven by the tests.

const editor = {
    events,
    messages,
    outputChannels,
    statusBarItems,
    providers,
    unexpected,
    missing,
    listenerErrors,
    commandHandlers,
    loadConfigurationDefaults,
    setSetting,
    addWorkspaceFolder(fsPath) {
        const folder = { uri: Uri.file(fsPath), name: nodePath.basename(fsPath), index: workspaceFolders.length };
        workspaceFolders.push(folder);
        return folder;
    },
    /** Opens (or returns the open) document for `uri`, reading it from disk. */
    async openDocument(uri, languageId) {
        const existing = textDocuments.find((d) => d.uri.toString() === uri.toString());
        if (existing !== undefined) {
            return existing;
        }
        const text = uri.scheme === "file" ? fs.readFileSync(uri.fsPath, "utf8") : "";
        const document = new TextDocument(uri, languageId ?? (uri.path.endsWith(".py") ? "python" : "plaintext"), text);
        textDocuments.push(document);
        events.didOpen.fire(document);
        return document;
    },
    /**
     * Opens a Jupyter notebook from disk in a notebook tab, in VS Code's order: the tab,
     * then the cells' text documents, then the notebook. Returns the NotebookDocument.
     */
    async openNotebook(uri) {
        const json = JSON.parse(fs.readFileSync(uri.fsPath, "utf8"));
        const language = json.metadata?.language_info?.name ?? "python";
        const notebook = {
            uri,
            notebookType: "jupyter-notebook",
            version: 1,
            isDirty: false,
            isUntitled: false,
            isClosed: false,
            metadata: {},
            cells: [],
            get cellCount() {
                return notebook.cells.length;
            },
            cellAt(index) {
                return notebook.cells[index];
            },
            getCells(range) {
                return range === undefined ? [...notebook.cells] : notebook.cells.slice(range.start, range.end);
            },
            async save() {
                return false;
            },
        };
        json.cells.forEach((cell, index) => {
            const text = Array.isArray(cell.source) ? cell.source.join("") : cell.source;
            const code = cell.cell_type === "code";
            // VS Code names cells by the notebook's path and a fragment per cell.
            const cellUri = uri.with({ scheme: "vscode-notebook-cell", fragment: `W${index}sZmlsZQ==` });
            notebook.cells.push({
                index,
                notebook,
                kind: code ? NotebookCellKind.Code : NotebookCellKind.Markup,
                document: new TextDocument(cellUri, code ? language : "markdown", text),
                metadata: {},
                outputs: [],
                executionSummary: undefined,
            });
        });
        const tab = { label: nodePath.basename(uri.path), group: tabGroup, input: new TabInputNotebook(uri, notebook.notebookType), isActive: true, isDirty: false, isPinned: false, isPreview: false };
        tabGroup.tabs.push(tab);
        tabGroup.activeTab = tab;
        events.didChangeTabs.fire({ opened: [tab], closed: [], changed: [] });
        notebookDocuments.push(notebook);
        for (const cell of notebook.cells) {
            textDocuments.push(cell.document);
            events.didOpen.fire(cell.document);
        }
        events.didOpenNotebook.fire(notebook);
        return notebook;
    },
    /** Closes a notebook's tab, the notebook, then its cells' documents. */
    closeNotebook(notebook) {
        const index = tabGroup.tabs.findIndex((t) => t.input.uri.toString() === notebook.uri.toString());
        if (index >= 0) {
            const [tab] = tabGroup.tabs.splice(index, 1);
            events.didChangeTabs.fire({ opened: [], closed: [tab], changed: [] });
        }
        notebookDocuments.splice(notebookDocuments.indexOf(notebook), 1);
        notebook.isClosed = true;
        events.didCloseNotebook.fire(notebook);
        for (const cell of notebook.cells) {
            textDocuments.splice(textDocuments.indexOf(cell.document), 1);
            cell.document.isClosed = true;
            events.didClose.fire(cell.document);
        }
    },
    /** Shows `document` in a tab and makes it the active editor, in VS Code's event order. */
    show(document) {
        let tab = tabGroup.tabs.find((t) => t.input.uri.toString() === document.uri.toString());
        if (tab === undefined) {
            tab = { label: nodePath.basename(document.uri.path), group: tabGroup, input: new TabInputText(document.uri), isActive: true, isDirty: false, isPinned: false, isPreview: false };
            tabGroup.tabs.push(tab);
            events.didChangeTabs.fire({ opened: [tab], closed: [], changed: [] });
        }
        tabGroup.activeTab = tab;
        const textEditor = {
            document,
            selection: new Selection(new Position(0, 0), new Position(0, 0)),
            selections: [new Selection(new Position(0, 0), new Position(0, 0))],
            visibleRanges: [new Range(0, 0, document.lineCount - 1, 0)],
            options: { tabSize: 4, insertSpaces: true },
            viewColumn: 1,
        };
        visibleTextEditors.splice(0, visibleTextEditors.length, textEditor);
        activeTextEditor = textEditor;
        events.didChangeVisibleEditors.fire(visibleTextEditors);
        events.didChangeActiveEditor.fire(textEditor);
        return textEditor;
    },
    /** Closes the document's tab and the document, firing what VS Code fires. */
    close(document) {
        const index = tabGroup.tabs.findIndex((t) => t.input.uri.toString() === document.uri.toString());
        if (index >= 0) {
            const [tab] = tabGroup.tabs.splice(index, 1);
            events.didChangeTabs.fire({ opened: [], closed: [tab], changed: [] });
        }
        if (activeTextEditor?.document === document) {
            activeTextEditor = undefined;
            visibleTextEditors.length = 0;
            events.didChangeActiveEditor.fire(undefined);
        }
        const docIndex = textDocuments.indexOf(document);
        if (docIndex >= 0) {
            textDocuments.splice(docIndex, 1);
            document.isClosed = true;
            events.didClose.fire(document);
        }
    },
    /** Applies text edits as one change event (edits sorted last-first, so each applies to the text the previous left). */
    applyTextEdits(document, edits) {
        const sorted = [...edits].sort((a, b) => b.range.start.compareTo(a.range.start) || b.range.end.compareTo(a.range.end));
        const contentChanges = [];
        for (const edit of sorted) {
            const start = document.offsetAt(edit.range.start);
            const end = document.offsetAt(edit.range.end);
            contentChanges.push({ range: new Range(document.positionAt(start), document.positionAt(end)), rangeOffset: start, rangeLength: end - start, text: edit.newText });
            document._text = document._text.slice(0, start) + edit.newText + document._text.slice(end);
        }
        document.version += 1;
        document.isDirty = true;
        events.didChange.fire({ document, contentChanges, reason: undefined });
        const notebook = notebookOfCell(document);
        if (notebook !== undefined) {
            const cell = notebook.cells.find((c) => c.document === document);
            notebook.version += 1;
            notebook.isDirty = true;
            events.didChangeNotebook.fire({ notebook, metadata: undefined, contentChanges: [], cellChanges: [{ cell, document, metadata: undefined, outputs: undefined, executionSummary: undefined }] });
        }
    },
    /** The code-action providers' answer for `range`, as VS Code asks when the user opens the lightbulb. */
    async codeActions(document, range, only) {
        const diagnostics = getDiagnostics(document.uri).filter((d) => d.range.intersection(range) !== undefined);
        const context = { diagnostics, only, triggerKind: CodeActionTriggerKind.Invoke };
        const results = [];
        for (const { selector, provider } of providers.codeAction) {
            if (match(selector, document) > 0) {
                const actions = await provider.provideCodeActions(document, range, context, new CancellationTokenSource().token);
                for (const action of actions ?? []) {
                    results.push({ action, provider });
                }
            }
        }
        return results;
    },
    /** Applies a code action as VS Code does when the user picks it: resolve, edit, then command. */
    async applyCodeAction({ action, provider }) {
        let resolved = action;
        if (resolved.edit === undefined && typeof provider.resolveCodeAction === "function") {
            resolved = (await provider.resolveCodeAction(action, new CancellationTokenSource().token)) ?? action;
        }
        if (resolved.edit !== undefined) {
            await workspace.applyEdit(resolved.edit);
        }
        const command = resolved.command ?? (typeof resolved.title === "string" && typeof resolved.command === "string" ? resolved : undefined);
        if (command !== undefined) {
            await commands.executeCommand(command.command, ...(command.arguments ?? []));
        }
        return resolved;
    },
    async hover(document, position) {
        const results = [];
        for (const { selector, provider } of providers.hover) {
            if (match(selector, document) > 0) {
                const hover = await provider.provideHover(document, position, new CancellationTokenSource().token);
                if (hover) {
                    results.push(hover);
                }
            }
        }
        return results;
    },
};

// The stub stands in for the oldest VS Code the extension declares it supports.
const ENGINE = JSON.parse(fs.readFileSync(nodePath.join(__dirname, "..", "package.json"), "utf8")).engines.vscode;

module.exports = {
    version: ENGINE.replace(/^\^/, ""),
    env,
    extensions,
    workspace,
    window,
    languages,
    commands,
    Disposable,
    EventEmitter,
    CancellationError,
    CancellationTokenSource,
    Uri,
    Position,
    Range,
    Selection,
    Location,
    Diagnostic,
    DiagnosticSeverity,
    DiagnosticTag,
    DiagnosticRelatedInformation,
    CodeAction,
    CodeActionKind,
    CodeActionTriggerKind,
    TextEdit,
    WorkspaceEdit,
    MarkdownString,
    Hover,
    ThemeColor,
    RelativePattern,
    TabInputText,
    TabInputTextDiff,
    TabInputCustom,
    TabInputNotebook,
    LogLevel,
    CompletionItem,
    SymbolInformation,
    DocumentLink,
    CodeLens,
    InlayHint,
    TypeHierarchyItem,
    CallHierarchyItem,
    StatusBarAlignment,
    ProgressLocation,
    EndOfLine,
    TextDocumentSaveReason,
    NotebookCellKind,
    ConfigurationTarget,
    // Not part of VS Code's API: the tests' handle on the editor this stub simulates.
    __editor: editor,
};
