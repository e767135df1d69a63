; retain-graph-in-loop (MEM005)
; Calls that pass `retain_graph=...`; the rule checks that the call is a backward
; (`x.backward`, `torch.autograd.backward`, `torch.autograd.grad`), that the value is
; `True`, that it runs in a loop on a graph built in that iteration, and that no second
; backward follows in the iteration.
(call
  arguments: (argument_list
    (keyword_argument
      name: (identifier) @_keyword
      value: (_) @value))
  (#eq? @_keyword "retain_graph")) @call
