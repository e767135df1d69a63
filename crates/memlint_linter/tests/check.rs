//! Many tiny data-driven tests through one `check(input, expect)` helper: the source in,
//! one line per finding out (`row:col CODE message-start`).

mod common;

use common::{check, check_with_values};
use expect_test::expect;

// ----- imports and aliases --------------------------------------------------------

#[test]
fn empty_cache_through_module_alias() {
    check_with_values(
        r#"
        import torch as th
        for x in loader:
            model(x)
            th.cuda.empty_cache()
        "#,
        expect![[r#"
            3:5 MEM001 forward pass `model(x)` runs with gradient tracking but its 
            4:5 MEM004 `th.cuda.empty_cache()` in the per-step loop returns cached 
        "#]],
    );
}

#[test]
fn empty_cache_through_from_import() {
    check_with_values(
        r#"
        from torch import cuda
        for batch in train_loader:
            cuda.empty_cache()
        "#,
        expect![[r#"
            3:5 MEM004 `cuda.empty_cache()` in the per-step loop returns cached blo
        "#]],
    );
}

#[test]
fn empty_cache_through_function_local_import() {
    check_with_values(
        r#"
        def train(loader):
            from torch.cuda import empty_cache as free
            for batch in loader:
                free()
        train(train_loader)
        "#,
        expect![[r#"
            4:9 MEM004 `free()` in the per-step loop returns cached blocks to the d
        "#]],
    );
    check_with_values(
        r#"
        def train(loader):
            from torch.cuda import empty_cache
            for batch in loader:
                empty_cache()
        train(train_loader)
        "#,
        expect![[r#"
            4:9 MEM004 `empty_cache()` in the per-step loop returns cached blocks t
        "#]],
    );
}

#[test]
fn empty_cache_of_something_else_is_not_torch() {
    check(
        r#"
        import torch
        for batch in loader:
            allocator.empty_cache()
        "#,
        expect![""],
    );
}

#[test]
fn unimported_torch_is_not_resolved() {
    check(
        r#"
        for batch in loader:
            torch.cuda.empty_cache()
        "#,
        expect![""],
    );
}

// ----- gradient contexts -----------------------------------------------------------

#[test]
fn no_grad_with_alias() {
    check(
        r#"
        import torch as th
        def evaluate(model, x):
            with th.no_grad():
                return model(x)
        "#,
        expect![""],
    );
}

#[test]
fn no_grad_imported_by_name() {
    check(
        r#"
        from torch import no_grad, inference_mode
        def evaluate(model, x):
            with no_grad():
                model(x)
            with inference_mode():
                model(x)
        "#,
        expect![""],
    );
}

#[test]
fn inference_mode_false_keeps_gradients() {
    check_with_values(
        r#"
        def evaluate(x):
            with torch.inference_mode(False):
                print(model(x))
        "#,
        expect![[r#"
            3:15 MEM001 forward pass `model(x)` runs with gradient tracking but its 
        "#]],
    );
}

#[test]
fn enable_grad_inside_no_grad_wins() {
    check(
        r#"
        import torch
        @torch.no_grad()
        def evaluate(model, x):
            with torch.enable_grad():
                return model(x)
        "#,
        expect![""],
    );
}

#[test]
fn decorator_whose_name_says_no_grad() {
    check(
        r#"
        from utils import run_in_inference
        @run_in_inference
        def predict(model, x):
            return model(x)

        @my_no_grad_wrapper()
        def evaluate(model, x):
            return model(x)
        "#,
        expect![""],
    );
}

#[test]
fn set_grad_enabled_statement_turns_gradients_off() {
    check(
        r#"
        import torch
        def evaluate(model, x):
            torch.set_grad_enabled(False)
            return model(x)
        "#,
        expect![""],
    );
}

#[test]
fn function_called_from_both_contexts_is_flagged() {
    check_with_values(
        r#"
        def predict_one(x):
            return model(x)

        def a(x):
            with torch.no_grad():
                predict_one(x)

        def b(x):
            predict_one(x)
        "#,
        expect![[r#"
            2:12 MEM001 forward pass `model(x)` runs with gradient tracking but it i
        "#]],
    );
}

#[test]
fn helper_only_called_from_a_decorated_function() {
    check(
        r#"
        import torch
        def infer_batch(model, x):
            return model(x)

        def infer_all(model, xs):
            return [infer_batch(model, x) for x in xs]

        @torch.inference_mode()
        def main(model, xs):
            infer_all(model, xs)
        "#,
        expect![""],
    );
}

#[test]
fn method_only_called_from_no_grad_through_self() {
    check(
        r#"
        import torch
        class Runner:
            def _infer(self, x):
                return self.model(x)

            def evaluate(self, loader):
                with torch.no_grad():
                    for x in loader:
                        self._infer(x)
        "#,
        expect![""],
    );
}

#[test]
fn an_attribute_of_self_is_its_class_hierarchys_not_another_classs() {
    // `Trainer.net` is another attribute than `Metric.net` (a function passed in): the
    // forward in `Metric.evaluate` rests on no network.
    let classes = r#"
        import torch
        from torch import nn

        class Trainer:
            def __init__(self):
                self.net = nn.Linear(2, 2)

        class Metric:
            def __init__(self, fn):
                self.net = fn

            def evaluate(self, loader):
                scores = []
                for x in loader:
                    scores.append(self.net(x).argmax().item())
                return scores
        "#;
    check(classes, expect![""]);
    // A class deriving from `Metric` that sets a network is in its hierarchy.
    let derived = format!("{classes}\n        class Child(Metric):\n            def __init__(self):\n                self.net = nn.Linear(2, 2)\n");
    check(
        &derived,
        expect![[r#"
            15:27 MEM001 forward pass `self.net(x)` runs with gradient tracking but i
        "#]],
    );
}

// ----- MEM001 details --------------------------------------------------------------

#[test]
fn eval_on_another_module_does_not_count() {
    check(
        r#"
        def step(model, teacher, x):
            teacher.eval()
            out = model(x)
            return out
        "#,
        expect![""],
    );
}

#[test]
fn eval_on_parent_module_counts_for_its_submodule() {
    check_with_values(
        r#"
        class AutoEncoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.encoder = nn.Linear(4, 4)

        ae = AutoEncoder()

        def embed(x):
            ae.eval()
            return ae.encoder(x)
        "#,
        expect![[r#"
            10:12 MEM001 forward pass `ae.encoder(x)` runs with gradient tracking but
        "#]],
    );
}

#[test]
fn train_false_counts_as_eval() {
    check_with_values(
        r#"
        def embed(x):
            model.train(False)
            return model(x)
        "#,
        expect![[r#"
            3:12 MEM001 forward pass `model(x)` runs with gradient tracking but afte
        "#]],
    );
}

#[test]
fn user_module_class_instances_are_models() {
    check_with_values(
        r#"
        import torch.nn as nn
        class Scorer(nn.Module):
            def __init__(self):
                super().__init__()
                self.head = nn.Linear(8, 1)
        scorer = Scorer()
        for batch in test_loader:
            scorer(batch)
        "#,
        expect![[r#"
            8:5 MEM001 forward pass `scorer(batch)` runs with gradient tracking but
        "#]],
    );
}

#[test]
fn non_module_callables_are_not_forward_passes() {
    check(
        r#"
        def evaluate(tokenizer, metric, x):
            tokenizer(x)
            metric(x)
            len(x)
        "#,
        expect![""],
    );
}

#[test]
fn a_sampling_loop_whose_outputs_are_only_read_is_inference() {
    check_with_values(
        r#"
        def sample(idx, steps):
            for _ in range(steps):
                logits = model(idx)
                idx = torch.cat([idx, logits.argmax(-1, keepdim=True)], 1)
            return idx
        "#,
        expect![[r#"
            3:18 MEM001 forward pass `model(idx)` runs with gradient tracking but it
        "#]],
    );
}

#[test]
fn lightning_hooks_are_no_grad() {
    check(
        r#"
        import lightning as L
        class Lit(L.LightningModule):
            def validation_step(self, batch, i):
                return self.model(batch)
            def training_step(self, batch, i):
                return self.model(batch)
        "#,
        expect![""],
    );
}

// ----- MEM002 details --------------------------------------------------------------

#[test]
fn hf_style_outputs_loss_has_history() {
    check_with_values(
        r#"
        total = 0
        for batch in train_loader:
            outputs = model(**batch)
            loss = outputs.loss
            loss.backward()
            total += loss
        "#,
        expect![[r#"
            6:5 MEM002 `total += loss` keeps each step's graph nodes and loss tenso
        "#]],
    );
}

#[test]
fn tuple_unpacked_model_outputs_have_history() {
    check_with_values(
        r#"
        import torch
        preds = []
        for x in train_loader:
            logits, hidden = model(x)
            logits.sum().backward()
            preds += logits
        "#,
        expect![[r#"
            6:5 MEM002 `preds += logits` keeps each step's graph nodes and loss ten
        "#]],
    );
}

#[test]
fn loss_computed_under_no_grad_has_no_history() {
    check(
        r#"
        import torch
        total = 0
        for x, y in val_loader:
            with torch.no_grad():
                loss = criterion(model(x), y)
            total += loss
        "#,
        expect![""],
    );
}

#[test]
fn detached_and_numbers_are_fine() {
    check(
        r#"
        total = 0
        for x, y in train_loader:
            loss = criterion(model(x), y)
            loss.backward()
            value = loss.item()
            total += value
            d = loss.detach()
            total += d
            total += loss.detach().cpu()
        "#,
        expect![""],
    );
}

#[test]
fn unknown_values_are_not_flagged() {
    check(
        r#"
        total = 0
        for x in loader:
            total += compute(x)
            total += x
        "#,
        expect![""],
    );
}

// ----- MEM003 details --------------------------------------------------------------

#[test]
fn half_model_without_backward_is_inference() {
    check_with_values(
        r#"
        model = Net().half()
        out = model(x)
        "#,
        expect![[r#"
            2:7 MEM001 forward pass `model(x)` runs with gradient tracking but its 
        "#]],
    );
}

#[test]
fn grad_scaler_anywhere_in_module_is_enough() {
    check(
        r#"
        import torch
        model = Net().cuda().half()
        scaler = torch.amp.GradScaler("cuda")
        for x in loader:
            scaler.scale(model(x).sum()).backward()
        "#,
        expect![""],
    );
}

#[test]
fn accelerate_backward_scales_itself() {
    check(
        r#"
        model = model.half()
        for x in loader:
            accelerator.backward(model(x).sum())
        "#,
        expect![""],
    );
}

// ----- MEM004 details --------------------------------------------------------------

#[test]
fn empty_cache_in_epoch_loop_is_fine() {
    check(
        r#"
        import torch
        for epoch in range(10):
            train_one_epoch(model, loader)
            torch.cuda.empty_cache()
        "#,
        expect![""],
    );
}

#[test]
fn empty_cache_in_bare_while_training_loop() {
    check(
        r#"
        import torch
        while True:
            loss = model(next(it)).sum()
            loss.backward()
            torch.cuda.empty_cache()
        "#,
        expect![[r#"
            5:5 MEM004 `torch.cuda.empty_cache()` in the per-step loop returns cach
        "#]],
    );
}

// ----- suppression ------------------------------------------------------------------

#[test]
fn noqa_variants() {
    check_with_values(
        r#"
        import torch
        for x in loader:
            model(x)
            torch.cuda.empty_cache()  # noqa
            torch.cuda.empty_cache()  # NOQA: MEM004
            torch.cuda.empty_cache()  # noqa: MEM001, MEM004
            torch.cuda.empty_cache()  # memlint: ignore[empty-cache-in-loop]
            torch.cuda.empty_cache()  # type: ignore  # noqa:MEM004
            torch.cuda.empty_cache()  # noqa: MEM001
            torch.cuda.empty_cache()  # noqa: E501
        "#,
        expect![[r#"
            3:5 MEM001 forward pass `model(x)` runs with gradient tracking but its 
            6:31 MEM013 Unused `noqa` directive (unused: `MEM001`)
            9:5 MEM004 `torch.cuda.empty_cache()` in the per-step loop returns cach
            9:31 MEM013 Unused `noqa` directive (unused: `MEM001`)
            10:5 MEM004 `torch.cuda.empty_cache()` in the per-step loop returns cach
        "#]],
    );
}

#[test]
fn noqa_inside_a_string_is_not_a_comment() {
    check_with_values(
        r##"
        import torch
        for x in loader:
            model(x)
            torch.cuda.empty_cache(); s = "# noqa"
        "##,
        expect![[r#"
            3:5 MEM001 forward pass `model(x)` runs with gradient tracking but its 
            4:5 MEM004 `torch.cuda.empty_cache()` in the per-step loop returns cach
        "#]],
    );
}

#[test]
fn skip_file() {
    check(
        r#"
        import torch
        # memlint: skip-file
        for x in loader:
            model(x)
            torch.cuda.empty_cache()
        "#,
        expect![""],
    );
}

// ----- syntax errors ----------------------------------------------------------------

#[test]
fn syntax_error_elsewhere_does_not_stop_other_rules() {
    check_with_values(
        r#"
        import torch
        def broken(:
            pass

        def train(loader):
            for x in loader:
                model(x)
                torch.cuda.empty_cache()
        "#,
        expect![[r#"
            2:12 syntax-error expected `)`
            7:9 MEM001 forward pass `model(x)` runs with gradient tracking but its 
            8:9 MEM004 `torch.cuda.empty_cache()` in the per-step loop returns cach
        "#]],
    );
}

#[test]
fn no_finding_from_a_broken_no_grad_header() {
    check_with_values(
        r#"
        import torch
        def evaluate(model, x):
            with torch.no_grad()
                out = model(x)
        "#,
        expect![[r#"
            3:5 syntax-error unexpected `with torch.no_grad()`
        "#]],
    );
}

// ----- MEM007 details --------------------------------------------------------------

#[test]
fn data_parallel_through_aliases() {
    check(
        r#"
        import torch as th
        from torch.nn import DataParallel as DP
        a = th.nn.DataParallel(net)
        b = DP(net)
        a(x), b(x)
        "#,
        expect![[r#"
            3:5 MEM007 `th.nn.DataParallel(net)`: `DataParallel` drives every GPU f
            4:5 MEM007 `DP(net)`: `DataParallel` drives every GPU from one process:
            5:1 MEM001 forward pass `a(x)` runs with gradient tracking but its outp
            5:7 MEM001 forward pass `b(x)` runs with gradient tracking but its outp
        "#]],
    );
}

#[test]
fn data_parallel_only_to_load_a_checkpoint_is_fine() {
    // The wrapper loads a `module.`-prefixed state dict and is unwrapped: it never runs.
    check(
        r#"
        import torch
        def main(args):
            model = torch.nn.DataParallel(Net(args))
            model.load_state_dict(torch.load(args.ckpt, map_location="cpu"))
            model = model.module
            model.cuda()
            model.eval()
            with torch.no_grad():
                print(model(args.x))
        "#,
        expect![""],
    );
}

#[test]
fn data_parallel_on_one_device_or_unimported_is_fine() {
    check(
        r#"
        import torch.nn as nn
        a = nn.DataParallel(net, device_ids=[0])
        b = nn.DataParallel(net, [1])
        c = DataParallel(net)
        if isinstance(net, nn.DataParallel):
            net = net.module
        "#,
        expect![""],
    );
}

// ----- MEM008 details --------------------------------------------------------------

#[test]
fn torch_load_positional_map_location_and_kwargs() {
    check(
        r#"
        import torch
        a = torch.load(path, lambda s, loc: s)
        b = torch.load(path, **opts)
        c = torch.load(path, weights_only=True)
        net.cuda()
        "#,
        expect![[r#"
            4:5 MEM008 `torch.load(path, weights_only=True)` without `map_location`
        "#]],
    );
}

#[test]
fn torch_load_in_a_program_that_never_uses_cuda() {
    // A conversion script: nothing in it touches a GPU.
    check(
        r#"
        import sys
        import torch
        net = torch.load(sys.argv[1])
        torch.save({k.replace("module.", ""): v for k, v in net.items()}, sys.argv[2])
        "#,
        expect![""],
    );
    // A `--cuda` flag nobody reads, a docstring and a comment that mention CUDA.
    check(
        r#"
        """Runs the demo (CUDA is not needed)."""
        import argparse
        import torch
        parser = argparse.ArgumentParser()
        parser.add_argument("--cuda", default=False, help="use cuda")
        args = parser.parse_args()

        def main():
            net = torch.load("net.pth")  # trained on cuda
            print(net)

        if __name__ == "__main__":
            main()
        "#,
        expect![""],
    );
}

#[test]
fn torch_load_in_a_program_that_uses_cuda() {
    // The flag is read: the program may use CUDA.
    check(
        r#"
        import torch
        net = torch.load("net.pth")
        if args.cuda:
            net = net.cuda()
        "#,
        expect![[r#"
            2:7 MEM008 `torch.load("net.pth")` without `map_location` restores ever
        "#]],
    );
    // A device string in code.
    check(
        r#"
        import torch
        state = torch.load("net.pth")
        x = torch.zeros(3).pin_memory().to("cuda:0")
        "#,
        expect![[r#"
            2:9 MEM008 `torch.load("net.pth")` without `map_location` restores ever
        "#]],
    );
    check(
        r#"
        import os, torch
        os.environ["CUDA_VISIBLE_DEVICES"] = "0"
        state = torch.load("net.pth")
        "#,
        expect![[r#"
            3:9 MEM008 `torch.load("net.pth")` without `map_location` restores ever
        "#]],
    );
}

#[test]
fn torch_load_in_a_library_function_is_always_checked() {
    // A module of functions may be called from a CUDA program.
    check(
        r#"
        import torch

        def load_checkpoint(path):
            return torch.load(path)
        "#,
        expect![[r#"
            4:12 MEM008 `torch.load(path)` without `map_location` restores every ten
        "#]],
    );
}

#[test]
fn torch_load_only_when_it_is_torch() {
    check(
        r#"
        import pickle
        from torch import hub
        a = pickle.load(f)
        b = hub.load("repo", "model")
        c = load(path)
        "#,
        expect![""],
    );
}

// ----- MEM009 details --------------------------------------------------------------

#[test]
fn zero_grad_false_variants() {
    check(
        r#"
        opt.zero_grad(set_to_none=False)
        model.zero_grad(False)
        keep = False
        opt.zero_grad(set_to_none=keep)
        opt.zero_grad(set_to_none=True)
        opt.zero_grad()
        "#,
        expect![[r#"
            1:1 MEM009 `opt.zero_grad(set_to_none=False)` keeps every gradient buff
            2:1 MEM009 `model.zero_grad(False)` keeps every gradient buffer of `mod
            4:1 MEM009 `opt.zero_grad(set_to_none=keep)` keeps every gradient buffe
        "#]],
    );
}

#[test]
fn zero_grad_flag_assigned_true_somewhere_is_unknown() {
    check(
        r#"
        def step(opt, args):
            keep = False
            if args.debug:
                keep = True
            opt.zero_grad(set_to_none=keep)
            opt.zero_grad(set_to_none=args.keep)
        "#,
        expect![""],
    );
}

// ----- MEM010 details --------------------------------------------------------------

#[test]
fn deprecated_amp_in_every_import_form() {
    check(
        r#"
        import torch
        from torch.cuda import amp
        from torch.cuda.amp import GradScaler
        a = torch.cuda.amp.autocast()
        b = amp.autocast()
        c = GradScaler()
        def f():
            from torch.cuda.amp import autocast as ac
            with ac(dtype=torch.bfloat16):
                pass
        "#,
        expect![[r#"
            4:5 MEM010 `torch.cuda.amp.autocast()` uses `torch.cuda.amp.autocast`, 
            5:5 MEM010 `amp.autocast()` uses `torch.cuda.amp.autocast`, deprecated 
            6:5 MEM010 `GradScaler()` uses `torch.cuda.amp.GradScaler`, deprecated 
            9:10 MEM010 `ac(dtype=torch.bfloat16)` uses `torch.cuda.amp.autocast`, d
        "#]],
    );
}

#[test]
fn deprecated_amp_not_in_annotations_or_new_spelling() {
    check(
        r#"
        import torch
        from torch.cuda.amp import GradScaler
        def f(scaler: GradScaler) -> torch.cuda.amp.GradScaler:
            s: torch.cuda.amp.GradScaler = torch.amp.GradScaler("cuda")
            with torch.amp.autocast("cuda"), torch.autocast("cuda"):
                return s
        "#,
        expect![""],
    );
}

// ----- MEM005 details --------------------------------------------------------------

#[test]
fn retain_graph_in_training_loop() {
    check(
        r#"
        for x, y in train_loader:
            loss = criterion(model(x), y)
            loss.backward(retain_graph=True)
            optimizer.step()
        "#,
        expect![[r#"
            3:5 MEM005 `loss.backward(retain_graph=True)` retains the graph of `los
        "#]],
    );
}

#[test]
fn retain_graph_then_second_backward_is_fine() {
    check(
        r#"
        for real in loader:
            fake = G(z)
            d_loss = D(fake).mean()
            d_loss.backward(retain_graph=True)
            g_loss = -D(fake).mean()
            g_loss.backward()
        "#,
        expect![""],
    );
}

#[test]
fn retain_graph_on_a_graph_built_before_the_loop_is_fine() {
    check(
        r#"
        out = model(x)
        for i in range(3):
            out[i].sum().backward(retain_graph=True)
        "#,
        expect![""],
    );
}

#[test]
fn retain_graph_false_or_conditional_is_fine() {
    check(
        r#"
        for i, (x, y) in enumerate(loader):
            loss = criterion(model(x), y)
            loss.backward(retain_graph=False)
            loss.backward(retain_graph=i + 1 < n)
        "#,
        expect![""],
    );
}

// ----- MEM006 details --------------------------------------------------------------

#[test]
fn collected_outputs_with_history_under_training() {
    check_with_values(
        r#"
        outs = {}
        for i, (x, y) in enumerate(train_loader):
            logits = model(x)
            criterion(logits, y).backward()
            outs[i] = logits
        "#,
        expect![[r#"
            5:5 MEM006 `outs[i] = logits` keeps every batch's autograd graph alive:
        "#]],
    );
}

#[test]
fn collected_no_grad_outputs_are_mild_only_on_cuda() {
    check_with_values(
        r#"
        import torch
        feats = []
        with torch.no_grad():
            for x in loader:
                feats.append(model(x.cuda()))
        "#,
        expect![[r#"
            5:9 MEM006 `feats.append(model(x.cuda()))` keeps every batch's `model(x
        "#]],
    );
    check_with_values(
        r#"
        import torch
        feats = []
        with torch.no_grad():
            for x in loader:
                feats.append(model(x))
        "#,
        expect![""],
    );
}

#[test]
fn collected_to_cpu_or_into_no_history_buffer_is_fine() {
    check(
        r#"
        import torch
        buf = torch.zeros(10, 2, device="cuda")
        preds = []
        for i, x in enumerate(loader):
            out = model(x)
            out.sum().backward()
            preds.append(out.detach().cpu())
            buf[i] = out.detach()
        "#,
        expect![""],
    );
}

// ----- MEM011 details --------------------------------------------------------------

#[test]
fn accumulation_without_division() {
    check(
        r#"
        for i, batch in enumerate(train_loader):
            outputs = model(**batch)
            outputs.loss.backward()
            if (i + 1) % args.gradient_accumulation_steps == 0:
                optimizer.step()
                optimizer.zero_grad()
        "#,
        expect![[r#"
            3:5 MEM011 the optimizer steps once every `args.gradient_accumulation_s
        "#]],
    );
}

#[test]
fn accumulation_divided_hf_style() {
    check(
        r#"
        for i, batch in enumerate(train_loader):
            outputs = model(**batch)
            loss = outputs.loss
            loss = loss / args.gradient_accumulation_steps
            loss.backward()
            if (i + 1) % args.gradient_accumulation_steps == 0:
                optimizer.step()
        "#,
        expect![""],
    );
}

#[test]
fn accumulation_divided_by_loop_index() {
    check_with_values(
        r#"
        for i, (x, y) in enumerate(train_loader):
            loss = criterion(model(x), y)
            (loss / (i + 1)).backward()
            if (i + 1) % 4 == 0:
                optimizer.step()
        "#,
        expect![[r#"
            3:5 MEM011 the loss backpropagated here is divided by `i + 1`, which ch
        "#]],
    );
}

// ----- MEM012 details --------------------------------------------------------------

#[test]
fn frozen_teacher_without_no_grad() {
    check(
        r#"
        from transformers import AutoModelForSequenceClassification as Auto
        teacher = Auto.from_pretrained("big")
        for batch in train_loader:
            t = teacher(**batch).logits
            s = student(**batch).logits
            kd(s, t).backward()
        "#,
        expect![[r#"
            2:11 MEM012 `teacher` is a pretrained network (`Auto.from_pretrained`) n
        "#]],
    );
}

#[test]
fn teacher_under_no_grad_or_optimized_is_fine() {
    check(
        r#"
        import torch
        from transformers import AutoModel
        teacher = AutoModel.from_pretrained("big")
        student = AutoModel.from_pretrained("small")
        opt = torch.optim.AdamW(student.parameters())
        for batch in train_loader:
            with torch.no_grad():
                t = teacher(**batch).logits
            kd(student(**batch).logits, t).backward()
        "#,
        expect![""],
    );
}

#[test]
fn pretrained_network_in_inference_only_code_is_not_this_rule() {
    check_with_values(
        r#"
        from torchvision import models
        net = models.resnet50(weights="DEFAULT")
        out = net(x)
        "#,
        expect![[r#"
            3:7 MEM001 forward pass `net(x)` runs with gradient tracking but its ou
        "#]],
    );
}

// ----- loops over batches vs loops inside a forward pass -------------------------

#[test]
fn loops_inside_a_forward_pass_keep_what_they_need() {
    check(
        r#"
        import torch
        from torch import nn

        class TiledDecoder(nn.Module):
            def forward(self, tiles):
                row = []
                total = 0
                for tile in tiles:
                    decoded = self.decoder(tile)
                    row.append(decoded)
                    total = total + self.loss_fn(decoded, tile)
                return torch.cat(row), total
        "#,
        expect![[r#""#]],
    );
}

#[test]
fn loss_summed_over_a_range_loop_that_trains() {
    check_with_values(
        r#"
        total = 0
        for step in range(1000):
            x, y = next(batches)
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            total += loss
        "#,
        expect![[r#"
            7:5 MEM002 `total += loss` keeps each step's graph nodes and loss tenso
        "#]],
    );
}

#[test]
fn collected_outputs_are_one_rule_and_losses_the_other() {
    check_with_values(
        r#"
        preds, losses = [], []
        for x, y in val_loader:
            out = model(x.cuda())
            preds.append(out)
            losses.append(criterion(out, y.cuda()))
        "#,
        expect![[r#"
            3:11 MEM001 forward pass `model(x.cuda())` runs with gradient tracking b
            4:5 MEM006 `preds.append(out)` keeps every batch's autograd graph alive
            5:5 MEM002 `losses.append(criterion(out, y.cuda()))` keeps every batch'
        "#]],
    );
}

#[test]
fn helpers_named_after_a_model_are_not_forward_passes() {
    check_with_values(
        r#"
        def generate(model, inputs, model_kwargs):
            model.eval()
            kwargs = self._update_model_kwargs_for_generation(inputs, model_kwargs)
            base = get_base_model(model)
            cache = EncoderDecoderCache(model)
            return model(inputs)
        "#,
        expect![[r#"
            6:12 MEM001 forward pass `model(inputs)` runs with gradient tracking but
        "#]],
    );
}

#[test]
fn prediction_heads_called_from_forward_are_training_code() {
    check_with_values(
        r#"
        import torch.nn as nn

        class Segmenter(nn.Module):
            def predict(self, tokens):
                return self.class_head(tokens)

            def forward(self, x):
                return self.predict(self.encoder(x))

        def predict(model, x):
            model.eval()
            return model(x)
        "#,
        expect![[r#"
            12:12 MEM001 forward pass `model(x)` runs with gradient tracking but afte
        "#]],
    );
}

#[test]
fn evaluation_after_a_training_loop_in_the_same_function_is_flagged() {
    check_with_values(
        r#"
        def fit(net, train_dl, val_dl, opt, crit):
            for epoch in range(3):
                net.train()
                for x, y in train_dl:
                    loss = crit(net(x), y)
                    loss.backward()
                    opt.step()
                net.eval()
                for x, y in val_dl:
                    logits = net(x)
        "#,
        expect![[r#"
            10:22 MEM001 forward pass `net(x)` runs with gradient tracking but its ou
        "#]],
    );
}

#[test]
fn gradients_taken_after_eval_are_needed_until_train() {
    check_with_values(
        r#"
        def attack(model, x, y, crit):
            model.eval()
            x.requires_grad_(True)
            loss = crit(model(x), y)
            loss.backward()
            return x.grad

        def check_then_train(model, x, y, crit, opt):
            model.eval()
            score = model(x)
            model.train()
            crit(model(x), y).backward()
            opt.step()
        "#,
        expect![[r#"
            10:13 MEM001 forward pass `model(x)` runs with gradient tracking but its 
        "#]],
    );
}

#[test]
fn eval_mode_before_a_loop_that_switches_back_to_training_is_not_known() {
    // The `.train()` later in the loop runs before the next step: from then on the
    // forward whose loss goes to an unseen scaler runs in training mode.
    check_with_values(
        r#"
        import torch
        from timm.utils import NativeScaler
        model = torch.nn.Linear(4, 4).cuda()
        scaler = NativeScaler()
        model.eval()
        for i, (x, y) in enumerate(loader):
            out = model(x)
            loss = criterion(out, y)
            scaler(loss, optimizer, parameters=model.parameters())
            if i % 100 == 0:
                with torch.no_grad():
                    model.eval()
                    validate(model)
                model.train()
        "#,
        expect![""],
    );
    // Without the switch back, the loop runs in evaluation mode throughout.
    check_with_values(
        r#"
        import torch
        model = torch.nn.Linear(4, 4).cuda()
        model.eval()
        for x, y in loader:
            out = model(x)
            keep(out)
        "#,
        expect![[r#"
            5:11 MEM001 forward pass `model(x)` runs with gradient tracking but afte
        "#]],
    );
}

#[test]
fn a_conditional_context_that_may_disable_gradients_counts_as_disabled() {
    // Written for both modes, as `set_grad_enabled(train)` is.
    check_with_values(
        r#"
        import torch
        from contextlib import nullcontext
        def run_epoch(model, loader, is_train):
            total = 0
            for x, y in loader:
                with (torch.enable_grad() if is_train else torch.no_grad()):
                    total += model(x).argmax(1).eq(y).sum().item()
            return total

        def predict(model, x, evaluating):
            with torch.no_grad() if evaluating else nullcontext():
                print(model(x).argmax(1))

        run_epoch(model, val_loader, False)
        predict(model, torch.randn(2, 4), True)
        "#,
        expect![""],
    );
    // No branch disables gradients, or one is no gradient context at all: reported.
    check_with_values(
        r#"
        import torch
        from contextlib import nullcontext
        def predict(model, x, fast):
            with (torch.enable_grad() if fast else nullcontext()):
                print(model(x).argmax(1))
            with (torch.no_grad() if fast else open("log.txt")):
                print(model(x).argmax(1))

        predict(model, torch.randn(2, 4), True)
        "#,
        expect![[r#"
            5:15 MEM001 forward pass `model(x)` runs with gradient tracking but its 
            7:15 MEM001 forward pass `model(x)` runs with gradient tracking but its 
        "#]],
    );
}

#[test]
fn a_name_assigned_a_context_that_may_disable_gradients_counts_as_disabled() {
    check_with_values(
        r#"
        import torch
        import contextlib
        def predict(model, x, train):
            if train:
                ctx = contextlib.nullcontext()
            else:
                ctx = torch.no_grad()
            with ctx:
                print(model(x).argmax(1))

        predict(model, torch.randn(2, 4), False)
        "#,
        expect![""],
    );
    // A name assigned a context that does not touch gradients: reported.
    check_with_values(
        r#"
        import torch
        def predict(model, x):
            ctx = open("log.txt")
            with ctx:
                print(model(x).argmax(1))

        predict(model, torch.randn(2, 4))
        "#,
        expect![[r#"
            5:15 MEM001 forward pass `model(x)` runs with gradient tracking but its 
        "#]],
    );
}

#[test]
fn a_classmethod_that_builds_its_class_is_a_factory() {
    check(
        r#"
        import torch
        import torch.nn as nn

        class Net(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.fc = nn.Linear(n, n)

            def forward(self, x):
                return self.fc(x)

            @classmethod
            def from_name(cls, name):
                model = cls(4)
                return model

            @classmethod
            def from_pretrained(cls, name):
                return cls.from_name(name)

        net = Net.from_pretrained("a")
        print(net(torch.zeros(1, 4)))
        "#,
        expect![[r#"
            22:7 MEM001 forward pass `net(torch.zeros(1, 4))` runs with gradient tra
        "#]],
    );
}

#[test]
fn pytest_passes_a_test_the_fixture_its_parameter_names() {
    check(
        r#"
        import pytest
        import torch
        import torch.nn as nn

        @pytest.fixture
        def net(pretrained):
            return nn.Linear(4, 4) if pretrained else nn.Linear(4, 4).half()

        @pytest.fixture(scope="module")
        def data():
            return torch.zeros(1, 4)

        def test_forward(net, data):
            output = net(data)
            assert not torch.isnan(output).any()

        def test_backward(net, data):
            net(data).sum().backward()
        "#,
        expect![[r#"
            14:14 MEM001 forward pass `net(data)` runs with gradient tracking but its
        "#]],
    );
    // A parameter named like a function that is no fixture is not passed it.
    check(
        r#"
        import torch
        import torch.nn as nn

        def net():
            return nn.Linear(4, 4)

        def test_forward(net):
            output = net(torch.zeros(1, 4))
            assert not torch.isnan(output).any()
        "#,
        expect![""],
    );
}

#[test]
fn methods_of_a_module_class_returning_outputs_to_no_caller_are_not_judged() {
    // Whatever their names say: what they return may be backpropagated by code memlint
    // does not see.
    check_with_values(
        r#"
        import torch.nn as nn

        class Net(nn.Module):
            def validate_inputs(self, x):
                return self.encoder(x)

            def prepare_inputs_for_generation(self, ids):
                return self.embed(ids)

            def validate_one_epoch(self, x):
                return self.encoder(x)
        "#,
        expect![""],
    );
}

// ----- MEM009 details --------------------------------------------------------------

#[test]
fn zero_grad_false_with_gradients_accumulated_in_place() {
    // Gradients preallocated and summed into in place: the buffers must stay.
    check(
        r#"
        import torch
        for p in model.parameters():
            p.grad = torch.zeros_like(p)
        for x in loader:
            optimizer.zero_grad(set_to_none=False)
            for p, g in zip(model.parameters(), compute_grads(x)):
                p.grad.add_(g)
            optimizer.step()
        "#,
        expect![""],
    );
    check(
        r#"
        import torch
        for x in loader:
            optimizer.zero_grad(set_to_none=False)
            for p, g in zip(params, grads(x)):
                p.grad.copy_(g)
        "#,
        expect![""],
    );
}

#[test]
fn zero_grad_false_where_gradients_are_only_read_or_dropped() {
    // Reading `.grad`, zeroing it or setting it to None does not need the buffers kept.
    check(
        r#"
        import torch
        for x in loader:
            optimizer.zero_grad(set_to_none=False)
            model(x).sum().backward()
            norm = sum(p.grad.norm() for p in model.parameters())
            for p in model.parameters():
                p.grad.zero_()
                p.grad = None
        "#,
        expect![[r#"
            3:5 MEM009 `optimizer.zero_grad(set_to_none=False)` keeps every gradien
        "#]],
    );
}

#[test]
fn loss_summed_through_a_helper_the_loop_calls() {
    // The loss is added to the helper's parameter, and the caller binds the total again
    // every step: the total survives the caller's loop with every step's graph.
    check_with_values(
        r#"
        def train_step(x, total):
            loss = criterion(model(x), x)
            loss.backward()
            optimizer.step()
            total += loss
            return total

        total = 0
        for x in loader:
            total = train_step(x, total)
        print(total)
        "#,
        expect![[r#"
            5:5 MEM002 `total += loss` keeps each step's graph nodes and loss tenso
        "#]],
    );
}

#[test]
fn loss_summed_in_a_helper_that_starts_its_own_total_is_fine() {
    check_with_values(
        r#"
        def train_step(x, total):
            total = 0
            loss = criterion(model(x), x)
            loss.backward()
            total += loss.item()
            return total

        for x in loader:
            running = train_step(x, 0)
        "#,
        expect![""],
    );
}

#[test]
fn empty_cache_in_a_helper_the_step_loop_calls() {
    check_with_values(
        r#"
        def test_batch(x):
            out = model(x)
            torch.cuda.empty_cache()
            return out.item()

        with torch.no_grad():
            for x in test_loader:
                test_batch(x)
        "#,
        expect![[r#"
            3:5 MEM004 `torch.cuda.empty_cache()` in the per-step loop (`test_batch
        "#]],
    );
}

#[test]
fn empty_cache_in_a_helper_called_once_after_the_loop_is_fine() {
    check_with_values(
        r#"
        def cleanup():
            torch.cuda.empty_cache()

        for x in loader:
            model(x).sum().backward()
        cleanup()
        "#,
        expect![""],
    );
}

#[test]
fn an_alias_made_by_assignment_is_the_name_it_holds() {
    // `autocast = torch.cuda.amp.autocast`, with a dummy class for old versions in the
    // `except` branch: the alias is what runs on today's PyTorch.
    check(
        r#"
        import torch
        try:
            autocast = torch.cuda.amp.autocast
        except AttributeError:
            class autocast:
                def __init__(self, enabled):
                    pass

        def step(net, x):
            with autocast(enabled=True):
                return net(x)
        "#,
        expect![[r#"
            10:10 MEM010 `autocast(enabled=True)` uses `torch.cuda.amp.autocast`, dep
        "#]],
    );
}

// ----- MEM001: networks that record no graph of their own ------------------------------

/// A layer without parameters, and a module class that stores only buffers, record a
/// graph only of an input that carries one: a smoke test on plain tensors records none.
/// The same forward on an input with history, and a class with a weight, are reported.
#[test]
fn layers_and_classes_without_parameters_record_no_graph_of_plain_inputs() {
    check(
        r#"
        import torch
        import torch.nn as nn

        class Permute(nn.Module):
            def __init__(self, n, scale=1.0):
                super().__init__()
                self.scale = scale
                self.register_buffer("idx", torch.randperm(n))

            def forward(self, x):
                return x[:, self.idx] * self.scale

        class Scale(nn.Module):
            def __init__(self):
                super().__init__()
                self.w = nn.Parameter(torch.ones(1))

            def forward(self, x):
                return x * self.w

        if __name__ == "__main__":
            x = torch.randint(0, 9, (2, 16))
            p = Permute(16)
            y = p(x)
            back = p(y)
            padded = nn.ReflectionPad2d(2)(torch.rand(1, 3, 8, 8))
            print(nn.DataParallel(Permute(16))(x).shape)
            w = torch.rand(2, 16, requires_grad=True)
            print(p(w).shape)
            print(Scale()(torch.rand(2, 16)).shape)
        "#,
        expect![[r#"
            27:11 MEM007 `nn.DataParallel(Permute(16))`: `DataParallel` drives every 
            29:11 MEM001 forward pass `p(w)` runs with gradient tracking but its outp
            30:11 MEM001 forward pass `Scale()(torch.rand(2, 16))` runs with gradient
        "#]],
    );
}

/// A module whose `forward` backpropagates (a meta-learner's outer step) is a training
/// step where it is called, whatever its output's fate.
#[test]
fn a_forward_that_backpropagates_is_a_training_step() {
    check(
        r#"
        import torch
        import torch.nn as nn

        class Meta(nn.Module):
            def __init__(self):
                super().__init__()
                self.net = nn.Linear(4, 2)
                self.opt = torch.optim.Adam(self.net.parameters())

            def forward(self, x, y):
                loss = nn.functional.cross_entropy(self.net(x), y)
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()
                return loss.item()

        maml = Meta()
        for x, y in loader:
            acc = maml(x, y)
            print(acc)
        "#,
        expect![""],
    );
}

/// A layer without parameters applied to a forward pass's output in the same function
/// extends that forward pass's graph: the forward pass is the one reported, once.
#[test]
fn a_parameter_free_layer_over_a_forward_output_is_judged_with_that_forward() {
    check(
        r#"
        import torch
        import torch.nn as nn

        class Head(nn.Module):
            def __init__(self):
                super().__init__()
                self.head = nn.Linear(8, 4)

            def log_prob(self, x):
                lsm = nn.LogSoftmax(dim=1)
                out = self.head(x)
                scores = lsm(out)
                return scores.data

        def score():
            lsm = nn.LogSoftmax(dim=1)
            w = torch.rand(2, 8, requires_grad=True)
            return lsm(w).sum().item()
        "#,
        expect![[r#"
            11:15 MEM001 forward pass `self.head(x)` runs with gradient tracking but 
            18:12 MEM001 forward pass `lsm(w)` runs with gradient tracking but its ou
        "#]],
    );
}

/// A loss stored on `self` and backpropagated later in the same method (`self.loss_d =
/// ...; self.loss_total = w * self.loss_d; self.loss_total.backward()`) reaches the
/// backward pass: the generator's forward used detached there is a training step's target.
#[test]
fn a_value_stored_on_self_reaches_the_backward_of_its_method() {
    check(
        r#"
        import torch
        import torch.nn as nn

        class Trainer(nn.Module):
            def __init__(self):
                super().__init__()
                self.gen = nn.Linear(4, 4)
                self.dis = nn.Linear(4, 1)
                self.opt = torch.optim.Adam(self.dis.parameters())

            def dis_update(self, x):
                self.opt.zero_grad()
                fake = self.gen(x)
                self.loss_d = self.dis(fake.detach()).mean()
                self.loss_total = 2 * self.loss_d
                self.loss_total.backward()
                self.opt.step()

            def preview(self, x):
                self.last = self.gen(x)
                self.shown = self.last.cpu()
        "#,
        expect![""],
    );
}

/// `device_ids` through a name bound only to a one-element list is one device.
#[test]
fn data_parallel_over_a_name_bound_to_one_device() {
    check(
        r#"
        import torch.nn as nn

        net = nn.Linear(4, 4)
        one = [0]
        single = nn.DataParallel(net, device_ids=one)
        two = [0, 1]
        several = nn.DataParallel(net, device_ids=two)
        for x in loader:
            print(single(x).sum().item(), several(x).sum().item())
        "#,
        expect![[r#"
            7:11 MEM007 `nn.DataParallel(net, device_ids=two)`: `DataParallel` drive
            9:11 MEM001 forward pass `single(x)` runs with gradient tracking but its
            9:35 MEM001 forward pass `several(x)` runs with gradient tracking but it
        "#]],
    );
}

/// A context manager made by a local function that returns `torch.no_grad()` (with a
/// do-nothing fallback for old versions of torch) disables gradients.
#[test]
fn a_local_function_returning_no_grad_is_a_no_grad_block() {
    check(
        r#"
        import contextlib
        import torch
        import torch.nn as nn

        def no_grad_ctx():
            if torch.__version__ >= "0.4":
                return torch.no_grad()
            return contextlib.suppress()

        def maybe_ctx(flag):
            return torch.no_grad() if flag else open("log.txt")

        net = nn.Linear(4, 2)
        with no_grad_ctx():
            print(net(torch.randn(1, 4)).argmax())
        with maybe_ctx(True):
            print(net(torch.randn(1, 4)).argmax())
        "#,
        expect![[r#"
            17:11 MEM001 forward pass `net(torch.randn(1, 4))` runs with gradient tra
        "#]],
    );
}

/// A local function that returns `enable_grad()` or `no_grad()` by mode is the same choice
/// as `torch.enable_grad() if train else torch.no_grad()`: written for both modes. One
/// that returns `enable_grad()` on every path asks for gradients as `enable_grad()` does.
#[test]
fn a_local_function_returning_a_context_by_mode_is_a_choice_made_at_run_time() {
    check(
        r#"
        import torch
        import torch.nn as nn

        def grad_ctx(train):
            if train:
                return torch.enable_grad()
            return torch.no_grad()

        def always_grad():
            return torch.enable_grad()

        net = nn.Linear(4, 2)
        with grad_ctx(False):
            print(net(torch.randn(1, 4)).argmax())
        with always_grad():
            print(net(torch.randn(1, 4)).argmax())
        with torch.enable_grad():
            print(net(torch.randn(1, 4)).argmax())
        "#,
        expect![""],
    );
}

/// A GAN loop freezes the critic's parameters for the generator's step: a pass over the
/// critic after that freeze, on inputs without history, records no graph; after the
/// unfreeze it does.
#[test]
fn a_network_frozen_earlier_in_the_loop_records_no_graph() {
    check(
        r#"
        import torch
        import torch.nn as nn

        netD = nn.Linear(4, 1)
        netG = nn.Linear(4, 4)
        opt = torch.optim.Adam(netG.parameters())
        for real in loader:
            for p in netD.parameters():
                p.requires_grad = True
            print(netD(real).mean().item())
            for p in netD.parameters():
                p.requires_grad = False
            loss = -netD(netG(torch.randn(2, 4))).mean()
            loss.backward()
            opt.step()
            print(netD(real).mean().item())
        "#,
        expect![[r#"
            10:11 MEM001 forward pass `netD(real)` runs with gradient tracking but it
        "#]],
    );
}

/// What a network is follows it into a list or dict literal and out of a local factory:
/// a parameter-free layer over a forward output stays judged with that forward however it
/// is kept or built.
#[test]
fn a_layer_kept_in_a_literal_container_or_built_by_a_local_factory() {
    check(
        r#"
        import torch.nn as nn

        def make_lsm():
            return nn.LogSoftmax(dim=1)

        class Head(nn.Module):
            def __init__(self):
                super().__init__()
                self.head = nn.Linear(8, 4)

            def log_prob(self, x):
                layers = [nn.LogSoftmax(dim=1)]
                named = {"lsm": nn.LogSoftmax(dim=1)}
                out = self.head(x)
                a = layers[0](out)
                b = named["lsm"](out)
                c = make_lsm()(out)
                return a.data + b.data + c.data
        "#,
        expect![[r#"
            14:15 MEM001 forward pass `self.head(x)` runs with gradient tracking but 
        "#]],
    );
}
