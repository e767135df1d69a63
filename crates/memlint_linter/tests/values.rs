//! Issue 18, within one file: what each name *holds* decides, not how it is spelled.
//! One `check(input, expect)` per class of misses and false alarms (positives and
//! negatives side by side); the rule fixtures hold more cases of MEM001, MEM006, MEM011.

mod common;

use common::{check, check_with_values};
use expect_test::expect;

// ----- MEM001: a forward pass is a call of a module instance ----------------------

#[test]
fn constructors_from_imports_and_star_imports_are_not_forward_passes() {
    check(
        r#"
        import torch
        import networks
        from models import *
        from models import Generator
        from utils import convert_model

        def main(opt):
            enc = networks.ResnetEncoder(18, False)
            gen = Generator(opt)
            net = PSPNet(num_classes=21).cuda()
            net = convert_model(net)
            print(enc, gen, net)
        "#,
        expect![""],
    );
}

#[test]
fn instances_of_classes_memlint_cannot_see_are_networks_only_by_use() {
    // `Generator` and `PSPNet` come from a module that is not there: their names are no
    // evidence. `seq.eval()` is: only a module has that method.
    check_with_values(
        r#"
        import torch
        from models import *
        from models import Generator

        def main(opt, z):
            netG = Generator(opt).cuda()
            seq = PSPNet(num_classes=21).cuda()
            seq.eval()
            print(netG(z).mean().item(), seq(z).argmax().item())
        "#,
        expect![[r#"
            9:34 MEM001 forward pass `seq(z)` runs with gradient tracking but its ou
        "#]],
    );
}

#[test]
fn a_module_known_by_what_is_done_with_it() {
    check_with_values(
        r#"
        import torch
        from detectors import build

        def demo(x):
            fasterRCNN = build("vgg16")
            fasterRCNN.load_state_dict(torch.load("w.pth", map_location="cpu"))
            fasterRCNN.eval()
            boxes = fasterRCNN(x)
            return boxes.tolist()
        "#,
        expect![[r#"
            8:13 MEM001 forward pass `fasterRCNN(x)` runs with gradient tracking but
        "#]],
    );
}

#[test]
fn methods_of_the_class_and_helpers_with_model_words_are_not_networks() {
    check(
        r#"
        import torch
        import commons

        class Solver:
            def restore_model(self, it):
                self.G.load_state_dict(torch.load(it, map_location="cpu"))

            def test(self, it):
                self.restore_model(it)
                commons.clip_grad_value_(self.G.parameters(), None)
        "#,
        expect![""],
    );
}

#[test]
fn methods_named_for_what_is_done_to_a_model_are_not_forward_passes() {
    // On objects whose value is unknown (library instances), a method's name is no
    // evidence: none of these calls is a forward pass, `peft_model` and `clip_model`
    // included.
    check_with_values(
        r#"
        import torch
        from lightning.fabric import Fabric
        from accelerate import Accelerator

        def test_clip(strategy, batch):
            fabric = Fabric(devices=1)
            accelerator = Accelerator()
            fabric.clip_gradients(strategy, max_norm=1.0)
            accelerator.clip_grad_norm_(strategy.parameters(), 1.0)
            with strategy.model_sharded_context():
                strategy.attach_model_callbacks()
                strategy.model_to_device()
            print(strategy.peft_model(batch).sum().item(), strategy.clip_model(batch).sum().item())

        def test_clip_only():
            fabric = Fabric(devices=1)
            model = torch.nn.Linear(3, 2)
            fabric.clip_gradients(model, max_norm=1.0)

        def test_frozen(tmp_path, pl_module):
            class WithFrozen(BoringModel):
                def configure_model(self):
                    # `super()` reaches the parent's methods, never a submodule.
                    super().configure_model()
                    for param in self.frozen_layer.parameters():
                        param.requires_grad = False
            pl_module.configure_model()
        "#,
        expect![""],
    );
}

#[test]
fn methods_of_an_unknown_object_are_not_networks_by_their_name() {
    // `get_accelerator().default_generator(idx)` is a method of whatever the call
    // returns (a random generator), and `self.probe.adapter_model(m)` a method that a
    // class of this module defines: their names say nothing about a network.
    check_with_values(
        r#"
        import torch
        from accelerator import get_accelerator

        class Probe:
            def adapter_model(self, method):
                return build(method), None

        class Task:
            def check(self):
                model, _ = self.probe.adapter_model(self.method)
                print(model)

        def cb(idx, new_state):
            default_generator = get_accelerator().default_generator(idx)
            default_generator.set_state(new_state)

        def preview(trainer, z):
            print(trainer.generator(z).mean().item())
        "#,
        expect![""],
    );
}

#[test]
fn a_tensor_of_a_model_is_not_a_network_by_its_name() {
    check(
        r#"
        import torch

        def train_fp16(model, state_dict, batch):
            for orig_param, saved_model_param in zip(model.parameters(), state_dict.values()):
                saved_model_param = saved_model_param.half()
                assert torch.equal(orig_param, saved_model_param)
            student_model = student_model.half()
            student_model(batch).sum().backward()
        "#,
        expect![""],
    );
}

#[test]
fn a_network_peft_loads_frozen_records_no_graph() {
    // `PeftModel.from_pretrained` loads for inference (`is_trainable=False`): no parameter
    // requires grad, so token ids through it build no graph.
    check_with_values(
        r#"
        import torch
        from peft import PeftModel, PeftMixedModel, AutoPeftModelForCausalLM

        def test_loaded(self, base, tmp_path, input_ids):
            peft_model = PeftModel.from_pretrained(base, tmp_path)
            assert peft_model(input_ids).logits.shape[0] == 1

        def test_auto(self, tmp_path, input_ids):
            model = AutoPeftModelForCausalLM.from_pretrained(tmp_path).to("cuda")
            print(model(input_ids).logits.argmax(-1))

        def test_trainable(self, base, tmp_path, input_ids):
            peft_model = PeftModel.from_pretrained(base, tmp_path, is_trainable=True)
            assert peft_model(input_ids).logits.shape[0] == 1

        def test_unfrozen(self, base, tmp_path, input_ids):
            peft_model = PeftModel.from_pretrained(base, tmp_path)
            for p in peft_model.parameters():
                p.requires_grad = True
            assert peft_model(input_ids).logits.shape[0] == 1

        def test_adapter_set(self, base, tmp_path, input_ids):
            # `set_adapter` makes the adapter trainable again; so does `PeftMixedModel`'s load.
            peft_model = PeftModel.from_pretrained(base, tmp_path / "first", adapter_name="first")
            peft_model.load_adapter(tmp_path / "second", "second")
            peft_model.set_adapter("second")
            mixed = PeftMixedModel.from_pretrained(base, tmp_path / "first")
            print(peft_model(input_ids).logits.sum().item(), mixed(input_ids).logits.sum().item())

        def train(base, tmp_path, loader, optimizer):
            teacher = PeftModel.from_pretrained(base, tmp_path)
            student = torch.nn.Linear(3, 3)
            for x, y in loader:
                loss = (student(x) - teacher(x)).pow(2).mean()
                loss.backward()
                optimizer.step()
        "#,
        expect![[r#"
            13:18 MEM012 `peft_model` is a pretrained network (`PeftModel.from_pretra
            14:12 MEM001 forward pass `peft_model(input_ids)` runs with gradient trac
            20:12 MEM001 forward pass `peft_model(input_ids)` runs with gradient trac
            27:13 MEM012 `mixed` is a pretrained network (`PeftMixedModel.from_pretra
            28:11 MEM001 forward pass `peft_model(input_ids)` runs with gradient trac
            28:54 MEM001 forward pass `mixed(input_ids)` runs with gradient tracking 
        "#]],
    );
}

#[test]
fn nested_functions_see_the_bindings_of_the_functions_around_them() {
    // A helper defined in the enclosing function is a function, not a network; a network
    // built there is one, also when a nested evaluation function calls it.
    check_with_values(
        r#"
        import torch

        def quantize(model):
            def bert_layer_quantize(layer):
                return layer

            def quantize_fn(child):
                bert_layer_quantize(child)

            scorer = torch.nn.Linear(4, 4).cuda()

            def preview(x):
                print(scorer(x).argmax().item())

            quantize_fn(model)
            return preview
        "#,
        expect![[r#"
            13:15 MEM001 forward pass `scorer(x)` runs with gradient tracking but its
        "#]],
    );
}

#[test]
fn tokenizers_and_processors_from_pretrained_are_not_networks() {
    // MEM012: `from_pretrained` of a tokenizer, processor or feature extractor loads no
    // parameters; a pretrained model used the same way is flagged.
    check(
        r#"
        import torch
        from transformers import AutoModel, AutoTokenizer, AutoProcessor, WhisperFeatureExtractor

        def train(loader, opt, head):
            tokenizer = AutoTokenizer.from_pretrained("gpt2")
            processor = AutoProcessor.from_pretrained("clip")
            features = WhisperFeatureExtractor.from_pretrained("whisper")
            teacher = AutoModel.from_pretrained("bert-base-uncased")
            for text in loader:
                ids = tokenizer(text)
                pixels = processor(text)
                audio = features(text)
                loss = head(teacher(ids), pixels, audio)
                loss.backward()
                opt.step()
        "#,
        expect![[r#"
            8:15 MEM012 `teacher` is a pretrained network (`AutoModel.from_pretraine
        "#]],
    );
}

#[test]
fn an_instance_of_a_class_that_loads_a_pretrained_network_is_one() {
    // MEM012: `VGGFeatures()` builds a pretrained VGG in its `__init__` and never freezes
    // it; `Frozen` does, `Inference` runs it without autograd, `Scratch` loads no weights.
    check(
        r#"
        import torch
        import torchvision
        from torch import nn

        class VGGFeatures(nn.Module):
            def __init__(self):
                super().__init__()
                self.vgg = torchvision.models.vgg19(pretrained=True).features[:16]

            def forward(self, x):
                return self.vgg(x)

        class Frozen(VGGFeatures):
            def __init__(self):
                super().__init__()
                self.vgg = torchvision.models.vgg19(weights="DEFAULT").features[:16]
                self.vgg.requires_grad_(False)

        class Inference(nn.Module):
            def __init__(self):
                super().__init__()
                self.vgg = torchvision.models.vgg19(weights="DEFAULT")

            @torch.no_grad()
            def forward(self, x):
                return self.vgg(x)

        class Scratch(nn.Module):
            def __init__(self):
                super().__init__()
                self.vgg = torchvision.models.vgg19()

        def train(generator, loader, opt):
            content = VGGFeatures().cuda()
            frozen = Frozen().cuda()
            inference = Inference().cuda()
            scratch = Scratch().cuda()
            content.eval()
            for x, y in loader:
                fake = generator(x)
                loss = (content(fake) - content(y)).pow(2).mean() + frozen(fake).mean()
                loss = loss + inference(fake).mean() + scratch(fake).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
        "#,
        expect![[r#"
            34:15 MEM012 `content` is a pretrained network (`VGGFeatures`, which load
        "#]],
    );
}

#[test]
fn values_moved_to_the_cpu_leave_the_gpu() {
    // MEM006: `.to("cpu")`, `.to(torch.device("cpu"))`, `.cpu().numpy()` and `.tolist()`
    // take the value off the GPU; `.to("cuda")` keeps it there.
    check_with_values(
        r#"
        import torch
        model = torch.nn.Linear(4, 2).cuda()

        def keep(loader):
            a, b, c, d, e = [], [], [], [], []
            for x in loader:
                with torch.no_grad():
                    out = model(x.cuda())
                a.append(out.to("cpu"))
                b.append(out.to(torch.device("cpu")))
                c.append(out.cpu().numpy())
                d.append(out.tolist())
                e.append(out.to("cuda"))
        keep(val_loader)
        "#,
        expect![[r#"
            13:9 MEM006 `e.append(out.to("cuda"))` keeps every batch's `out.to("cuda
        "#]],
    );
}

#[test]
fn a_file_this_module_saved_from_cpu_values_loads_nothing_onto_a_gpu() {
    // MEM008: saved from `.detach().cpu().numpy()` or `.cpu()` and loaded back from the
    // same path: nothing to map. Saved from a CUDA tensor, it is.
    check(
        r#"
        import torch
        model = torch.nn.Linear(4, 2).cuda()

        def cache_numpy(features, path):
            torch.save({"feats": features.detach().cpu().numpy()}, path)
            return torch.load(path)

        def cache_cpu(features, path):
            torch.save(features.cpu(), path + ".c")
            return torch.load(path + ".c")

        def cache_gpu(features, path):
            torch.save(features.cuda(), path)
            return torch.load(path)
        "#,
        expect![[r#"
            14:12 MEM008 `torch.load(path)` without `map_location` restores every ten
        "#]],
    );
}

#[test]
fn networks_in_lists_attributes_and_their_forward_methods() {
    // MEM001, classes of issue 18 by value: a plain list of networks iterated
    // (`for m in models:`), `self.layers` (a list or `nn.ModuleList`) iterated in a method
    // of a class that is not a module, a submodule's method that runs its forward
    // (`self.refiner.step(x)`), and a network's `predict` / `generate`. Not: a list of
    // networks that is trained, a list of functions, a method that runs no forward.
    check_with_values(
        r#"
        import torch
        from torch import nn

        class Blob(nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = nn.Linear(4, 4)

            def forward(self, x):
                return self.lin(x)

            def step(self, x):
                return x - self.lin(x)

            def predict(self, x):
                return self(x).argmax(1)

            def generate(self, x, n):
                for _ in range(n):
                    x = self(x)
                return x

            def describe(self):
                return "blob"

        class Viewer:
            def __init__(self):
                self.layers = [nn.Linear(4, 4), nn.Linear(4, 4)]
                self.blocks = nn.ModuleList([Blob() for _ in range(3)])
                self.refiner = Blob()

            def show(self, x):
                for layer in self.layers:
                    x = layer(x)
                for block in self.blocks:
                    print(block(x).sum().item())
                y = self.refiner.step(x)
                print(y.mean().item(), self.refiner.describe())

        def over_a_list(x):
            models = [Blob(), Blob()]
            for m in models:
                print(m(x).sum().item())

        def methods(x):
            enc = Blob().cuda()
            print(enc.predict(x).tolist())
            print(enc.generate(x, 10).shape)

        def trained_list(x, opt):
            models = [Blob(), Blob()]
            for m in models:
                m(x).sum().backward()
            opt.step()

        def not_networks(x):
            for f in [len, str]:
                print(f(x))
        "#,
        expect![[r#"
            13:20 MEM001 forward pass `self.lin(x)` runs with gradient tracking but i
            16:16 MEM001 forward pass `self(x)` runs with gradient tracking but its o
            20:17 MEM001 forward pass `self(x)` runs with gradient tracking but it is
            34:17 MEM001 forward pass `layer(x)` runs with gradient tracking but its 
            36:19 MEM001 forward pass `block(x)` runs with gradient tracking but its 
            43:15 MEM001 forward pass `m(x)` runs with gradient tracking but its outp
        "#]],
    );
}

#[test]
fn a_helper_called_only_from_evaluation_code_is_evaluation() {
    // MEM001: `run_batch` says nothing, but its only caller is `evaluate` (and a script's
    // loop over validation data calls `score_batch`). Not when a training function calls
    // it too, it is handed on as a value or run in a lambda another function runs, or the
    // evaluation code backpropagates what it returns.
    check_with_values(
        r#"
        import torch
        from torch import nn

        model = nn.Linear(4, 2)

        def run_batch(x):
            return model(x)

        def evaluate(loader):
            for x in loader:
                print(run_batch(x).argmax().item())

        def score_batch(x):
            return model(x).softmax(-1)

        def shared(x):
            return model(x)

        def validate(loader):
            return [shared(x).argmax() for x in loader]

        def train(loader, opt):
            for x in loader:
                shared(x).sum().backward()
                opt.step()

        def handed_on(x):
            return model(x)

        def test_saliency(x):
            measure(lambda: handed_on(x))
            keep = handed_on

        def saliency_batch(x):
            return model(x)

        def test_gradients(x):
            out = saliency_batch(x)
            out.sum().backward()

        for x in val_loader:
            print(score_batch(x).max())
        "#,
        expect![[r#"
            7:12 MEM001 forward pass `model(x)` runs with gradient tracking but it i
            14:12 MEM001 forward pass `model(x)` runs with gradient tracking but it i
        "#]],
    );
}

#[test]
fn a_loop_that_backpropagates_only_when_a_flag_says_so_is_evaluation_with_it_off() {
    // MEM001: one loop for training and evaluation, its backward passes under a test of a
    // parameter (`if train:`, `if optimizer is not None:`, `if mode == "train":`, or a name
    // bound once to such a test: `is_train = optimizer is not None`), called
    // somewhere with the flag off (a literal, a constant, or the default) and gradients on. Not when
    // every such call runs under `no_grad`, the flag is bound again, a backward escapes
    // the guard, no call turns it off (another class's method of the same name does not
    // count), or its value is not a constant.
    check_with_values(
        r#"
        import torch

        class Trainer:
            def __init__(self, model, optim):
                self.model = model
                self.optim = optim

            def test(self, loader):
                self.iteration(0, loader, train=False)

            def iteration(self, epoch, loader, train=True):
                for data in loader:
                    loss = self.model.forward(data).sum()
                    if train:
                        loss.backward()

        def run_epoch(model, loader, optimizer=None):
            for x in loader:
                loss = model(x).sum()
                if optimizer is not None:
                    loss.backward()
                    optimizer.step()

        def by_mode(model, loader, mode="train"):
            for x in loader:
                loss = model(x).sum()
                if mode == "train":
                    loss.backward()

        def always_on(model, loader, train=True):
            for x in loader:
                loss = model(x).sum()
                if train:
                    loss.backward()

        def rebound(model, loader, train=True):
            train = train or loader.always_train
            for x in loader:
                loss = model(x).sum()
                if train:
                    loss.backward()

        def escapes_the_guard(model, loader, train=True):
            for x in loader:
                loss = model(x).sum()
                if train:
                    loss.backward()
                model(x).sum().backward()

        EVAL_PHASE = "val"

        def by_constant(model, loader, phase):
            for x in loader:
                loss = model(x).sum()
                if phase == "train":
                    loss.backward()

        class Other:
            def test(self, loader):
                self.iteration(0, loader, train=False)

        class Runner:
            def __init__(self, model):
                self.model = model

            def iteration(self, epoch, loader, train=True):
                for data in loader:
                    loss = self.model(data).sum()
                    if train:
                        loss.backward()

        def named_flag(model, loader, optimizer=None):
            is_train = optimizer is not None
            for x in loader:
                loss = model(x).sum()
                if is_train:
                    loss.backward()

        def main(flag):
            trainer = Trainer(model, opt)
            named_flag(model, val_loader)
            runner = Runner(model)
            runner.iteration(0, train_loader)
            by_constant(model, val_loader, EVAL_PHASE)
            run_epoch(model, train_loader, opt)
            run_epoch(model, val_loader)
            by_mode(model, val_loader, 'eval')
            always_on(model, train_loader)
            always_on(model, val_loader, flag)
            rebound(model, val_loader, train=False)
            escapes_the_guard(model, val_loader, False)
        "#,
        expect![[r#"
            13:20 MEM001 forward pass `self.model.forward(data)` runs with gradient t
            19:16 MEM001 forward pass `model(x)` runs with gradient tracking but `run
            26:16 MEM001 forward pass `model(x)` runs with gradient tracking but `by_
            54:16 MEM001 forward pass `model(x)` runs with gradient tracking but `by_
            75:16 MEM001 forward pass `model(x)` runs with gradient tracking but `nam
        "#]],
    );
}

#[test]
fn a_pretrained_network_is_followed_through_to_and_into_local_functions() {
    // MEM012: `vgg = vgg.to(device)` holds the same network, and so does the parameter of
    // a function of this module it is handed to (by keyword or by position). Handed to a
    // function that optimizes it, to one that freezes it, to a parameter `*nets`, or to a
    // function memlint does not see, it escapes.
    check(
        r#"
        import torch
        import torchvision

        def train(loader, generator, vgg, opt):
            for x, y in loader:
                loss = (vgg(generator(x)) - vgg(y)).pow(2).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()

        def fine_tune(net, loader):
            opt = torch.optim.SGD(net.parameters(), lr=0.1)
            for x, y in loader:
                net(x).sum().backward()
                opt.step()

        def frozen_loss(loader, generator, net):
            net.requires_grad_(False)
            for x in loader:
                net(generator(x)).sum().backward()

        def many(*nets):
            pass

        def main(loader, generator, opt, device, external):
            keyword = torchvision.models.vgg19(weights="DEFAULT").features
            keyword.eval()
            keyword = keyword.to(device)
            train(loader=loader, generator=generator, vgg=keyword, opt=opt)
            positional = torchvision.models.vgg16(weights="DEFAULT").features
            moved = positional.eval().cuda()
            train(loader, generator, moved, opt)
            tuned = torchvision.models.resnet18(weights="DEFAULT")
            fine_tune(tuned, loader)
            frozen = torchvision.models.resnet34(weights="DEFAULT")
            frozen_loss(loader, generator, net=frozen)
            splat = torchvision.models.resnet50(weights="DEFAULT")
            many(splat)
            unseen = torchvision.models.resnet101(weights="DEFAULT")
            external(unseen)
        "#,
        expect![[r#"
            26:15 MEM012 `keyword` is a pretrained network (`torchvision.models.vgg19
            30:18 MEM012 `positional` is a pretrained network (`torchvision.models.vg
        "#]],
    );
}

#[test]
fn a_backward_given_the_loss_by_what_holds_the_model_scales_it() {
    // MEM003: `model.backward(loss)` after `deepspeed.initialize` is the engine's backward,
    // which scales float16 losses; a tensor's `y.backward(grad)` scales nothing.
    check(
        r#"
        import torch
        import deepspeed

        def train(loader, config):
            model = Net().cuda().half()
            model, *_ = deepspeed.initialize(model=model, config=config)
            for x, y in loader:
                loss = criterion(model(x), y)
                model.backward(loss)
                model.step()
        "#,
        expect![""],
    );
    // MEM011: the same engine accumulates over its own `gradient_accumulation_steps`.
    check(
        r#"
        import torch
        import deepspeed

        def train(loader, config, k):
            model, *_ = deepspeed.initialize(model=Net().cuda(), config=config)
            for i, (x, y) in enumerate(loader):
                loss = criterion(model(x), y)
                model.backward(loss)
                if (i + 1) % k == 0:
                    optimizer.step()
        "#,
        expect![""],
    );
    check(
        r#"
        import torch

        def train(loader, grad):
            model = Net().cuda().half()
            for x in loader:
                y = model(x)
                y.backward(grad)
        "#,
        expect![""],
    );
}

#[test]
fn an_instance_of_a_local_loss_class_is_a_loss_not_a_network() {
    // `CrossEntropyLoss2d` derives nn.Module, and its name says what it computes: in the
    // evaluation loop only the network's forward is reported, not the loss on its output.
    check_with_values(
        r#"
        import torch
        from torch import nn

        class CrossEntropyLoss2d(nn.Module):
            def forward(self, outputs, targets):
                return nn.functional.nll_loss(outputs.log_softmax(1), targets)

        class Segmenter(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Linear(4, 4)

            def forward(self, x):
                return self.body(x)

        def validate(loader):
            model = Segmenter().cuda()
            criterion = CrossEntropyLoss2d()
            model.eval()
            losses = []
            for images, labels in loader:
                outputs = model(images)
                loss = criterion(outputs, labels)
                losses.append(loss.item())
            return losses
        "#,
        expect![[r#"
            22:19 MEM001 forward pass `model(images)` runs with gradient tracking but
        "#]],
    );
}

// ----- scopes: a comprehension, a lambda or a class body binds only inside it -------

#[test]
fn a_comprehension_target_does_not_hide_the_loss_after_it() {
    // `loss` after the comprehension is the step's loss, not the comprehension's target.
    check_with_values(
        r#"
        import torch.nn.functional as F

        def train(model, loader, opt):
            total = 0
            for x, y in loader:
                loss = F.cross_entropy(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
                parts = [loss.item() for loss in model.aux_losses()]
                total += loss
            return total

        train(model, train_loader, optimizer)
        "#,
        expect![[r#"
            11:9 MEM002 `total += loss` keeps each step's graph nodes and loss tenso
        "#]],
    );
}

#[test]
fn a_class_attribute_is_not_seen_by_methods_nor_outside_the_class() {
    // In `show()`, `enc` is the module-level network, not the class attribute.
    check_with_values(
        r#"
        import torch
        from torch import nn

        class Encoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Linear(4, 4)

            def forward(self, x):
                return self.body(x)

        enc = Encoder().cuda()

        class Report:
            enc = "utf-8"

            def show(self, loader):
                for x in loader:
                    print(enc(x).argmax(1).tolist())

        class Codec:
            enc = Encoder()
            name = enc.__class__.__name__

        def show(loader):
            for x in loader:
                print(x.encode(Codec.name))
        "#,
        expect![[r#"
            19:19 MEM001 forward pass `enc(x)` runs with gradient tracking but its ou
        "#]],
    );
}

#[test]
fn a_lambda_parameter_is_not_the_network_of_the_same_name() {
    // Inside the lambda, `enc` is its parameter (a string), not the network the function
    // put in eval mode; the default `enc=enc` and the code after the lambda see the network.
    check_with_values(
        r#"
        import torch
        from torch import nn

        def report(loader, names):
            enc = nn.Linear(4, 2).cuda()
            enc.eval()
            keep = lambda x, enc=enc: x
            for x in loader:
                print(list(map(lambda enc: enc("utf-8"), names)))
                print(enc(x).tolist())
        "#,
        expect![[r#"
            10:15 MEM001 forward pass `enc(x)` runs with gradient tracking but its ou
        "#]],
    );
}

// ----- MEM001: evaluation by behaviour ----------------------------------------------

#[test]
fn an_inference_script_never_backpropagates() {
    check_with_values(
        r#"
        import torch
        from model import SRResNet

        srresnet = SRResNet().cuda()
        srresnet.load_state_dict(torch.load("sr.pth", map_location="cpu"))
        for path in paths:
            sr = srresnet(load(path))
            save_image(sr, path + ".png")
        "#,
        expect![[r#"
            7:10 MEM001 forward pass `srresnet(load(path))` runs with gradient track
        "#]],
    );
}

#[test]
fn a_forward_backpropagated_in_its_own_expression_is_training() {
    check_with_values(
        r#"
        import torch

        def test_gradients_flow(x):
            model(x).sum().backward()
            assert model.weight.grad is not None

        def test_outputs(x):
            print(model(x).sum().item())
        "#,
        expect![[r#"
            8:11 MEM001 forward pass `model(x)` runs with gradient tracking but its 
        "#]],
    );
}

#[test]
fn a_forward_in_a_lambda_other_code_runs_is_that_codes() {
    check_with_values(
        r#"
        import torch
        from lightning.fabric.utilities.throughput import measure_flops

        def test_measure_flops(x):
            model_fwd = lambda: model(x)
            print(measure_flops(model, model_fwd, lambda y: y.sum()))

        def test_corda(data, preprocess_corda, config):
            preprocess_corda(model, config, run_model=lambda: model(data))

        def test_mapped(batches):
            print(list(map(lambda x: model(x).argmax(1), batches)))
        "#,
        expect![[r#"
            12:30 MEM001 forward pass `model(x)` runs with gradient tracking but its 
        "#]],
    );
}

#[test]
fn what_a_with_statement_enters_is_not_a_forward_pass() {
    check_with_values(
        r#"
        import torch

        def test_sharded(fabric, model, x):
            with fabric.sharded_model():
                pass
            with fabric.sharded_model() as ctx, torch.no_grad():
                print(ctx)
            print(fabric.sharded_model(x).sum().item())
        "#,
        expect![""],
    );
}

#[test]
fn a_helper_that_returns_the_output_to_training_is_not_evaluation() {
    check(
        r#"
        import torch

        def compute(model, x):
            return model(x)

        def keep(model, x, outputs):
            outputs.append(model(x))

        def hand_on(model, x, trainer):
            out = model(x)
            trainer.consume(out)
        "#,
        expect![""],
    );
}

#[test]
fn a_tensor_combined_with_the_output_and_returned_carries_its_history() {
    // `torch.cat([x, out])` has `out`'s history: a helper that returns it hands the
    // forward pass on to its caller (DeepSpeed's padding before the embeddings).
    check_with_values(
        r#"
        import torch

        def pad(ids, x, model_embeddings):
            if x is not None:
                out = model_embeddings(ids)
                x = torch.cat([x, out], dim=-2)
            return x

        def pad_stacked(ids, x, model_embeddings):
            out = model_embeddings(ids)
            return torch.stack((x, out)).sum(0)

        def measure(ids, x, model_embeddings):
            out = model_embeddings(ids)
            merged = torch.cat([x, out], dim=-2)
            print(merged.shape)

        ids = x = torch.zeros(2, 4)
        pad(ids, x, encoder).sum().backward()
        pad_stacked(ids, x, encoder).sum().backward()
        measure(ids, x, encoder)
        "#,
        expect![[r#"
            14:11 MEM001 forward pass `model_embeddings(ids)` runs with gradient trac
        "#]],
    );
}

#[test]
fn rl_rollouts_that_only_sample_actions_are_evaluation_but_reinforce_is_not() {
    check_with_values(
        r#"
        import torch
        from torch.distributions import Categorical

        def rollout(policy, env):
            s = env.reset()
            done = False
            while not done:
                prob = policy(s)
                a = Categorical(prob).sample().item()
                s, r, done, _ = env.step(a)

        def reinforce(policy, env, saved):
            s = env.reset()
            prob = policy(s)
            m = Categorical(prob)
            a = m.sample()
            saved.append(m.log_prob(a))
            return a.item()

        rollout(policy, env)
        reinforce(policy, env, [])
        "#,
        expect![[r#"
            8:16 MEM001 forward pass `policy(s)` runs with gradient tracking but its
        "#]],
    );
}

#[test]
fn methods_of_a_module_class_are_its_forward_pass() {
    check_with_values(
        r#"
        import torch
        from torch import nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)

            def features(self, x):
                h = self.fc(x)
                print(h.shape)

            def forward(self, x):
                self.features(x)
                return self.fc(x)
        "#,
        expect![""],
    );
}

// ----- MEM008: where the program runs ----------------------------------------------

#[test]
fn torch_load_in_a_program_that_never_uses_a_gpu() {
    check(
        r#"
        import torch
        a = torch.load("a.pth")
        b = torch.load("b.pth")
        torch.save({k: a[k] * 0.5 + b[k] * 0.5 for k in a}, "c.pth")
        "#,
        expect![""],
    );
}

#[test]
fn torch_through_a_star_import_is_torch() {
    check(
        r#"
        from utils import *
        net = Net().cuda()
        net.load_state_dict(torch.load("snapshot.pth"))
        "#,
        expect![[r#"
            3:21 MEM008 `torch.load("snapshot.pth")` without `map_location` restores
        "#]],
    );
}

// ----- constants: argparse defaults and module constants ------------------------------

#[test]
fn set_to_none_from_an_argparse_flag_that_defaults_to_false() {
    check(
        r#"
        import argparse
        parser = argparse.ArgumentParser()
        parser.add_argument("--keep-grads", action="store_true")
        parser.add_argument("--none", default=True)
        args = parser.parse_args()
        optimizer.zero_grad(set_to_none=args.keep_grads)
        optimizer.zero_grad(set_to_none=args.none)
        optimizer.zero_grad(set_to_none=cfg.unknown)
        "#,
        expect![[r#"
            6:1 MEM009 `optimizer.zero_grad(set_to_none=args.keep_grads)` keeps eve
        "#]],
    );
}

#[test]
fn float16_through_getattr_of_an_argparse_default() {
    check_with_values(
        r#"
        import argparse
        import torch
        parser = argparse.ArgumentParser()
        parser.add_argument("--dtype", default="float16")
        parser.add_argument("--eval-dtype", default="bfloat16")
        args = parser.parse_args()
        model = nn.Linear(4, 4).cuda().to(getattr(torch, args.dtype))
        teacher = nn.Linear(4, 4).cuda().to(getattr(torch, args.eval_dtype))
        for x, y in loader:
            loss = model(x).sum()
            loss.backward()
            optimizer.step()
        "#,
        expect![[r#"
            7:9 MEM003 `nn.Linear(4, 4).cuda().to(getattr(torch, args.dtype))` trai
        "#]],
    );
}

#[test]
fn half_on_a_chained_constructor_and_an_unused_scaler() {
    check_with_values(
        r#"
        import torch

        def setup():
            scaler = torch.cuda.amp.GradScaler()
            return nn.Linear(4, 4).cuda().half()

        def train(model, loader, optimizer):
            for x, y in loader:
                loss = model(x).sum()
                loss.backward()
                optimizer.step()

        train(setup(), train_loader, optimizer)
        "#,
        expect![[r#"
            4:14 MEM010 `torch.cuda.amp.GradScaler()` uses `torch.cuda.amp.GradScale
            5:12 MEM003 `nn.Linear(4, 4).cuda().half()` trains in float16 without lo
        "#]],
    );
}

#[test]
fn a_local_network_halved_for_a_library_call_is_not_trained_here() {
    // peft's tests: `.half()` on a model given to `prepare_model_for_kbit_training` (which
    // casts it back) in a test that never backpropagates; another test does.
    check_with_values(
        r#"
        import torch
        from peft import prepare_model_for_kbit_training

        def test_kbit(self):
            model = torch.nn.Sequential(torch.nn.Linear(3, 3)).half()
            model = prepare_model_for_kbit_training(model)
            assert model[0].weight.dtype == torch.float32

        def test_train(self, model, x, optimizer):
            model(x).sum().backward()
            optimizer.step()

        def test_trained_here(self, x):
            net = torch.nn.Linear(3, 3).half()
            net(x).sum().backward()

        def build():
            net = torch.nn.Linear(3, 3)
            net.half()
            return net

        def test_handed_to_training(self, x, optimizer):
            net = torch.nn.Linear(3, 3).half()
            test_train(self, net, x, optimizer)

        test_handed_to_training(None, torch.zeros(3), optimizer)
        "#,
        expect![[r#"
            14:11 MEM003 `torch.nn.Linear(3, 3).half()` trains in float16 without los
            19:5 MEM003 `net.half()` trains in float16 without loss scaling: gradien
            23:11 MEM003 `torch.nn.Linear(3, 3).half()` trains in float16 without los
        "#]],
    );
}

#[test]
fn float16_gradients_computed_only_to_compare_train_nothing() {
    // DeepSpeed's tests: a float16 copy backpropagated once to compare its gradients with
    // the engine's; no optimizer ever steps.
    check(
        r#"
        import torch

        def test_gradients_match(engine, x):
            reference = torch.nn.Linear(3, 3).half()
            reference(x).sum().backward()
            engine.backward(engine(x).sum())
            assert torch.allclose(reference.weight.grad, engine.module.weight.grad)
        "#,
        expect![""],
    );
}

#[test]
fn a_scaler_used_where_the_loss_is_backpropagated_scales_it() {
    check(
        r#"
        import torch

        def train(model, loader, optimizer, scaler):
            model = model.half()
            for x, y in loader:
                loss = model(x).sum()
                scaler.scale(loss).backward()
                scaler.step(optimizer)
                scaler.update()

        def train_apex(model, loader, optimizer):
            for x, y in loader:
                loss = model(x).sum()
                optimizer.backward(loss)
                optimizer.step()
        "#,
        expect![""],
    );
}

// ----- MEM004: periods of empty_cache ---------------------------------------------------

#[test]
fn empty_cache_in_the_accumulation_branch_runs_every_update() {
    check(
        r#"
        import torch
        ACCUM = 4
        LOG_EVERY = 500
        for i, (x, y) in enumerate(train_loader):
            loss = model(x).sum() / ACCUM
            loss.backward()
            if (i + 1) % ACCUM == 0:
                optimizer.step()
                optimizer.zero_grad()
                del loss
                torch.cuda.empty_cache()
            if i % LOG_EVERY == 0:
                torch.cuda.empty_cache()
            if i % 10 == 0:
                torch.cuda.empty_cache()
            if i % args.log_interval == 0:
                torch.cuda.empty_cache()
        "#,
        expect![[r#"
            11:9 MEM004 `torch.cuda.empty_cache()` in the per-step loop returns cach
            15:9 MEM004 `torch.cuda.empty_cache()` in the per-step loop returns cach
        "#]],
    );
}

// ----- MEM002: totals reset only now and then -------------------------------------------

#[test]
fn a_total_reset_every_log_interval_survives_the_steps_between() {
    check_with_values(
        r#"
        for epoch in range(10):
            train_loss = 0
            for batch_idx, (x, y) in enumerate(train_loader):
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                train_loss += loss
                if batch_idx % log_interval == 0:
                    print(train_loss.item() / log_interval)
                    train_loss = 0
        for epoch in range(10):
            for batch_idx, (x, y) in enumerate(train_loader):
                total = 0
                for micro in chunks(x):
                    total += criterion(model(micro), y)
                total.backward()
                optimizer.step()
        "#,
        expect![[r#"
            7:9 MEM002 `train_loss += loss` keeps each step's graph nodes and loss 
        "#]],
    );
}

#[test]
fn terms_of_a_dict_of_losses_accumulated_by_name_keep_their_graphs() {
    // MEM002: `terms` is a dict of losses built here; its values, iterated with `.items()`
    // (or `.values()`, or a list of them), carry history. Their `.item()` does not, nor do
    // the dict's keys, nor a dict of anything else.
    check_with_values(
        r#"
        def train(model, loader, optimizer, criterion):
            stats, names, lengths, seen = {}, {}, {}, []
            for x, y in loader:
                terms = {"ce": criterion(model(x), y), "l2": model(x).pow(2).mean()}
                loss = sum(terms.values())
                loss.backward()
                optimizer.step()
                for name, term in terms.items():
                    stats[name] += term
                for name, term in terms.items():
                    names[name] += term.item()
                for name in terms:
                    seen.append(name)
                sizes = {"x": len(x), "y": len(y)}
                for key, size in sizes.items():
                    lengths[key] += size

        train(model, train_loader, optimizer, criterion)
        "#,
        expect![[r#"
            9:13 MEM002 `stats[name] += term` keeps each step's graph nodes and loss
        "#]],
    );
}

#[test]
fn a_total_reset_at_each_outer_step_and_summed_over_micro_batches_holds_one_window() {
    // MEM002: reset at the top of each step of the loop that steps the optimizer, summed
    // over the micro-batches of that step and read after them: one accumulation window.
    // Reset only once per epoch, it outlives every optimizer step of the epoch.
    check_with_values(
        r#"
        def train(model, loader, optimizer, criterion, accum):
            for step, batch in enumerate(loader):
                total = 0
                optimizer.zero_grad()
                for micro in batch.chunk(accum):
                    loss = criterion(model(micro)) / accum
                    loss.backward()
                    total += loss
                optimizer.step()
                print(total.item())

        def train_epoch_total(model, loader, optimizer, criterion, accum):
            for epoch in range(10):
                total = 0
                for step, batch in enumerate(loader):
                    optimizer.zero_grad()
                    for micro in batch.chunk(accum):
                        loss = criterion(model(micro)) / accum
                        loss.backward()
                        total += loss
                    optimizer.step()
                print(total.item())

        train(model, train_loader, optimizer, criterion, 4)
        train_epoch_total(model, train_loader, optimizer, criterion, 4)
        "#,
        expect![[r#"
            20:17 MEM002 `total += loss` keeps each step's graph nodes and loss tenso
        "#]],
    );
}

#[test]
fn a_total_reset_at_every_optimizer_step_holds_one_accumulation_window() {
    // torchtune's recipes: each micro-batch's loss is backpropagated and summed for the
    // log, and the sum is reset in the branch that steps the optimizer.
    check_with_values(
        r#"
        for idx, batch in enumerate(dataloader):
            current_loss = loss_fn(model(batch), labels) / grad_accum_steps
            running_loss += current_loss
            current_loss.backward()
            if (idx + 1) % grad_accum_steps == 0:
                if clip:
                    clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
                print(running_loss.detach().item())
                running_loss = 0
        for idx, batch in enumerate(dataloader):
            current_loss = loss_fn(model(batch), labels)
            running_loss += current_loss
            current_loss.backward()
            optimizer.step()
            if (idx + 1) % log_every == 0:
                print(running_loss.detach().item())
                running_loss = 0
        "#,
        expect![[r#"
            14:5 MEM002 `running_loss += current_loss` keeps each step's graph nodes
        "#]],
    );
}

#[test]
fn a_step_functions_outputs_kept_after_their_loss_is_backpropagated() {
    check(
        r#"
        def fit(module, loader, optimizer, logs):
            for batch in loader:
                out = module.training_step(batch)
                out["loss"].backward()
                optimizer.step()
                logs.append(out)
            history = []
            for batch in loader:
                out = module.training_step(batch)
                out["loss"].backward()
                optimizer.step()
                history.append({k: v.item() for k, v in out.items()})
            for batch in loader:
                stats = module.log_step(batch)
                logs.append(stats)
        "#,
        expect![[r#"
            6:9 MEM002 `logs.append(out)` keeps each step's graph nodes and loss te
        "#]],
    );
}

#[test]
fn a_total_started_lazily_on_the_first_batch_survives_the_rest() {
    check_with_values(
        r#"
        def train(model, train_loader, criterion, optimizer):
            total = None
            for x, y in train_loader:
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                if total is None:
                    total = loss
                else:
                    total += loss

        def train_chunks(model, train_loader, criterion, optimizer):
            for x, y in train_loader:
                total = None
                for chunk in x.chunk(4):
                    loss = criterion(model(chunk), y)
                    if total is None:
                        total = loss
                    else:
                        total += loss
                total.backward()
                optimizer.step()

        train(model, train_loader, criterion, optimizer)
        train_chunks(model, train_loader, criterion, optimizer)
        "#,
        expect![[r#"
            10:13 MEM002 `total += loss` keeps each step's graph nodes and loss tenso
        "#]],
    );
}

// ----- MEM010: version switches -------------------------------------------------------

#[test]
fn the_fallback_of_a_version_switch_to_torch_amp_is_not_deprecated_use() {
    check(
        r#"
        import torch

        def make_scaler(device):
            return torch.amp.GradScaler(device=device) if TORCH_2_4 else torch.cuda.amp.GradScaler()

        def make_autocast():
            if hasattr(torch, "autocast"):
                ctx = torch.autocast("cuda")
            else:
                ctx = torch.cuda.amp.autocast()
            return ctx

        def legacy(flag):
            return torch.cuda.amp.GradScaler() if flag else None
        "#,
        expect![[r#"
            14:12 MEM010 `torch.cuda.amp.GradScaler()` uses `torch.cuda.amp.GradScale
        "#]],
    );
}
