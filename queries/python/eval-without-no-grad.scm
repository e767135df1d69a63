; eval-without-no-grad (MEM001)
; Candidates: every call (of a name, an attribute, an item of a container: `nets["G"](z)`).
; The rule keeps the forward passes of a network whose output reaches no backward pass,
; with gradients enabled; the semantic model decides which those are.
(call
  function: (_) @callee) @call

; Legacy `Variable(x, volatile=True)`: a no-op since PyTorch 0.4. Whether the callee is
; `torch.autograd.Variable` (under any local name) is the rule's to decide.
(call
  arguments: (argument_list
    (keyword_argument
      name: (identifier) @_keyword
      value: (true)))
  (#eq? @_keyword "volatile")) @volatile_call
