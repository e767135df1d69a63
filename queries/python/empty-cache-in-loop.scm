; empty-cache-in-loop (MEM004)
; `torch.cuda.empty_cache()` under any import spelling; the rule resolves the name and
; checks which loop the call runs in.
(call
  function: [(identifier) (attribute)] @_callee
  (#match? @_callee "(^|\\.)empty_cache$")) @call
