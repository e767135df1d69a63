//! Control and value facts asked for any spelling of the same program (issue 32): a
//! loop's count in every loop form, a flag through chains of names, the element a loop
//! target or `next()` receives, one element of a container display.

use memlint_python::{parse, NodeExt, SemanticModel, ValueKind};

/// The `k` of the loop that starts at the line containing `marker` (its text), or "-".
fn count(source: &str, marker: &str) -> String {
    let parsed = parse(source);
    let model = SemanticModel::new(&parsed.tree, source);
    let line = source.lines().position(|l| l.contains(marker)).expect("marker");
    let l = model.loops().iter().copied().find(|l| l.start_position().row == line).expect("a loop on that line");
    match model.iteration_count(l) {
        Some((k, from_range)) => format!("{}{}", model.text(k), if from_range { " (range)" } else { "" }),
        None => "-".to_owned(),
    }
}

/// The kind of the last identifier `name` in the source.
fn kind_of(source: &str, name: &str) -> ValueKind {
    let parsed = parse(source);
    let model = SemanticModel::new(&parsed.tree, source);
    let mut found = None;
    let mut stack = vec![parsed.tree.root_node()];
    while let Some(n) = stack.pop() {
        if n.kind_name() == "identifier" && model.text(n) == name && found.is_none_or(|f: memlint_python::tree_sitter::Node| f.start_byte() < n.start_byte()) {
            found = Some(n);
        }
        let mut cursor = n.walk();
        stack.extend(n.named_children(&mut cursor));
    }
    model.value_kind(found.expect("the name"))
}

#[test]
fn the_count_of_a_loop_in_every_form() {
    let source = "\
import itertools
import torch
def f(x, k, it):
    for part in x.chunk(k):  # chunk
        pass
    for part in torch.chunk(x, k):  # torch-chunk
        pass
    for i, part in enumerate(x.chunk(k)):  # enumerate
        pass
    for part, _c in zip(x.chunk(k), itertools.count()):  # zip-count
        pass
    for a, b in zip(x.chunk(k), x.chunk(k)):  # zip-same
        pass
    for a, b in zip(x.chunk(k), x.chunk(2)):  # zip-differs
        pass
    for _ in range(k):  # range
        pass
    _it = iter(x.chunk(k))
    while True:  # while-iter
        try:
            part = next(_it)
        except StopIteration:
            break
    while True:  # while-forever
        part = next(it)
    for y in x:  # plain
        pass
";
    let cases = ["chunk", "torch-chunk", "enumerate", "zip-count", "zip-same", "zip-differs", "range", "while-iter", "while-forever", "plain"];
    let found: Vec<String> = cases.iter().map(|c| format!("{c}: {}", count(source, &format!("# {c}")))).collect();
    assert_eq!(
        found,
        [
            "chunk: k",
            "torch-chunk: k",
            "enumerate: k",
            "zip-count: k",
            "zip-same: k",
            "zip-differs: -",
            "range: k (range)",
            "while-iter: k",
            "while-forever: -",
            "plain: -"
        ]
    );
}

#[test]
fn a_flag_is_followed_through_chains_of_names() {
    let source = "\
def f(i, k):
    do_step = (i + 1) % k == 0
    _gate = do_step
    if _gate:
        pass
";
    let parsed = parse(source);
    let model = SemanticModel::new(&parsed.tree, source);
    let gate = model.identifiers_named_in("_gate", 0..source.len()).last().copied().unwrap();
    let value = model.flag_value(gate);
    assert_eq!(model.text(value), "(i + 1) % k == 0");
    assert_eq!(model.period_of(value).map(|k| model.text(k)), Some("k"));
}

#[test]
fn elements_of_containers_of_networks_in_every_loop_form() {
    let prelude = "import itertools\nimport torch.nn as nn\nnets = [nn.Linear(2, 2), nn.Linear(2, 2)]\n";
    for body in [
        "for net in nets:\n    net\n",
        "for i, net in enumerate(nets):\n    net\n",
        "for net, _c in zip(nets, itertools.count()):\n    net\n",
        "_it = iter(nets)\nnet = next(_it)\nnet\n",
        "net = nets[0]\nnet\n",
    ] {
        assert_eq!(kind_of(&format!("{prelude}{body}"), "net"), ValueKind::Model, "{body}");
    }
    // The counter of `enumerate` and `zip`'s other element are not networks.
    assert_eq!(kind_of(&format!("{prelude}for i, net in enumerate(nets):\n    i\n"), "i"), ValueKind::Unknown);
    assert_eq!(kind_of(&format!("{prelude}for net, c in zip(nets, itertools.count()):\n    c\n"), "c"), ValueKind::Unknown);
}

#[test]
fn one_element_of_a_display_and_an_element_used_as_a_module() {
    let source = "\
import torch.nn as nn
import hub
nets = {\"g\": nn.Linear(2, 2), \"h\": hub.build()}
g = nets[\"g\"]
h = nets[\"h\"]
nets[\"h\"].eval()
g, h
";
    assert_eq!(kind_of(source, "g"), ValueKind::Model);
    // `hub.build()` is unknown; `nets["h"].eval()` says it is a module.
    assert_eq!(kind_of(source, "h"), ValueKind::Model);
    let unused = "import hub\nnets = {\"h\": hub.build()}\nh = nets[\"h\"]\nh\n";
    assert_eq!(kind_of(unused, "h"), ValueKind::Unknown);
}

#[test]
fn a_backpropagated_name_carries_history_whatever_built_it() {
    // `model` is a parameter no one here passes: unknown. Backpropagating `loss` is the fact.
    let trained = "import torch\ndef f(model, x, y):\n    loss = torch.nn.functional.mse_loss(model(x), y)\n    loss.backward()\n    total = loss\n";
    assert_eq!(kind_of(trained, "loss"), ValueKind::GradTensor);
    for spelled in ["(loss / 4).backward()", "scaler.scale(loss).backward()", "torch.autograd.backward(loss)"] {
        let source = format!("import torch\ndef f(model, x, y, scaler):\n    loss = model(x)\n    {spelled}\n    total = loss\n");
        assert_eq!(kind_of(&source, "loss"), ValueKind::GradTensor, "{spelled}");
    }
    // Not the same binding, not a tensor's backward (a framework's takes the loss), no backward.
    let rebound = "def f(model, x):\n    loss = model(x)\n    loss.backward()\n    loss = model(x)\n    total = loss\n";
    assert_eq!(kind_of(rebound, "loss"), ValueKind::Unknown);
    let framework = "def f(accelerator, model, x):\n    out = model(x)\n    accelerator.backward(out)\n    total = accelerator\n";
    assert_eq!(kind_of(framework, "accelerator"), ValueKind::Unknown);
    assert_eq!(kind_of("def f(model, x):\n    loss = model(x)\n    total = loss\n", "loss"), ValueKind::Unknown);
}

#[test]
fn a_class_whose_base_memlint_cannot_see_into_may_be_a_module() {
    let source = "\
import abc
import torch.nn as nn
from mmcv.runner import BaseModule
class Head(BaseModule):
    pass
class Deeper(Head):
    pass
class Net(nn.Module):
    pass
class Config(object):
    pass
class Base(abc.ABC):
    pass
";
    let parsed = parse(source);
    let model = SemanticModel::new(&parsed.tree, source);
    let may = |c: &str| model.may_be_module_class(c);
    assert!(may("Head") && may("Deeper") && may("Net"));
    assert!(!may("Config") && !may("Base"), "Python's own bases are no module");
    assert!(!model.is_module_class("Head"), "not known to be one either");
}

#[test]
fn a_local_function_gives_back_its_parameter_only_when_every_return_of_its_own_does() {
    // Two calls hand it different things: what each gets back is its own argument.
    // Returns of a function or class nested in it are not its own.
    let nested = "\
import torch
import torch.nn as nn
def to_device(m, flag):
    def helper(y):
        return y + 1
    class Box:
        def get(self):
            return 0
    if flag:
        return m.cuda()
    for _ in range(2):
        pass
    return m
other = to_device(torch.zeros(3), False)
net = to_device(nn.Linear(2, 2), True)
net
";
    assert_eq!(kind_of(nested, "net"), ValueKind::Model);
    // A `return` under a loop or a `try` is its own.
    let deep = "\
import torch
import torch.nn as nn
def to_device(m, flag):
    for _ in range(2):
        try:
            return 3
        except ValueError:
            pass
    return m
other = to_device(torch.zeros(3), False)
net = to_device(nn.Linear(2, 2), True)
net
";
    assert_ne!(kind_of(deep, "net"), ValueKind::Model);
}

/// A module's backward passes, however the call is spelled: the method, the autograd
/// functions by their full name, through an aliased module, an aliased import or a
/// module-level alias; and calls that only look alike.
#[test]
fn a_backward_pass_in_every_spelling() {
    let backward_calls = |call: &str| {
        let source = format!(
            "import torch\nimport torch.autograd as ag\nfrom torch.autograd import grad as g\ngrad_fn = torch.autograd.grad\ndef f(loss, x, optimizer):\n    {call}\n"
        );
        let parsed = parse(&source);
        let model = SemanticModel::new(&parsed.tree, &source);
        model.backward_calls().iter().map(|c| model.text(*c).to_owned()).collect::<Vec<_>>()
    };
    for call in ["loss.backward()", "torch.autograd.grad(loss, x)", "torch.autograd.backward(loss)", "ag.grad(loss, x)", "g(loss, x)", "grad_fn(loss, x)"] {
        assert_eq!(backward_calls(call), vec![call.to_owned()], "{call}");
    }
    for call in ["torch.autograd.gradcheck(f, x)", "ag.functional.jacobian(f, x)", "optimizer.step()", "grad(loss, x)", "x.grad.zero_()", "torch.grad(x)"] {
        assert!(backward_calls(call).is_empty(), "{call}");
    }
}
