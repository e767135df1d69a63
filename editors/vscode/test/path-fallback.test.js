"use strict";
// With memlint.path empty, the extension runs the `memlint` it finds on PATH.

const test = require("node:test");
const assert = require("node:assert/strict");
const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");

const { editor, memlintBinary, makeWorkspace, activate, outputText } = require("./harness");

test("memlint on PATH is started when memlint.path is empty", { timeout: 30000 }, async (t) => {
    const binDir = fs.mkdtempSync(path.join(os.tmpdir(), "memlint-path-"));
    fs.symlinkSync(memlintBinary(), path.join(binDir, "memlint"));
    const savedPath = process.env.PATH;
    process.env.PATH = `${binDir}${path.delimiter}${savedPath}`;
    const dir = makeWorkspace();
    t.after(() => {
        process.env.PATH = savedPath;
        fs.rmSync(binDir, { recursive: true, force: true });
        fs.rmSync(dir, { recursive: true, force: true });
    });

    const loaded = activate();
    await loaded.api.started();
    const client = loaded.api.client();
    assert.ok(client?.isRunning(), `not running:\n${outputText()}`);
    assert.equal(client.initializeResult.serverInfo?.name, "memlint");
    assert.equal(client._serverProcess.spawnfile, path.join(binDir, "memlint"));
    await loaded.deactivate();
    assert.deepEqual(editor.messages, []);
});
