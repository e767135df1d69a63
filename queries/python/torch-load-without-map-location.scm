; torch-load-without-map-location (MEM008)
; Every call of a name or attribute: `from torch import load as tl` can be spelled anyhow,
; so the rule resolves each callee through the imports, keeps `torch.load`, and checks for
; `map_location` (by keyword or as the second positional argument) and `**kwargs`.
(call
  function: [(identifier) (attribute)] @_callee) @call
