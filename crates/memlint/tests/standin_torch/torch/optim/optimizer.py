_post = {}


def register_optimizer_step_post_hook(hook):
    key = object()
    _post[key] = hook
    return key


class Optimizer:
    def step(self):
        for h in list(_post.values()):
            h(self, (), {})
