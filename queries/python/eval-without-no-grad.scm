; eval-without-no-grad (MEM001)
; Candidates: every call of a name or attribute. The rule keeps the forward passes of a
; model (`model(x)`, `self.encoder(x)`, `model.forward(x)`, `self(x)`) that run in
; evaluation code with gradients enabled; the semantic model decides which those are.
(call
  function: [(identifier) (attribute)] @callee) @call

; Legacy `Variable(x, volatile=True)`: a no-op since PyTorch 0.4.
(call
  function: [(identifier) (attribute)] @_variable
  arguments: (argument_list
    (keyword_argument
      name: (identifier) @_keyword
      value: (true)))
  (#match? @_variable "(^|\\.)Variable$")
  (#eq? @_keyword "volatile")) @volatile_call
