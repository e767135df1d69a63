"use strict";
// A Jupyter notebook: its Python cells go to the server through notebookDocument/* sync,
// each cell gets its own findings, and a quick fix edits the cell.

const test = require("node:test");
const assert = require("node:assert/strict");
const fs = require("node:fs");
const path = require("node:path");

const { vscode, editor, memlintBinary, makeWorkspace, activate, waitFor, memlintDiagnostics, codeOf, outputText } = require("./harness");

test("notebook cells are linted and fixed", { timeout: 60000 }, async (t) => {
    const dir = makeWorkspace("train.ipynb");
    editor.setSetting("memlint.path", memlintBinary());
    const loaded = activate();
    t.after(async () => {
        await loaded.deactivate();
        fs.rmSync(dir, { recursive: true, force: true });
    });
    await loaded.api.started();
    assert.ok(loaded.api.client()?.isRunning(), outputText());

    const notebook = await editor.openNotebook(vscode.Uri.file(path.join(dir, "train.ipynb")));
    const [markdown, imports, loop] = notebook.getCells();
    assert.equal(loop.document.languageId, "python");

    const diagnostics = await waitFor("MEM004 on the loop cell", () => {
        const found = memlintDiagnostics(loop.document.uri);
        return found.some((d) => codeOf(d) === "MEM004") ? found : undefined;
    });
    assert.deepEqual(diagnostics.map(codeOf), ["MEM004"]);
    const mem004 = diagnostics[0];
    // Positions are the cell's own, not the notebook's concatenated source.
    assert.equal(mem004.range.start.line, 5);
    assert.equal(loop.document.getText(mem004.range), "torch.cuda.empty_cache()");
    assert.deepEqual(memlintDiagnostics(imports.document.uri), []);
    assert.deepEqual(memlintDiagnostics(markdown.document.uri), []);

    const offered = await editor.codeActions(loop.document, mem004.range);
    const fix = offered.find(({ action }) => action.kind?.value === "quickfix" && /empty_cache/.test(action.title) && !/Disable/.test(action.title));
    assert.ok(fix, JSON.stringify(offered.map(({ action }) => action.title)));
    await editor.applyCodeAction(fix);
    assert.doesNotMatch(loop.document.getText(), /empty_cache/);
    assert.match(imports.document.getText(), /^import torch\n/);
    await waitFor("MEM004 to clear on the cell", () => memlintDiagnostics(loop.document.uri).length === 0);

    editor.closeNotebook(notebook);
    // The server forgets the closed notebook's cells: asking about one is now an LSP error.
    await waitFor("the server to drop the closed notebook", () =>
        loaded.api.client().sendRequest("textDocument/hover", { textDocument: { uri: loop.document.uri.toString() }, position: { line: 0, character: 4 } }).then(
            () => false,
            (error) => /no open document/.test(error.message),
        ),
    5000);
    await loaded.deactivate();
    assert.doesNotMatch(outputText(), /\[error\]/);
    assert.deepEqual([...editor.missing], []);
    assert.deepEqual(editor.listenerErrors.map(String), []);
});
