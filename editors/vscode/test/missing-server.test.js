"use strict";
// Without a memlint executable the extension must say so once, clearly, and not hang.

const test = require("node:test");
const assert = require("node:assert/strict");
const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");

const { editor, makeWorkspace, activate } = require("./harness");

test("a memlint.path that is not an executable is reported", { timeout: 30000 }, async (t) => {
    const dir = makeWorkspace();
    t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
    editor.setSetting("memlint.path", path.join(dir, "no-such-memlint"));
    editor.messages.length = 0;

    const loaded = activate();
    await loaded.api.started();
    assert.equal(loaded.api.client(), undefined);

    const status = editor.statusBarItems.at(-1);
    assert.equal(status.id, "memlint.status");
    assert.equal(status.text, "$(error) memlint");
    assert.match(status.tooltip, /no-such-memlint/);
    assert.equal(editor.messages.length, 1, JSON.stringify(editor.messages));
    assert.equal(editor.messages[0].level, "error");
    assert.match(editor.messages[0].message, /no-such-memlint.*is not an executable file.*memlint\.path/);
    assert.deepEqual(editor.messages[0].items, ["Open Settings", "Show Output"]);
    await loaded.deactivate();
    assert.deepEqual([...editor.missing], []);
});

test("an empty memlint.path looks for `memlint` on PATH", { timeout: 30000 }, async (t) => {
    const savedPath = process.env.PATH;
    const emptyDir = fs.mkdtempSync(path.join(os.tmpdir(), "memlint-empty-path-"));
    process.env.PATH = emptyDir;
    t.after(() => {
        process.env.PATH = savedPath;
        fs.rmSync(emptyDir, { recursive: true, force: true });
    });
    editor.setSetting("memlint.path", "");
    editor.messages.length = 0;

    const loaded = activate();
    await loaded.api.started();
    assert.equal(loaded.api.client(), undefined);
    assert.equal(editor.messages.length, 1, JSON.stringify(editor.messages));
    assert.match(editor.messages[0].message, /`memlint` was not found on PATH/);
    assert.equal(editor.statusBarItems.at(-1).text, "$(error) memlint");
    await loaded.deactivate();
});
