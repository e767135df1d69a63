//! Where a forward pass's output goes (`HistoryFlow::result_reaches_backward`): followed
//! through the names it is assigned to, to a `backward()` or out of its function.

use memlint_python::{parse, HistoryFlow, NodeExt, SemanticModel};

/// Whether the output of the call spelled `call` reaches a backward pass.
fn reaches(source: &str, call: &str) -> bool {
    let parsed = parse(source);
    let model = SemanticModel::new(&parsed.tree, source);
    let flow = HistoryFlow::new(&model);
    let node = model.calls().iter().copied().find(|c| model.text(*c) == call).unwrap_or_else(|| panic!("no call `{call}`"));
    assert_eq!(node.kind_name(), "call");
    flow.result_reaches_backward(node)
}

#[test]
fn an_output_assigned_on_to_a_name_twice_is_followed_from_the_first_assignment() {
    // `loss` is assigned from `out` twice; the backward between the two assignments counts,
    // whichever assignment is followed first.
    let source = "\
import torch.nn.functional as F

def step(model, x, y):
    out = model(x)
    loss = F.mse_loss(out, y)
    loss.backward()
    loss = F.l1_loss(out, y)
    print(loss.item())
";
    assert!(reaches(source, "model(x)"));
}

#[test]
fn an_output_only_printed_reaches_no_backward() {
    let source = "\
import torch.nn.functional as F

def step(model, x, y):
    out = model(x)
    loss = F.mse_loss(out, y)
    print(loss.item())
    other = model(y)
    other.sum().backward()
";
    assert!(!reaches(source, "model(x)"));
    assert!(reaches(source, "model(y)"));
}
