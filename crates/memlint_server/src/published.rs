//! The JSON of the findings last published for each document, kept to be written again.
//!
//! After a keystroke nearly every finding of a file is published again as it was: a
//! prediction (see [`crate::incremental`]) moves the findings outside the edited statement
//! by bytes, not by lines, and their places in the client's positions stay the same.
//! Serializing a dense file's thousand findings took about 7 ms of each keystroke's answer
//! (of 16 ms), so a finding that is the same, at the same places, as one last published
//! for the document is written from the JSON made then.

use std::sync::Arc;

use rustc_hash::FxHashMap;
use serde_json::value::RawValue;
use tower_lsp_server::lsp_types::{self as lsp, Uri};

use crate::document::{Document, Encoding};
use crate::server::{push_places, Findings, WireDiagnostic};
use memlint_linter::Diagnostic;

/// Per document, the findings last published for it and each one's JSON.
#[derive(Default)]
pub(crate) struct PublishedJson {
    documents: FxHashMap<Uri, Published>,
}

/// One document's last published findings: each one's places in the client's positions and
/// its JSON, found by its rule and range.
struct Published {
    encoding: Encoding,
    findings: Arc<Findings>,
    places: Places,
    json: Vec<Arc<RawValue>>,
    /// The last finding with each rule and range, and before each finding the one before
    /// it with the same (a chain: a list each cost an allocation per finding).
    by_range: FxHashMap<(memlint_linter::Rule, lsp::Range), usize>,
    same_before: Vec<Option<usize>>,
}

/// Where each finding's JSON puts it ([`push_places`]), one finding after another. (One
/// list for all findings: a list each cost a thousand allocations and frees per keystroke.)
#[derive(Default)]
struct Places {
    ranges: Vec<Option<lsp::Range>>,
    /// Where each finding's ranges start in `ranges`.
    starts: Vec<usize>,
}

impl Places {
    /// Adds finding `i` of `findings` (of `doc`), and returns its own range.
    fn push(&mut self, doc: &Document, findings: &Findings, i: usize, docs: &std::collections::HashMap<Uri, Document>, encoding: Encoding) -> lsp::Range {
        let start = self.ranges.len();
        self.starts.push(start);
        push_places(doc, findings, i, docs, encoding, &mut self.ranges);
        self.ranges[start].unwrap_or_default()
    }

    fn of(&self, i: usize) -> &[Option<lsp::Range>] {
        &self.ranges[self.starts[i]..self.starts.get(i + 1).copied().unwrap_or(self.ranges.len())]
    }
}

/// Whether two findings read the same apart from their byte ranges (every field is named,
/// so a field added to [`Diagnostic`] must be decided here).
fn same_apart_from_ranges(a: &Diagnostic, b: &Diagnostic) -> bool {
    let Diagnostic { rule, message, help, range: _, severity, fix, evidence } = a;
    *rule == b.rule
        && *severity == b.severity
        && *message == b.message
        && *help == b.help
        && evidence.len() == b.evidence.len()
        && evidence.iter().zip(&b.evidence).all(|(x, y)| x.text == y.text && x.range.is_some() == y.range.is_some())
        && match (fix, &b.fix) {
            (None, None) => true,
            (Some(x), Some(y)) => {
                x.applicability == y.applicability
                    && x.message == y.message
                    && x.edits.len() == y.edits.len()
                    && x.edits.iter().zip(&y.edits).all(|(e, f)| e.content == f.content)
            }
            _ => false,
        }
}

impl Published {
    /// The JSON published before for finding `i` of `findings`, if one was the same at
    /// the same places (`places`, whose last finding is `i`).
    fn json_of(&self, findings: &Findings, i: usize, places: &Places, range: lsp::Range) -> Option<Arc<RawValue>> {
        let d = &findings.diagnostics[i];
        let last = self.by_range.get(&(d.rule, range)).copied();
        std::iter::successors(last, |&j| self.same_before[j]).find_map(|j| {
            let same = self.places.of(j) == places.of(i)
                && same_apart_from_ranges(&self.findings.diagnostics[j], d)
                && self.findings.elsewhere_of(j) == findings.elsewhere_of(i);
            same.then(|| self.json[j].clone())
        })
    }
}

impl PublishedJson {
    /// The JSON of each finding of `findings` (of `doc`), in order: written again where
    /// the last publish for `doc` had the same finding at the same places, serialized
    /// otherwise. Remembers them for the next publish.
    pub(crate) fn diagnostics(
        &mut self,
        doc: &Document,
        findings: &Arc<Findings>,
        docs: &std::collections::HashMap<Uri, Document>,
        encoding: Encoding,
    ) -> Vec<Arc<RawValue>> {
        let last = self.documents.remove(&doc.uri).filter(|p| p.encoding == encoding);
        let n = findings.diagnostics.len();
        let mut places = Places { ranges: Vec::with_capacity(4 * n), starts: Vec::with_capacity(n) };
        let mut json = Vec::with_capacity(n);
        let mut by_range = FxHashMap::default();
        by_range.reserve(n);
        let mut same_before = Vec::with_capacity(n);
        for i in 0..n {
            let range = places.push(doc, findings, i, docs, encoding);
            let made = last.as_ref().and_then(|p| p.json_of(findings, i, &places, range)).unwrap_or_else(|| {
                let wire = WireDiagnostic::placed(doc, findings, i, docs, places.of(i));
                // Serializing plain structs of strings and numbers cannot fail.
                Arc::from(serde_json::value::to_raw_value(&wire).expect("a diagnostic serializes"))
            });
            same_before.push(by_range.insert((findings.diagnostics[i].rule, range), i));
            json.push(made);
        }
        self.documents.insert(
            doc.uri.clone(),
            Published { encoding, findings: findings.clone(), places, json: json.clone(), by_range, same_before },
        );
        json
    }

    /// Forgets the documents that are no longer open.
    pub(crate) fn retain_open(&mut self, docs: &std::collections::HashMap<Uri, Document>) {
        self.documents.retain(|uri, _| docs.contains_key(uri));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memlint_linter::{lint, LinterSettings};

    const TRAIN: &str = "import torch\n\n\ndef train(model, loader, optimizer):\n    total = 0\n    for x, y in loader:\n        loss = model(x).sum()\n        loss.backward()\n        optimizer.step()\n        total += loss\n        torch.cuda.empty_cache()\n    return total\n\n\ndef evaluate(model, loader):\n    model.eval()\n    outs = []\n    for x, _ in loader:\n        outs.append(model(x))\n    return outs\n";

    fn document(text: &str, version: i32) -> Document {
        Document::new("file:///t.py".parse().unwrap(), text.to_owned(), version)
    }

    fn findings(text: &str) -> Arc<Findings> {
        Arc::new(Findings::of_file(lint(text, &LinterSettings::default()).diagnostics))
    }

    /// Each finding's JSON as serialized afresh, with no memory of a publish.
    fn fresh(doc: &Document, findings: &Arc<Findings>) -> Vec<String> {
        let docs = std::collections::HashMap::new();
        (0..findings.diagnostics.len())
            .map(|i| serde_json::to_string(&WireDiagnostic::of(doc, findings, i, &docs, Encoding::Utf16)).unwrap())
            .collect()
    }

    fn published(memo: &mut PublishedJson, doc: &Document, findings: &Arc<Findings>) -> Vec<String> {
        memo.diagnostics(doc, findings, &std::collections::HashMap::new(), Encoding::Utf16).iter().map(|j| j.get().to_owned()).collect()
    }

    #[test]
    fn after_an_edit_every_finding_reads_as_serialized_afresh() {
        let mut memo = PublishedJson::default();
        let (old_doc, old) = (document(TRAIN, 1), findings(TRAIN));
        assert_eq!(published(&mut memo, &old_doc, &old), fresh(&old_doc, &old));
        assert!(old.diagnostics.len() >= 3, "{:?}", old.diagnostics);
        // Edits that move findings by bytes on their own line, by lines, change a message
        // with the places kept (a variable renamed to a name as long) or moved, and take a
        // finding away.
        for text in [
            TRAIN.replace("total += loss", "total  += loss"),
            TRAIN.replace("    total = 0\n", "    total = 0\n\n"),
            TRAIN.replace("total", "tally"),
            TRAIN.replace("total", "running"),
            TRAIN.replace("        torch.cuda.empty_cache()\n", ""),
            TRAIN.replace("def evaluate", "def evaluatex"),
        ] {
            let (doc, new) = (document(&text, 2), findings(&text));
            assert_eq!(published(&mut memo, &doc, &new), fresh(&doc, &new), "{text}");
            // And back: the memo now holds the edited text's JSON.
            assert_eq!(published(&mut memo, &old_doc, &old), fresh(&old_doc, &old));
        }
    }

    #[test]
    fn a_finding_whose_words_or_other_places_changed_is_serialized_again() {
        let doc = document(TRAIN, 1);
        let old = findings(TRAIN);
        // Its words, or the place of a fact or of a fix edit (not its own range).
        let changes: [fn(&mut Diagnostic); 7] = [
            |d| d.message.push('!'),
            |d| d.evidence.iter_mut().find_map(|f| f.range.as_mut()).unwrap().start -= 1,
            |d| d.fix.as_mut().unwrap().edits[0].range.end += 1,
            |d| d.help = Some("another help".into()),
            |d| d.evidence[0].text.push('!'),
            |d| d.fix.as_mut().unwrap().message.push('!'),
            |d| d.fix.as_mut().unwrap().edits[0].content.push('!'),
        ];
        for change in changes {
            let mut memo = PublishedJson::default();
            published(&mut memo, &doc, &old);
            let mut diagnostics = old.diagnostics.clone();
            let with_fix = diagnostics.iter_mut().find(|d| d.fix.is_some() && !d.evidence.is_empty()).unwrap();
            change(with_fix);
            let new = Arc::new(Findings::of_file(diagnostics));
            assert_eq!(published(&mut memo, &doc, &new), fresh(&doc, &new));
        }
    }

    #[test]
    fn a_finding_the_same_at_the_same_places_is_written_from_the_last_json() {
        let mut memo = PublishedJson::default();
        let text = TRAIN;
        let (doc, first) = (document(text, 1), findings(text));
        let before = memo.diagnostics(&doc, &first, &std::collections::HashMap::new(), Encoding::Utf16);
        // A character typed inside `evaluate`: every finding of `train` above it is the same.
        let edited = TRAIN.replace("outs = []", "outs = [ ]");
        let (doc2, second) = (document(&edited, 2), findings(&edited));
        let after = memo.diagnostics(&doc2, &second, &std::collections::HashMap::new(), Encoding::Utf16);
        let in_train = second.diagnostics.iter().filter(|d| d.range.start < TRAIN.find("def evaluate").unwrap()).count();
        assert!(in_train >= 2);
        for i in 0..in_train {
            assert!(Arc::ptr_eq(&before[i], &after[i]), "finding {i} was serialized again");
        }
        // The encoding changed: nothing is reused.
        let utf8 = memo.diagnostics(&doc2, &second, &std::collections::HashMap::new(), Encoding::Utf8);
        assert!(!Arc::ptr_eq(&utf8[0], &after[0]));
    }
}
