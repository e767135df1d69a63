; empty-cache-in-loop (MEM004)
; `torch.cuda.empty_cache()` under any import spelling (`release_cache()` after
; `from torch.cuda import empty_cache as release_cache` too): every call in a loop is a
; candidate; the rule resolves the name and checks which loop the call runs in.
(call
  function: [(identifier) (attribute)] @_callee) @call
