//! Notebooks in, program and positions out, fixes written back byte-exactly.
//!
//! `train_resnet.ipynb` is written like nbformat 4.5 does (`json.dumps(indent=1,
//! sort_keys=True, ensure_ascii=False)`, sources as lists of lines). Its cells, 1-based:
//! 1 markdown, 2 `!pip`/`%matplotlib`, 3 imports, 4 markdown, 5 data, 6 markdown,
//! 7 training loop (`torch.cuda.empty_cache()` on line 8, `!nvidia-smi` on line 10 inside
//! an `if`), 8 `%%time`, 9 `%%bash`, 10 help and `files = !ls`, 11 raw, 12 empty.
//! `eval_string_sources.ipynb` is an older writer's style: two-space indentation,
//! sources as single strings, non-ASCII escaped.

use memlint_linter::{apply_fixes, lint, FixMode, LinterSettings, Rule};
use memlint_notebook::{CellPosition, Notebook, NotebookError};

const TRAIN: &str = include_str!("fixtures/train_resnet.ipynb");
const EVAL: &str = include_str!("fixtures/eval_string_sources.ipynb");

fn offset_of(haystack: &str, needle: &str) -> usize {
    haystack.find(needle).unwrap_or_else(|| panic!("{needle:?} not in the program"))
}

fn pos(cell: usize, row: usize, column: usize) -> CellPosition {
    CellPosition { cell, row, column }
}

// ----- reading ---------------------------------------------------------------------

#[test]
fn the_program_is_the_code_cells_with_magics_neutralized() {
    let nb = Notebook::parse(TRAIN).unwrap();
    assert_eq!(nb.cell_count(), 12);
    assert_eq!(nb.language(), Some("python"));
    let program = nb.python_source();
    // Every cell keeps its line count: cell text + one separator newline.
    let expected_lines = 2 + 6 + 5 + 11 + 2 + 3 + 3 + 1;
    assert_eq!(program.lines().count(), expected_lines, "{program}");
    assert!(program.starts_with("pass  # ipython magic\npass  # ipython magic\nimport torch\n"));
    assert!(program.contains("        if epoch == 0:\n            pass  # ipython magic\n"));
    // `%%time`'s body is Python and is linted; `%%bash`'s is not.
    assert!(program.contains("pass  # ipython cell magic\ntrain()\n"));
    assert!(program.contains("pass  # ipython cell magic\n# ipython magic (continued)\n# ipython magic (continued)\n"));
    assert!(!program.contains("nvidia-smi") && !program.contains("!ls") && !program.contains('?'));
    assert!(!program.contains("raw text"), "raw and markdown cells are skipped");
    let result = lint(program, &LinterSettings::default());
    assert!(result.syntax_errors.is_empty(), "{:?}\n{program}", result.syntax_errors);
}

#[test]
fn string_sources_and_escapes_are_decoded() {
    let nb = Notebook::parse(EVAL).unwrap();
    assert_eq!(nb.cell_count(), 3);
    assert!(nb.python_source().starts_with("import torch\n"));
    assert!(nb.python_source().contains("noms = [\"données\", \"modèle\"]\n\n"));
    assert!(nb.python_source().ends_with("    print(step)\n"));
}

#[test]
fn a_magic_as_the_only_statement_of_a_block_keeps_the_block_valid() {
    let nb = notebook(&["for i in range(3):\n    !echo $i\nif True:\n    %time f()\nelse:\n    x = !ls \\\n        -l"]);
    assert_eq!(
        nb.python_source(),
        "for i in range(3):\n    pass  # ipython magic\nif True:\n    pass  # ipython magic\nelse:\n    pass  # ipython magic\n# ipython magic (continued)\n"
    );
    assert!(lint(nb.python_source(), &LinterSettings::default()).syntax_errors.is_empty());
}

#[test]
fn crlf_lines_and_a_byte_order_mark() {
    let text = "\u{feff}{\"cells\": [{\"cell_type\": \"code\", \"source\": [\"x = 1\\r\\n\", \"!ls\\r\\n\", \"y = 2\"]}], \"nbformat\": 4}";
    let nb = Notebook::parse(text).unwrap();
    assert_eq!(nb.python_source(), "x = 1\r\npass  # ipython magic\r\ny = 2\n");
    assert_eq!(nb.with_fixed_source(nb.python_source()).unwrap(), text);
    let out = nb.with_fixed_source("x = 1\r\npass  # ipython magic\r\ny = 3\n").unwrap();
    assert_eq!(out, text.replace("\"y = 2\"", "\"y = 3\""));
    assert_eq!(nb.cell_position(nb.python_source().find("y = 2").unwrap()), Some(pos(1, 3, 1)));
}

// ----- positions -------------------------------------------------------------------

#[test]
fn positions_are_cells_among_all_cells_rows_within_the_cell_columns_in_characters() {
    let nb = Notebook::parse(TRAIN).unwrap();
    let program = nb.python_source();
    assert_eq!(nb.cell_position(0), Some(pos(2, 1, 1)));
    assert_eq!(nb.cell_position(offset_of(program, "import torch.nn")), Some(pos(3, 2, 1)));
    assert_eq!(nb.cell_position(offset_of(program, "torch.cuda.empty_cache()")), Some(pos(7, 8, 13)));
    // Non-ASCII before the offset: `—` is 3 bytes but one column.
    let fertig = offset_of(program, "fertig");
    assert_eq!(nb.cell_position(fertig), Some(pos(7, 11, 57)));
    let check = offset_of(program, "✓");
    assert_eq!(nb.cell_position(check), Some(pos(7, 11, 64)));
    // Inside a multi-byte character: that character.
    assert_eq!(nb.cell_position(check + 1), Some(pos(7, 11, 64)));
    // The separator newline is the end of the cell's last line.
    assert_eq!(nb.cell_position(offset_of(program, "\")\npass  # ipython cell magic") + 2), Some(pos(7, 11, 67)));
    assert_eq!(nb.cell_position(offset_of(program, "train()\n")), Some(pos(8, 2, 1)));
    assert_eq!(nb.cell_position(offset_of(program, "print(files)")), Some(pos(10, 3, 1)));
    // The end of the program is the (empty) last line of the last code cell.
    assert_eq!(nb.cell_position(program.len()), Some(pos(12, 1, 1)));
    assert_eq!(nb.cell_position(program.len() - 1), Some(pos(12, 1, 1)));
    assert_eq!(nb.cell_position(program.len() + 1), None);
    assert_eq!(pos(7, 8, 13).to_string(), "cell 7, line 8, column 13");
}

#[test]
fn a_cell_ending_in_a_newline_has_an_empty_last_line() {
    let nb = Notebook::parse(EVAL).unwrap();
    let program = nb.python_source();
    // Cell 2 is "...\n": its 4th line is empty, then cell 3 starts.
    assert_eq!(nb.cell_position(offset_of(program, "\n\nfor") + 1), Some(pos(2, 4, 1)));
    assert_eq!(nb.cell_position(offset_of(program, "for step")), Some(pos(3, 1, 1)));
    let libere = offset_of(program, "libère");
    assert_eq!(nb.cell_position(libere), Some(pos(3, 3, 33)));
    assert_eq!(nb.cell_position(libere + "lib".len() + 1), Some(pos(3, 3, 36)));
    assert_eq!(nb.cell_position(libere + "libè".len()), Some(pos(3, 3, 37)));
}

#[test]
fn a_notebook_without_code_has_no_positions() {
    let nb = Notebook::parse(r##"{"cells": [{"cell_type": "markdown", "source": "# hi"}], "nbformat": 4}"##).unwrap();
    assert_eq!(nb.python_source(), "");
    assert_eq!(nb.cell_position(0), None);
    assert_eq!(nb.with_fixed_source("").unwrap(), r##"{"cells": [{"cell_type": "markdown", "source": "# hi"}], "nbformat": 4}"##);
    assert_eq!(nb.with_fixed_source("x = 1\n"), Err(NotebookError::NoCodeCell));
}

// ----- writing back ----------------------------------------------------------------

#[test]
fn no_change_is_byte_identical() {
    for text in [TRAIN, EVAL] {
        let nb = Notebook::parse(text).unwrap();
        assert_eq!(nb.with_fixed_source(nb.python_source()).unwrap(), text);
    }
}

#[test]
fn a_fix_in_one_cell_changes_only_that_cells_source() {
    let nb = Notebook::parse(TRAIN).unwrap();
    let fixed = nb.python_source().replacen("            torch.cuda.empty_cache()\n", "", 1);
    let out = nb.with_fixed_source(&fixed).unwrap();
    // Exactly one element of cell 7's source list is gone; every other byte is the same.
    let expected = TRAIN.replacen("    \"            torch.cuda.empty_cache()\\n\",\n", "", 1);
    assert_ne!(expected, TRAIN);
    assert_eq!(out, expected);
    let again = Notebook::parse(&out).unwrap();
    assert_eq!(again.python_source(), fixed);
}

#[test]
fn edited_lines_keep_the_list_style_and_the_magic_lines() {
    let nb = Notebook::parse(TRAIN).unwrap();
    let fixed = nb
        .python_source()
        .replacen("            optimizer.zero_grad()\n", "            optimizer.zero_grad(set_to_none=True)\n            del loss\n", 1);
    let out = nb.with_fixed_source(&fixed).unwrap();
    let expected = TRAIN.replacen(
        "    \"            optimizer.zero_grad()\\n\",\n",
        "    \"            optimizer.zero_grad(set_to_none=True)\\n\",\n    \"            del loss\\n\",\n",
        1,
    );
    assert_eq!(out, expected);
    assert!(out.contains("    \"            !nvidia-smi --query-gpu=memory.used --format=csv\\n\",\n"));
}

#[test]
fn string_sources_stay_strings_with_their_escapes() {
    let nb = Notebook::parse(EVAL).unwrap();
    let fixed = nb.python_source().replacen("    torch.cuda.empty_cache()  # libère\n", "", 1);
    let out = nb.with_fixed_source(&fixed).unwrap();
    assert_eq!(out, EVAL.replacen(r"    torch.cuda.empty_cache()  # lib\u00e8re\n", "", 1));

    // New non-ASCII text is escaped like the rest of this file.
    let fixed = nb.python_source().replacen("print(step)", "print(\"étape\", step)", 1);
    let out = nb.with_fixed_source(&fixed).unwrap();
    assert_eq!(out, EVAL.replacen(r"print(step)", r#"print(\"\u00e9tape\", step)"#, 1));
}

#[test]
fn lines_inserted_at_a_cell_boundary_start_the_next_cell() {
    let nb = Notebook::parse(TRAIN).unwrap();
    let fixed = nb.python_source().replacen("import torch\n", "import gc\nimport torch\n", 1);
    let out = nb.with_fixed_source(&fixed).unwrap();
    assert_eq!(out, TRAIN.replacen("    \"import torch\\n\",\n", "    \"import gc\\n\",\n    \"import torch\\n\",\n", 1));
    // After the last line of the program: the last code cell (here an empty `[]`).
    let fixed = format!("{}x = 1\n", nb.python_source());
    let out = nb.with_fixed_source(&fixed).unwrap();
    assert_eq!(
        out,
        TRAIN.replacen("   \"source\": []\n", "   \"source\": [\n    \"\\n\",\n    \"x = 1\"\n   ]\n", 1)
    );
    assert_eq!(Notebook::parse(&out).unwrap().python_source(), fixed);
}

#[test]
fn re_indenting_a_block_re_indents_its_magic_lines() {
    let nb = notebook(&["for x in loader:\n    model(x)\n    !nvidia-smi\n    y = !ls \\\n      -l"]);
    let fixed = "with torch.no_grad():\n    for x in loader:\n        model(x)\n        pass  # ipython magic\n        pass  # ipython magic\n    # ipython magic (continued)\n";
    let out = nb.with_fixed_source(fixed).unwrap();
    let source = source_of(&out, 0);
    assert_eq!(source, "with torch.no_grad():\n    for x in loader:\n        model(x)\n        !nvidia-smi\n        y = !ls \\\n          -l");
}

#[test]
fn deleting_a_cells_only_line_leaves_it_empty() {
    let nb = notebook(&["a = 1", "torch.cuda.empty_cache()", "b = 2"]);
    let out = nb.with_fixed_source("a = 1\nb = 2\n").unwrap();
    assert_eq!(source_of(&out, 1), "");
    assert_eq!(source_of(&out, 0), "a = 1");
    assert_eq!(source_of(&out, 2), "b = 2");
}

// ----- errors ----------------------------------------------------------------------

#[test]
fn broken_json_says_where() {
    let err = Notebook::parse(&TRAIN[..TRAIN.len() / 2]).unwrap_err();
    let NotebookError::Json { line, .. } = &err else { panic!("{err:?}") };
    assert!(*line > 100);
    assert!(err.to_string().starts_with("not valid JSON: EOF while parsing"), "{err}");
    let err = Notebook::parse("{\"cells\": [,]}").unwrap_err();
    assert_eq!(err.to_string(), "not valid JSON: expected value (line 1, column 12)");
}

#[test]
fn json_that_is_not_a_notebook_says_why() {
    let cases = [
        ("[1, 2]", "not a Jupyter notebook: the document is a list, not an object with `cells`"),
        ("{\"metadata\": {}}", "not a Jupyter notebook: it has no `cells` list"),
        ("{\"cells\": {}, \"nbformat\": 4}", "not a Jupyter notebook: `cells` is an object, not a list"),
        ("{\"worksheets\": [], \"nbformat\": 3}", "unsupported notebook format: nbformat 3 (memlint reads nbformat 4)"),
        ("{\"worksheets\": []}", "unsupported notebook format: nbformat 3 (memlint reads nbformat 4)"),
        ("{\"cells\": [], \"nbformat\": 4, \"cells\": []}", "not a Jupyter notebook: duplicate field `cells`"),
        ("{\"cells\": [{\"cell_type\": \"markdown\"}, 7]}", "cell 2: a cell must be an object, found a number"),
        ("{\"cells\": [{\"source\": \"x\"}]}", "cell 1: no `cell_type`"),
        ("{\"cells\": [{\"cell_type\": \"code\"}]}", "cell 1: a code cell without `source`"),
        ("{\"cells\": [{\"cell_type\": \"code\", \"source\": 5}]}", "cell 1: `source` must be a string or a list of strings, found a number"),
        ("{\"cells\": [{\"cell_type\": \"code\", \"source\": [\"a\", null]}]}", "cell 1: `source` must be a string or a list of strings, found a list"),
    ];
    for (text, message) in cases {
        let err = Notebook::parse(text).unwrap_err();
        assert_eq!(err.to_string(), message, "{text}");
    }
}

#[test]
fn a_fix_across_cells_is_refused() {
    let nb = Notebook::parse(TRAIN).unwrap();
    // Join cell 3's last line with cell 5's first.
    let fixed = nb.python_source().replacen("device = torch.device(\"cuda\")\ntransform", "device = 1; transform", 1);
    assert_eq!(nb.with_fixed_source(&fixed), Err(NotebookError::FixCrossesCells { first: 3, second: 5 }));
    let err = nb.with_fixed_source(&fixed).unwrap_err().to_string();
    assert_eq!(err, "a fix changes cells 3 and 5 together; cannot write it back into separate cells");
}

#[test]
fn a_fix_that_touches_a_magic_is_refused() {
    let nb = Notebook::parse(TRAIN).unwrap();
    let program = nb.python_source();
    // Deleting the `!nvidia-smi` placeholder.
    let fixed = program.replacen("            pass  # ipython magic\n", "", 1);
    assert_eq!(nb.with_fixed_source(&fixed), Err(NotebookError::FixTouchesMagic { cell: 7, row: 10 }));
    // Editing it.
    let fixed = program.replacen("            pass  # ipython magic\n", "            pass\n", 1);
    assert_eq!(nb.with_fixed_source(&fixed), Err(NotebookError::FixTouchesMagic { cell: 7, row: 10 }));
    // Code before `%%time` would stop it from being a cell magic.
    let fixed = program.replacen("pass  # ipython cell magic\ntrain()", "import torch\npass  # ipython cell magic\ntrain()", 1);
    assert_eq!(nb.with_fixed_source(&fixed), Err(NotebookError::FixTouchesMagic { cell: 8, row: 1 }));
    // Code inside `%%bash`.
    let fixed = program.replacen("# ipython magic (continued)\n", "# ipython magic (continued)\nx = 1\n", 1);
    assert_eq!(nb.with_fixed_source(&fixed), Err(NotebookError::FixTouchesMagic { cell: 9, row: 3 }));
    assert_eq!(
        NotebookError::FixTouchesMagic { cell: 7, row: 10 }.to_string(),
        "a fix changes the IPython magic or shell command in cell 7, line 10; not writing it back"
    );
}

#[test]
fn nothing_panics_and_accepted_write_backs_reparse_to_the_fixed_program() {
    let (mut accepted, mut refused) = (0, 0);
    for text in [TRAIN, EVAL] {
        for end in (0..text.len()).step_by(37) {
            if text.is_char_boundary(end) {
                let _ = Notebook::parse(&text[..end]);
            }
        }
        let nb = Notebook::parse(text).unwrap();
        let lines: Vec<&str> = nb.python_source().split_inclusive('\n').collect();
        for i in 0..=lines.len() {
            let variants = [
                // delete line i
                lines.iter().enumerate().filter(|(j, _)| *j != i).map(|(_, l)| *l).collect::<String>(),
                // insert a line before line i
                lines.iter().enumerate().flat_map(|(j, l)| if j == i { vec!["x = 1\n", *l] } else { vec![*l] }).collect(),
                // indent line i
                lines.iter().enumerate().map(|(j, l)| if j == i { format!("    {l}") } else { l.to_string() }).collect(),
            ];
            for fixed in variants {
                let Ok(out) = nb.with_fixed_source(&fixed) else {
                    refused += 1;
                    continue;
                };
                accepted += 1;
                let again = Notebook::parse(&out).unwrap_or_else(|e| panic!("{e}\n{out}"));
                // Deleting the only line of a cell leaves an empty cell, which is one line.
                let emptied_a_cell = again.python_source() == format!("{fixed}\n");
                assert!(again.python_source() == fixed || emptied_a_cell, "line {i}:\n{fixed}\n---\n{}", again.python_source());
                assert_eq!(again.cell_count(), nb.cell_count());
            }
        }
    }
    // Only changes to magic lines (and code pushed into `%%bash`) are refused.
    assert!(accepted > 3 * refused, "accepted {accepted}, refused {refused}");
}

// ----- end to end with the linter --------------------------------------------------

#[test]
fn lint_map_fix_write_back_reparse() {
    let nb = Notebook::parse(TRAIN).unwrap();
    let settings = LinterSettings::default();
    let result = lint(nb.python_source(), &settings);
    assert!(result.syntax_errors.is_empty());
    let mem004: Vec<_> = result.diagnostics.iter().filter(|d| d.rule == Rule::EmptyCacheInLoop).collect();
    assert_eq!(mem004.len(), 1, "{:#?}", result.diagnostics);
    assert_eq!(nb.cell_position(mem004[0].range.start), Some(pos(7, 8, 13)));

    let outcome = apply_fixes(nb.python_source(), &settings, FixMode::Safe);
    assert!(outcome.fixed.iter().any(|(rule, n)| *rule == Rule::EmptyCacheInLoop && *n == 1), "{:?}", outcome.fixed);
    let out = nb.with_fixed_source(&outcome.source).unwrap();
    assert_eq!(out, TRAIN.replacen("    \"            torch.cuda.empty_cache()\\n\",\n", "", 1));

    let fixed = Notebook::parse(&out).unwrap();
    assert_eq!(fixed.python_source(), outcome.source);
    assert!(lint(fixed.python_source(), &settings).diagnostics.iter().all(|d| d.rule != Rule::EmptyCacheInLoop));
    // Outputs, ids and metadata are still there.
    assert!(out.contains("\"Wall time: 58.4 s\\n\"") && out.contains("\"id\": \"5a6b7c8d\"") && out.contains("\"training\""));
}

#[test]
fn lint_and_fix_a_string_source_notebook() {
    let nb = Notebook::parse(EVAL).unwrap();
    let settings = LinterSettings::default();
    let diagnostics = lint(nb.python_source(), &settings).diagnostics;
    let mem004 = diagnostics.iter().find(|d| d.rule == Rule::EmptyCacheInLoop).expect("MEM004");
    assert_eq!(nb.cell_position(mem004.range.start), Some(pos(3, 3, 5)));
    let outcome = apply_fixes(nb.python_source(), &settings, FixMode::Safe);
    let out = nb.with_fixed_source(&outcome.source).unwrap();
    assert_eq!(Notebook::parse(&out).unwrap().python_source(), outcome.source);
}

// ----- helpers ---------------------------------------------------------------------

/// A notebook, in nbformat's layout, with one code cell per source.
fn notebook(sources: &[&str]) -> Notebook {
    Notebook::parse(&notebook_text(sources)).unwrap()
}

fn notebook_text(sources: &[&str]) -> String {
    let cells: Vec<serde_json::Value> = sources
        .iter()
        .map(|s| {
            let lines: Vec<&str> = s.split_inclusive('\n').collect();
            serde_json::json!({"cell_type": "code", "execution_count": null, "metadata": {}, "outputs": [], "source": lines})
        })
        .collect();
    let nb = serde_json::json!({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5});
    let mut buf = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut buf, serde_json::ser::PrettyFormatter::with_indent(b" "));
    serde::Serialize::serialize(&nb, &mut ser).unwrap();
    String::from_utf8(buf).unwrap() + "\n"
}

/// The joined `source` of code cell `index` (0-based) of a notebook text.
fn source_of(text: &str, index: usize) -> String {
    let value: serde_json::Value = serde_json::from_str(text).unwrap();
    match &value["cells"][index]["source"] {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Array(items) => items.iter().map(|i| i.as_str().unwrap()).collect(),
        other => panic!("{other}"),
    }
}
