; eval-without-no-grad (MEM001)
; Forward-pass candidates are every call (of a name, an attribute, an item of a container:
; `nets["G"](z)`): the rule takes them from the semantic model's index of calls, the roots
; this query runs at, instead of matching a pattern that every call matches (tree-sitter's
; query cursor at each call cost about a tenth of a lint). The rule keeps the forward
; passes of a network whose output reaches no backward pass, with gradients enabled; the
; semantic model decides which those are.

; Legacy `Variable(x, volatile=True)`: a no-op since PyTorch 0.4. Whether the callee is
; `torch.autograd.Variable` (under any local name) is the rule's to decide.
(call
  arguments: (argument_list
    (keyword_argument
      name: (identifier) @_keyword
      value: (true)))
  (#eq? @_keyword "volatile")) @volatile_call
